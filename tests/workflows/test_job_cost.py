"""Scenario: a completed job's status says what it cost: its orchestration (state transitions, Lambda time, AWS
requests) and its model tokens, priced from the repository's price table."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core.pricing import AWS_PRICES
from tests.workflows.conftest import Client


def _counted(alpha: Client, job_id: str) -> dict[str, Any]:
    """The status once the execution has ended and its transitions are counted (it ends just after the job)."""

    def counted() -> dict[str, Any] | None:
        job: dict[str, Any] = alpha.get(f"/v1/jobs/{job_id}").json()
        return job if job["cost"]["orchestration"]["transitions"] is not None else None

    return wait_until(counted, timeout=60, interval=0.2, what=f"transitions of {job_id} to be counted")


def _scheduled_in(events: list[dict[str, Any]], step: str) -> int:
    """Lambda tasks scheduled in the states of `step` (its state and its Map's iterations)."""
    state, scheduled = "", 0
    for event in events:
        if event["type"].endswith("StateEntered"):
            state = event["stateEnteredEventDetails"]["name"]
        elif event["type"] in ("TaskScheduled", "LambdaFunctionScheduled") and state.startswith(step):
            scheduled += 1
    return scheduled


def test_a_completed_job_shows_its_cost_orchestration_and_model(
    alpha: Client, platform: LocalPlatform, sample_request: dict[str, Any]
) -> None:
    # Given a completed job
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"

    # When its status is read after its execution ended
    job = _counted(alpha, job_id)
    cost = job["cost"]
    orchestration, model = cost["orchestration"], cost["model"]

    # Then the transitions are those of its execution's history (each state entered at least), counted once
    sfn = platform.client("stepfunctions")
    (execution,) = [
        e["executionArn"]
        for arn in platform.deployment.state_machines.values()
        for e in sfn.list_executions(stateMachineArn=arn)["executions"]
        if e["name"] == job_id
    ]
    history = sfn.get_execution_history(executionArn=execution)
    entered = sum(1 for e in history["events"] if e["type"].endswith("StateEntered"))
    assert orchestration["transitions"] >= entered > 0
    assert orchestration["history_events"] == len(history["events"])

    # And every Lambda task the execution scheduled is counted with its time and requests, once: the steps' and the
    # lanes' (a segment's timer is the steer lane's); a group of small documents is one invocation, however many
    # step records it starts
    scheduled = [e for e in history["events"] if e["type"] in ("TaskScheduled", "LambdaFunctionScheduled")]
    assert orchestration["lambda_invocations"] == len(scheduled) > 0
    parsed = [e for e in alpha.events(job_id) if e["type"] == "step_started" and e["step"] == "parse_documents"]
    assert (
        len(parsed) == len(sample_request["input"]["documents"]) > _scheduled_in(history["events"], "parse_documents")
    )
    assert orchestration["lambda_gb_seconds"] > 0
    assert orchestration["requests"]["dynamodb"] > 0 and orchestration["requests"]["s3"] > 0

    # And the model part is the budget ledger's: the same tokens, the same dollars
    assert model["input_tokens"] == job["usage"]["input_tokens"] > 0
    assert model["output_tokens"] == job["usage"]["output_tokens"] > 0
    assert model["usd"] == job["usage"]["cost_usd"]
    steps = job["budget"]["steps"]
    assert model["input_tokens"] == sum(s["input_tokens"] for s in steps)
    assert Decimal(model["usd"]) == sum(Decimal(s["cost_usd"]) for s in steps)

    # And the total is the sum, in the price table's currency, region and date, final (nothing left to count)
    assert Decimal(cost["total"]) == Decimal(orchestration["usd"]) + Decimal(model["usd"])
    assert Decimal(orchestration["usd"]) >= orchestration["transitions"] * AWS_PRICES.step_functions_transition
    assert (cost["currency"], cost["region"], cost["prices_as_of"]) == ("USD", "us-east-1", "2024-11-01")
    assert cost["estimated"] is False

    # And a later read shows the same figures (nothing is counted twice)
    assert alpha.get(f"/v1/jobs/{job_id}").json()["cost"] == cost
