"""Races (concurrent submissions) and cancellation."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core.clock import parse_iso
from longhaul.core.contracts import JobStatus
from longhaul.storage.jobs import JobStore
from tests.faults.helpers import DOCUMENT_ANALYSIS, assert_consistent, step_records
from tests.workflows.conftest import Client


def _executions(platform: LocalPlatform, job_id: str) -> list[dict[str, Any]]:
    sfn = platform.client("stepfunctions")
    machine = platform.deployment.state_machine(DOCUMENT_ANALYSIS)
    found = sfn.list_executions(stateMachineArn=machine, maxResults=1000)["executions"]
    return [e for e in found if e["name"].startswith(job_id)]


def test_fifty_concurrent_identical_submissions_make_one_job_and_one_execution(
    platform: LocalPlatform, alpha: Client, sample_request
):
    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(
            pool.map(lambda _: alpha.post("/v1/jobs", sample_request, **{"Idempotency-Key": "race-50"}), range(50))
        )
    assert {r.status_code for r in responses} == {202}
    job_ids = {r.json()["job_id"] for r in responses}
    assert len(job_ids) == 1
    (job_id,) = job_ids
    assert alpha.wait(job_id)["status"] == "completed"
    assert len(_executions(platform, job_id)) == 1
    events = alpha.events(job_id)
    assert [e["type"] for e in events].count("job_queued") == 1
    assert_consistent(events)
    listed = Client(platform, "ops").get("/v1/ops/jobs", tenant="alpha", limit=500).json()["jobs"]
    assert [j["job_id"] for j in listed].count(job_id) == 1
    assert job_id in [j["job_id"] for j in alpha.get("/v1/jobs", limit=200).json()["jobs"]]


def test_concurrent_different_payloads_under_one_key_make_one_job_and_422s(alpha: Client, sample_request):
    def submit(n: int) -> Any:
        body = {**sample_request, "input": {**sample_request["input"], "question": f"Variant question {n}?"}}
        return alpha.post("/v1/jobs", body, **{"Idempotency-Key": "race-different"})

    with ThreadPoolExecutor(max_workers=10) as pool:
        responses = list(pool.map(submit, range(10)))
    accepted = [r for r in responses if r.status_code == 202]
    assert len(accepted) == 1
    rejected = [r for r in responses if r.status_code == 422]
    assert len(rejected) == 9
    assert all(r.json()["job_id"] == accepted[0].json()["job_id"] for r in rejected)


def test_cancel_during_a_fan_out_stops_the_job_within_seconds_and_no_item_commits_afterwards(
    platform: LocalPlatform, alpha: Client
):
    filler = "This clause is read together with the schedules and survives termination of the agreement. " * 8
    text = "\n\n".join(f"Clause {n}. The liability cap for service {n} is {n} million. {filler}" for n in range(30))
    body = {
        "workflow": "document-analysis",
        "input": {
            "question": "What is the liability cap for each service?",
            "documents": [{"name": "caps.txt", "text": text}],
            "max_passages": 20,
            "passages_per_group": 1,
        },
    }
    first_item_done = threading.Event()
    slow = threading.Event()

    def slow_items(invocation: Any, call_next: Any) -> Any:
        result = call_next()
        if isinstance(invocation.event, dict) and invocation.event.get("step") == "extract_evidence":
            first_item_done.set()
            slow.wait(0.3)  # each item takes a while, so the fan-out is still going when the cancel lands
        return result

    with lambda_runtime.middleware(slow_items):
        job_id = alpha.submit(body)
        assert first_item_done.wait(60)
        response = alpha.post(f"/v1/jobs/{job_id}/cancel")
        assert response.status_code == 202, response.text
        outcome = response.json()
        assert outcome["status"] == "cancelled"
        assert "retrieve_passages" in outcome["completed_steps"]
        assert any("fan-out item" in effect for effect in outcome["side_effects"])

        execution = _executions(platform, job_id)[0]["executionArn"]
        sfn = platform.client("stepfunctions")
        wait_until(
            lambda: True if sfn.describe_execution(executionArn=execution)["status"] != "RUNNING" else None,
            timeout=10,
            what="the execution to stop",
        )
    assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
    # no item committed after the cancel was requested (a commit is conditional on a running job); an item that
    # committed just before may still append its `step_finished` event after the job's cancellation
    events = alpha.events(job_id)
    requested = next(e for e in events if e["type"] == "cancel_requested")
    committed = [r for r in step_records(platform, job_id) if r.get("status") == "succeeded"]
    assert any(r["step"] == "extract_evidence" for r in committed), "the fan-out had begun"
    assert all(parse_iso(r["finished_at"]) <= parse_iso(requested["at"]) for r in committed), requested["at"]
    assert alpha.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"
    assert_consistent(events)

    again = alpha.post(f"/v1/jobs/{job_id}/cancel")
    assert again.status_code == 202 and again.json()["message"] == "the job was already cancelled"


def test_cancelling_a_finished_job_is_a_clear_conflict(alpha: Client, beta: Client, sample_request):
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    response = alpha.post(f"/v1/jobs/{job_id}/cancel")
    assert response.status_code == 409
    assert response.json()["type"].endswith("/already-finished")
    assert beta.post(f"/v1/jobs/{job_id}/cancel").status_code == 404


def _loud(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name} {r.levelname} {r.getMessage()[:300]}" for r in caplog.records if r.levelno >= logging.WARNING]


def _hanging_job(alpha: Client, sample_request: dict[str, Any], inject: Any, spec: str) -> str:
    inject(spec)
    job_id = alpha.submit(sample_request)
    wait_until(lambda: lambda_runtime.hanging() or None, timeout=60, what="the hang")
    return job_id


def test_cancelling_a_running_job_logs_nothing_at_warning_or_above(
    platform: LocalPlatform, alpha: Client, sample_request, inject, caplog: pytest.LogCaptureFixture
):
    job_id = _hanging_job(alpha, sample_request, inject, "draft_answer=hang")
    caplog.set_level(logging.INFO)

    assert alpha.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    lambda_runtime.interrupt_waits()  # the hung invocation ends (and logs) now rather than minutes later
    wait_until(lambda: not lambda_runtime.hanging() or None, timeout=30, what="the hang to end")

    assert _executions(platform, job_id)[0]["status"] == "ABORTED"
    assert not _loud(caplog)
    assert any(r.levelno == logging.INFO and "stopped" in r.getMessage() for r in caplog.records)


def test_a_step_of_a_job_being_cancelled_ends_the_execution_without_warnings_or_errors(
    platform: LocalPlatform, alpha: Client, sample_request, inject, caplog: pytest.LogCaptureFixture
):
    # Given a job asked to cancel whose execution has not been stopped yet (the moment between the two)
    job_id = _hanging_job(alpha, sample_request, inject, "draft_answer=hangx1")
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    JobStore(table).transition(
        job_id, JobStatus.CANCEL_REQUESTED, event="cancel_requested", allowed_from=[JobStatus.RUNNING]
    )
    caplog.set_level(logging.INFO)

    # When the step's retry finds it: CancelledError, the state machine's JobStopped
    lambda_runtime.interrupt_waits()
    machine = platform.deployment.state_machine(DOCUMENT_ANALYSIS)
    arn = machine.replace(":stateMachine:", ":execution:") + f":{job_id}"
    ended = platform.wait_for_execution(arn, timeout=30)

    # Then the execution ended as a stop, and the log says so without a warning or an error
    assert ended["status"] == "FAILED" and ended["error"] == "JobStopped"
    assert not _loud(caplog)
    assert any(r.levelno == logging.INFO and "CancelledError" in r.getMessage() for r in caplog.records)
    alpha.post(f"/v1/jobs/{job_id}/cancel")  # what the sweep would do: finish the cancellation
