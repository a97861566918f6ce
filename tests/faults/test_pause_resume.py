"""Pause and resume on the local platform: a job paused during its fan-out keeps its finished items, holds no compute
while paused, and completes after the resume with the same result as a job never paused."""

from __future__ import annotations

import threading
import time
from typing import Any

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
from tests.faults.helpers import assert_consistent, step_records
from tests.workflows.conftest import Client

FILLER = "This clause is read together with the schedules and survives termination of the agreement. " * 8
TEXT = "\n\n".join(f"Clause {n}. The liability cap for service {n} is {n} million. {FILLER}" for n in range(24))
BODY = {
    "workflow": "document-analysis",
    "input": {
        "question": "What is the liability cap for each service?",
        "documents": [{"name": "caps.txt", "text": TEXT}],
        "max_passages": 16,
        "passages_per_group": 1,
    },
}


def _status(client: Client, job_id: str) -> dict[str, Any]:
    return dict(client.get(f"/v1/jobs/{job_id}").json())


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A result without what differs between two jobs of the same input (their ids, times and costs)."""
    return {k: v for k, v in result.items() if k in ("answer", "citations", "evidence", "sections")}


def test_a_job_paused_in_its_fan_out_keeps_its_items_holds_no_compute_and_completes_as_an_unpaused_one(
    platform: LocalPlatform, alpha: Client, beta: Client
):
    reference = alpha.submit(BODY)
    first_item_done = threading.Event()
    invocations: list[tuple[str, str]] = []  # (job, step#item) of every step invocation

    def watch(invocation: Any, call_next: Any) -> Any:
        event = invocation.event if isinstance(invocation.event, dict) else {}
        if event.get("input", {}).get("job_id") and event.get("step"):
            invocations.append((event["input"]["job_id"], f"{event['step']}#{event.get('item')}"))
        result = call_next()
        if event.get("step") == "extract_evidence":
            first_item_done.set()
            time.sleep(0.2)  # items take a while: the fan-out is under way when the pause lands
        return result

    with lambda_runtime.middleware(watch):
        job_id = alpha.submit(BODY)
        assert first_item_done.wait(60)
        asked = time.monotonic()
        response = alpha.post(f"/v1/jobs/{job_id}/pause")
        assert response.status_code == 202, response.text
        assert response.json()["pause"]["requested_by"] == "alpha"
        # asking again is safe: the same answer, no second event
        again = alpha.post(f"/v1/jobs/{job_id}/pause")
        assert again.status_code in (202, 409), again.text
        wait_until(lambda: _status(alpha, job_id)["status"] == "paused" or None, timeout=30, what="the pause")
        latency = time.monotonic() - asked
        # another tenant's job: 404 on every steering route
        for route in ("pause", "resume"):
            assert beta.post(f"/v1/jobs/{job_id}/{route}").status_code == 404
        assert alpha.post(f"/v1/jobs/{job_id}/pause").status_code == 409  # paused already: 409 with the status
        assert alpha.post(f"/v1/jobs/{job_id}/pause").json()["job_status"] == "paused"

        time.sleep(1.0)  # items under way when the pause was reached finish now
        settled = [name for job, name in invocations if job == job_id]
        time.sleep(2.0)
        during = [name for job, name in invocations if job == job_id][len(settled) :]
        assert not during, f"steps ran while paused: {during}"
        paused_view = _status(alpha, job_id)
        assert paused_view["status"] == "paused" and paused_view["pause"]["step"] == "extract_evidence"
        assert paused_view["waiting"]["reason"] == "paused" and paused_view["waiting"]["step"] == "extract_evidence"
        kept = {
            r["item"]
            for r in step_records(platform, job_id)
            if r["step"] == "extract_evidence" and r.get("status") == "succeeded" and r.get("item") is not None
        }
        assert kept, "the items finished before the pause are kept"

        resumed = alpha.post(f"/v1/jobs/{job_id}/resume")
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "running"
        assert _status(alpha, job_id)["waiting"] is None or _status(alpha, job_id)["waiting"]["reason"] != "paused"
        assert alpha.post(f"/v1/jobs/{job_id}/resume").status_code == 200  # a duplicate resume is safe
        final = alpha.wait(job_id)
    assert final["status"] == "completed", final
    assert latency <= 10, latency
    assert alpha.wait(reference)["status"] == "completed"
    paused_result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    reference_result = alpha.get(f"/v1/jobs/{reference}/result").json()
    assert _comparable(paused_result) == _comparable(reference_result)
    events = alpha.events(job_id)
    types = [e["type"] for e in events]
    assert types.count("pause_requested") == 1 and types.count("job_paused") == 1
    assert types.count("job_resumed") >= 1
    paused = next(e for e in events if e["type"] == "job_paused")
    assert paused["detail"] == {"step": "extract_evidence", "requested_by": "alpha"}
    assert_consistent(events)  # among others: no item committed twice (the re-entered Map skipped the kept ones)
    finished = [e["item"] for e in events if e["type"] == "step_finished" and e.get("step") == "extract_evidence"]
    assert len(finished) == len(set(finished)) and kept <= set(finished)


def test_a_paused_job_can_be_cancelled_and_its_execution_stops(platform: LocalPlatform, alpha: Client, sample_request):
    job_id = alpha.submit(sample_request)
    assert alpha.post(f"/v1/jobs/{job_id}/pause").status_code == 202
    wait_until(lambda: _status(alpha, job_id)["status"] in ("paused", "completed") or None, timeout=60, what="pause")
    assert _status(alpha, job_id)["status"] == "paused"
    response = alpha.post(f"/v1/jobs/{job_id}/cancel")
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "cancelled"
    assert alpha.post(f"/v1/jobs/{job_id}/resume").status_code == 409
    sfn = platform.client("stepfunctions")
    machine = platform.deployment.state_machine("DocumentAnalysis")
    execution = next(
        e["executionArn"]
        for e in sfn.list_executions(stateMachineArn=machine, maxResults=1000)["executions"]
        if e["name"].startswith(job_id)
    )
    wait_until(
        lambda: sfn.describe_execution(executionArn=execution)["status"] != "RUNNING" or None,
        timeout=10,
        what="the execution to stop",
    )
    assert_consistent(alpha.events(job_id))


def test_a_resume_before_the_pause_is_reached_withdraws_it(alpha: Client, sample_request):
    started, release = threading.Event(), threading.Event()

    def gate(invocation: Any, call_next: Any) -> Any:
        if isinstance(invocation.event, dict) and invocation.event.get("step") == "list_documents":
            started.set()
            release.wait(30)  # the first step is still under way while the pause is asked for and withdrawn
        return call_next()

    with lambda_runtime.middleware(gate):
        job_id = alpha.submit(sample_request)
        assert started.wait(60)
        assert alpha.post(f"/v1/jobs/{job_id}/pause").status_code == 202
        withdrawn = alpha.post(f"/v1/jobs/{job_id}/resume")
        release.set()
    assert withdrawn.status_code == 200, withdrawn.text
    assert withdrawn.json()["pause"] is None
    assert alpha.wait(job_id)["status"] == "completed"
    types = [e["type"] for e in alpha.events(job_id)]
    assert "job_paused" not in types and types.count("pause_withdrawn") == 1
