"""A job's cost: the price arithmetic, the transition count of a recorded history, request attribution per step,
and counting a finished job's transitions once."""

from __future__ import annotations

import json
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest

from longhaul.adapters.stepfunctions import StepFunctionsEngine
from longhaul.core import metering
from longhaul.core.contracts import JobStatus
from longhaul.core.metering import Compute, Metered, compute_usage, metered
from longhaul.core.ports import ExecutionHistory, ExecutionStatus, HistoryEvent
from longhaul.core.pricing import (
    AWS_PRICES,
    fargate_usd,
    job_cost,
    lambda_usd,
    orchestration_usd,
    requests_usd,
    to_micro,
)
from longhaul.core.records import Job
from longhaul.operations.costs import count_transitions, with_transitions
from longhaul.services import Services
from longhaul.storage.jobs import JobStore, NewJob
from tests.unit.aws_env import REGION
from tests.unit.conftest import BUCKET_NAME, TABLE_NAME
from tests.unit.fakes import FakeEngine

HISTORY = json.loads((Path(__file__).parent / "data" / "execution_history.json").read_text())["events"]
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:document-analysis"


# ---------------------------------------------------------------- prices


def test_each_part_is_priced_exactly_from_the_table() -> None:
    # Given 30 GB-s of Lambda in 10 invocations, one 2 vCPU / 4 GB Fargate minute, and requests of every kind
    usage = Metered(
        lambda_invocations=10,
        lambda_mb_ms=1024 * 30_000,
        fargate_tasks=1,
        fargate_ms=60_000,
        fargate_cpu_ms=2048 * 60_000,
        fargate_mb_ms=4096 * 60_000,
        dynamodb_read_half_units=3,
        dynamodb_write_units=40,
        s3_class_a=5,
        s3_class_b=7,
        sqs_requests=2,
    )
    # Then each part costs what the published prices say, to the last digit
    assert lambda_usd(usage) == Decimal("0.000402002")  # 30 x 0.0000133334 + 10 x 0.0000002
    assert to_micro(fargate_usd(usage)) == 1317  # 2/60 vCPU-h x 0.03238 + 4/60 GB-h x 0.00356 = 0.00131667
    assert requests_usd(usage) == Decimal("0.0000537875")  # 1.5 RRU, 40 WRU, 5 PUT, 7 GET, 2 SQS
    # And with 100 transitions ($0.0025) the orchestration is 4,272 micro-dollars, rounded once at the end
    assert to_micro(orchestration_usd(usage, 100)) == 4272


def test_a_thousand_transitions_cost_two_and_a_half_cents() -> None:
    assert orchestration_usd(Metered(), 1000) == Decimal("0.025")
    assert AWS_PRICES.region == "us-east-1" and AWS_PRICES.sources


def test_the_job_cost_adds_the_ledger_model_cost_and_is_estimated_until_final() -> None:
    usage = Metered(lambda_invocations=1, lambda_mb_ms=1024 * 1000)  # 1 GB-s
    cost = job_cost(
        usage,
        transitions=40,
        history_events=90,
        input_tokens=1200,
        output_tokens=300,
        model_cost_micro=2700,
        estimate_reason=None,
    )
    # 40 x 25 + 13.3334 + 0.2 = 1013.5334 micro-dollars of orchestration
    assert cost.orchestration.usd == "0.001014"
    assert cost.model.usd == "0.002700"
    assert cost.total == "0.003714"
    assert cost.orchestration.lambda_gb_seconds == 1.0
    assert cost.estimated is False
    assert job_cost(Metered(), transitions=None, history_events=None, input_tokens=0, output_tokens=0,
                    model_cost_micro=0, estimate_reason="running").estimated is True  # fmt: skip


def test_compute_is_billed_to_the_millisecond_and_fargate_a_minute_at_least() -> None:
    assert compute_usage(Compute("lambda", 1769), 1.2341) == Metered(lambda_invocations=1, lambda_mb_ms=1235 * 1769)
    assert compute_usage(Compute("lambda", 128), 0.00001).lambda_mb_ms == 128  # 1 ms at least
    fargate = compute_usage(Compute("fargate", memory_mb=4096, cpu=2048), 5.0)
    assert (fargate.fargate_ms, fargate.fargate_cpu_ms, fargate.fargate_mb_ms) == (60_000, 2048 * 60_000, 4096 * 60_000)
    assert compute_usage(None, 3.0) == Metered()


def test_a_lambda_sandbox_announces_its_memory_and_a_declared_worker_overrides_it() -> None:
    assert metering.current_compute({"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}) == Compute("lambda", 1769)
    assert metering.current_compute({}) is None
    with metering.running_on(Compute("fargate", memory_mb=4096, cpu=2048)):
        assert metering.current_compute({"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}).kind == "fargate"  # type: ignore[union-attr]


# ---------------------------------------------------------------- transitions


def test_a_recorded_history_counts_states_entered_plus_retries() -> None:
    events = [HistoryEvent(id=e["id"], type=e["type"], previous_id=e.get("previousEventId")) for e in HISTORY]
    # 6 states entered (a Task, the Map, one Task per iteration, a Choice, a Succeed) and 1 retry of the first Task
    assert count_transitions(events) == 7


class PagedClient:
    """A Step Functions client answering from recorded histories, two events a page, with optional map runs."""

    def __init__(self, histories: dict[str, list[dict[str, Any]]], map_runs: dict[str, list[str]] | None) -> None:
        self.histories, self.map_runs, self.pages = histories, map_runs, 0

    def get_execution_history(self, executionArn: str, maxResults: int, nextToken: str | None = None) -> Any:
        self.pages += 1
        start = int(nextToken or 0)
        events = self.histories[executionArn]
        more = start + 2 < len(events)
        return {"events": events[start : start + 2], **({"nextToken": str(start + 2)} if more else {})}

    def list_executions(self, mapRunArn: str) -> Any:
        if self.map_runs is None:
            raise TypeError("list_executions() got an unexpected keyword argument 'mapRunArn'")
        return {"executions": [{"executionArn": arn} for arn in self.map_runs[mapRunArn]]}


def _child(n: int) -> list[dict[str, Any]]:
    types = ["ExecutionStarted", "PassStateEntered", "PassStateExited", "SucceedStateEntered", "ExecutionSucceeded"]
    return [{"id": i + 1, "type": t, "previousEventId": i} for i, t in enumerate(types)]


@pytest.mark.parametrize("listed", [True, False])
def test_the_engine_pages_the_history_and_counts_a_distributed_maps_children_when_it_can(listed: bool) -> None:
    # Given a parent whose history started a map run of two child executions
    parent = MACHINE.replace(":stateMachine:", ":execution:") + ":job_1"
    run = {"id": 33, "type": "MapRunStarted", "previousEventId": 32,
           "mapRunStartedEventDetails": {"mapRunArn": "arn:map-run:1"}}  # fmt: skip
    client = PagedClient(
        {parent: [*HISTORY, run], "child-1": _child(1), "child-2": _child(2)},
        {"arn:map-run:1": ["child-1", "child-2"]} if listed else None,
    )

    # When its history is read through the engine port
    history = StepFunctionsEngine(client, {"document-analysis": MACHINE}).history("document-analysis", "job_1")

    # Then every page was read, and the children's transitions count when the engine lists them
    assert len(history.events) == len(HISTORY) + 1 and client.pages > len(HISTORY) // 2
    assert history.events[-1].map_run_arn == "arn:map-run:1"
    assert [count_transitions(c) for c in history.children] == ([2, 2] if listed else [])
    assert history.complete is listed


# ---------------------------------------------------------------- attribution of requests


def test_requests_count_into_the_meter_of_the_step_that_made_them_and_no_other(table: Any, s3: Any) -> None:
    # Given instrumented clients, shared by two steps running at once on two threads
    dynamodb = metering.instrument(boto3.client("dynamodb", region_name=REGION))
    storage = metering.instrument(boto3.client("s3", region_name=REGION))
    s3.create_bucket(Bucket=BUCKET_NAME)
    storage.put_object(Bucket=BUCKET_NAME, Key="k", Body=b"x")  # outside any step: counted nowhere
    barrier = threading.Barrier(2)
    found: dict[str, Metered] = {}
    key = {"pk": {"S": "JOB#j"}, "sk": {"S": "JOB"}}

    def step_a() -> None:
        with metered() as meter:
            for _ in range(3):
                barrier.wait()
                dynamodb.get_item(TableName=TABLE_NAME, Key=key, ConsistentRead=True)
            found["a"] = meter.requests()

    def step_b() -> None:
        with metered() as meter:
            barrier.wait()
            dynamodb.put_item(TableName=TABLE_NAME, Item={**key, "n": {"N": "1"}})
            barrier.wait()
            storage.get_object(Bucket=BUCKET_NAME, Key="k")
            storage.generate_presigned_url("get_object", Params={"Bucket": BUCKET_NAME, "Key": "k"})  # no request
            barrier.wait()
            storage.get_object(Bucket=BUCKET_NAME, Key="k")
            found["b"] = meter.requests()

    # When both run, interleaving their calls
    threads = [threading.Thread(target=step_a), threading.Thread(target=step_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then each meter holds its own step's requests only
    assert found["a"] == Metered(dynamodb_requests=3, dynamodb_read_half_units=6)
    assert found["b"] == Metered(dynamodb_requests=1, dynamodb_write_units=1, s3_requests=2, s3_class_b=2)


def test_transactions_and_batches_are_estimated_in_units() -> None:
    items = {"TransactItems": [{}, {}, {}]}
    assert metering.request_counts("dynamodb", "TransactWriteItems", items)["dynamodb_write_units"] == 6
    assert metering.request_counts("dynamodb", "Query", {})["dynamodb_read_half_units"] == 1  # eventually consistent
    assert metering.request_counts("s3", "PutObject", {}) == {"s3_requests": 1, "s3_class_a": 1}
    assert metering.request_counts("s3", "DeleteObject", {}) == {"s3_requests": 1}
    assert metering.request_counts("stepfunctions", "SendTaskHeartbeat", {}) == {}


# ---------------------------------------------------------------- a finished job's transitions, counted once


def _finished_job(store: JobStore) -> Job:
    job, _ = store.create_job(
        NewJob(job_id="job_cost_1", tenant_id="tenant-a", workflow="document-analysis", input_key="work/x/input.json",
               payload_hash="h", model="offline:test", estimated_sla_seconds=30, total_steps=2)
    )  # fmt: skip
    store.transition(job.job_id, JobStatus.RUNNING, event="job_started")
    return store.transition(job.job_id, JobStatus.COMPLETED, event="job_completed", set_fields={"result_key": "r"})


def test_a_finished_jobs_transitions_are_counted_once_its_execution_ended_and_stored(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a completed job whose execution still runs its last states
    job = _finished_job(store)
    events = [HistoryEvent(id=e["id"], type=e["type"], previous_id=e.get("previousEventId")) for e in HISTORY]
    engine.histories[("document-analysis", job.job_id)] = ExecutionHistory(events=events)
    engine.set_status("document-analysis", job.job_id, ExecutionStatus.RUNNING)

    # Then nothing is counted yet, and the cost says it is an estimate
    assert with_transitions(services, job).orchestration_transitions is None
    assert job.view().cost is not None and job.view().cost.estimated  # type: ignore[union-attr]
    assert engine.history_reads == []

    # When the execution has ended and the status is read twice
    engine.set_status("document-analysis", job.job_id, ExecutionStatus.SUCCEEDED)
    counted = with_transitions(services, store.get_job(job.job_id))  # type: ignore[arg-type]
    again = with_transitions(services, store.get_job(job.job_id))  # type: ignore[arg-type]

    # Then the history was paged once, the count is stored on the job, and its cost is final
    assert counted.orchestration_transitions == again.orchestration_transitions == 7
    assert again.orchestration_history_events == len(HISTORY)
    assert engine.history_reads == [("document-analysis", job.job_id)]
    cost = again.view().cost
    assert cost is not None and cost.estimated is False and cost.orchestration.transitions == 7


def test_step_usage_adds_up_on_the_job_and_reads_back_as_one_record(services: Services, store: JobStore) -> None:
    job = _finished_job(store)
    services.usage.add(job.job_id, Metered(lambda_invocations=1, lambda_mb_ms=500, s3_requests=2, s3_class_b=2))
    services.usage.add(job.job_id, Metered(lambda_invocations=1, lambda_mb_ms=700, sqs_requests=1))
    services.usage.add("job_missing", Metered(lambda_invocations=1))  # a job that is gone: nothing is created
    stored = store.get_job(job.job_id)
    assert stored is not None
    assert stored.metered == Metered(lambda_invocations=2, lambda_mb_ms=1200, s3_requests=2, s3_class_b=2,
                                     sqs_requests=1)  # fmt: skip
    assert store.get_job("job_missing") is None


def test_the_cost_page_states_the_price_table_as_the_code_has_it() -> None:
    section = (Path(__file__).resolve().parents[2] / "docs" / "operating" / "cost.md").read_text()
    p = AWS_PRICES

    def per(amount: Decimal, scale: int) -> str:
        return f"${(amount * scale).normalize():f}"

    for figure in (
        f"{p.region}, as of {p.as_of.isoformat()}",
        per(p.step_functions_transition, 1),
        f"{per(p.lambda_gb_second_arm64, 1)} per GB-s, {per(p.lambda_request, 1_000_000)} per million requests",
        f"{per(p.fargate_vcpu_hour_arm64, 1)} per vCPU-hour, {per(p.fargate_gb_hour_arm64, 1)} per GB-hour",
        f"{per(p.dynamodb_read_unit, 1_000_000)} per million read units",
        f"{per(p.dynamodb_write_unit, 1_000_000)} per million write units",
        f"{per(p.s3_class_a, 1000)} per 1,000 PUT/COPY/POST/LIST, {per(p.s3_class_b, 1000)} per 1,000 GET",
        f"{per(p.sqs_request, 1_000_000)} per million requests",
    ):
        assert figure in section, figure


def test_a_replayed_job_counts_the_transitions_of_each_of_its_executions(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a job counted after its first execution, then replayed (a second execution, `<job id>-r2`) and finished
    job = _finished_job(store)
    first = [HistoryEvent(id=e["id"], type=e["type"], previous_id=e.get("previousEventId")) for e in HISTORY]
    engine.histories[("document-analysis", job.job_id)] = ExecutionHistory(events=first)
    engine.set_status("document-analysis", job.job_id, ExecutionStatus.FAILED)
    assert with_transitions(services, job).orchestration_transitions == 7
    replayed = store.get_job(job.job_id).model_copy(  # type: ignore[union-attr]
        update={"attempts": 2, "execution_name": f"{job.job_id}-r2"}
    )
    second = [HistoryEvent(id=1, type="ExecutionStarted"), HistoryEvent(id=2, type="TaskStateEntered", previous_id=1)]
    engine.histories[("document-analysis", f"{job.job_id}-r2")] = ExecutionHistory(events=second)
    engine.set_status("document-analysis", f"{job.job_id}-r2", ExecutionStatus.SUCCEEDED)

    # When its status is read again, Then both executions count, and the new figure replaces the first
    assert with_transitions(services, replayed).orchestration_transitions == 7 + 1
    stored = store.get_job(job.job_id)
    assert stored is not None
    assert (stored.orchestration_transitions, stored.orchestration_counted_attempt) == (8, 2)


def test_unreachable_children_are_estimated_from_the_step_invocations_no_history_shows(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a finished job whose 10 step invocations ran 4 Lambda Tasks in the parent (one retried) and the rest in
    # Distributed Map children the engine does not list
    job = _finished_job(store)
    services.usage.add(job.job_id, Metered(lambda_invocations=10))
    events = [
        HistoryEvent(
            id=e["id"],
            type=e["type"],
            previous_id=e.get("previousEventId"),
            resource_type=(e.get("taskScheduledEventDetails") or {}).get("resourceType"),
        )
        for e in HISTORY
    ]
    engine.histories[("document-analysis", job.job_id)] = ExecutionHistory(events=events, complete=False)
    engine.set_status("document-analysis", job.job_id, ExecutionStatus.SUCCEEDED)

    # When it is counted, Then the 6 invocations no history shows are 6 transitions more, and the cost is estimated
    counted = with_transitions(services, store.get_job(job.job_id))  # type: ignore[arg-type]
    assert counted.orchestration_transitions == 7 + (10 - 4)
    cost = counted.view().cost
    assert cost is not None and cost.estimated is True
    # and it says why, and that this estimate does not settle (before counting: that the next read settles it)
    assert cost.estimate_reason is not None and "stays an estimate" in cost.estimate_reason
    before = job.view().cost
    assert before is not None and before.estimate_reason is not None and "settles" in before.estimate_reason
