"""Fix-and-replay: an operator replays a failed job from a step; finished work is reused, not redone."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from local import lambda_runtime
from local.deploy import wait_until
from local.keys import ApiKey, seed_api_keys
from local.platform import LocalPlatform, seed_tenant_policies
from tests.faults.helpers import DOCUMENT_ANALYSIS, artifacts, assert_consistent, charges, dead_letters
from tests.workflows.conftest import Client

STEPS_BEFORE_VERIFY = ("parse_documents", "build_index", "retrieve_passages", "draft_answer")


def _events_after_replay(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    at = max(i for i, e in enumerate(events) if e["type"] == "job_replayed")
    return events[at + 1 :]


def test_a_job_failing_at_a_late_step_is_replayed_from_it_without_redoing_earlier_steps(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request, inject
):
    # Given a job that fails deterministically at verify_citations
    inject("verify_citations=invalid-input")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "failed"
    assert len(dead_letters(platform, "verify_citations", job_id, expect=1)) == 1
    listed = ops.get("/v1/ops/dead-letters", step="verify_citations").json()["dead_letters"]
    assert [d["job_id"] for d in listed].count(job_id) == 1
    before_artifacts, before_charges = artifacts(platform, job_id), charges(platform, job_id)

    # When the cause is fixed and an operator replays from that step
    inject("")
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "verify_citations", "reason": "fixed rule"})
    assert response.status_code == 202, response.text
    assert response.json()["attempt"] == 2
    assert response.json()["rerun_steps"] == ["verify_citations", "review", "publish_result"]
    assert response.json()["rerun_items"] == {}

    # Then the job completes without re-running the earlier steps
    job = alpha.wait(job_id)
    assert job["status"] == "completed" and job["attempts"] == 2 and job["error"] is None
    events = alpha.events(job_id)
    assert_consistent(events)
    rerun = {e["step"] for e in _events_after_replay(events) if e["type"] == "step_started"}
    # (the review the job did not ask for is one Choice of the state machine: it starts no step)
    assert rerun == {"verify_citations", "publish_result"} == set(response.json()["rerun_steps"]) - {"review"}
    replayed = next(e for e in events if e["type"] == "job_replayed")
    assert replayed["detail"]["by"] == "ops" and replayed["detail"]["reason"] == "fixed rule"
    # their artifacts untouched and no new model calls charged
    after = artifacts(platform, job_id)
    for key, stamp in before_artifacts.items():
        if any(f"/{step}/" in key for step in STEPS_BEFORE_VERIFY) or "/extract_evidence/" in key:
            assert after[key] == stamp, f"{key} was rewritten"
    assert len(charges(platform, job_id)) == len(before_charges)
    # and the dead letter is gone once the replay succeeded
    assert dead_letters(platform, "verify_citations", job_id) == []
    listed = ops.get("/v1/ops/dead-letters").json()["dead_letters"]
    assert job_id not in [d["job_id"] for d in listed]


def test_in_a_fan_out_of_20_items_only_the_3_failed_items_rerun(
    platform: LocalPlatform, alpha: Client, ops: Client, inject
):
    filler = "This clause is read together with the schedules and survives termination of the agreement. " * 8
    paragraphs = [
        f"Clause {n}. The supplier liability cap for service {n} is {n} million euros. {filler}" for n in range(30)
    ]
    body = {
        "workflow": "document-analysis",
        "input": {
            "question": "What is the supplier liability cap for each service?",
            "documents": [{"name": "caps.txt", "text": "\n\n".join(paragraphs)}],
            "max_passages": 20,
            "passages_per_group": 1,
        },
    }
    inject(",".join(f"extract_evidence#{n}=invalid-input" for n in (3, 7, 11)))
    job_id = alpha.submit(body)
    job = alpha.wait(job_id)
    assert job["status"] == "failed"
    assert job["error"]["step"] == "extract_evidence" and job["error"]["items"] == [3, 7, 11]
    assert job["error"]["kind"] == "invalid-input"
    assert sorted(m["item"] for m in dead_letters(platform, "extract_evidence", job_id, expect=3)) == [3, 7, 11]
    first = alpha.events(job_id)
    finished_items = {e["item"] for e in first if e["type"] == "step_finished" and e["step"] == "extract_evidence"}
    assert len(finished_items) == 17, "the other items must run to the end"

    inject("")
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "extract_evidence", "reason": "fixed items"})
    assert response.status_code == 202, response.text
    # kept: the 17 other passage groups, and the one document parsed (item 0 of parse_documents)
    assert response.json()["rerun_items"] == {"extract_evidence": [3, 7, 11]}
    kept = response.json()["kept_items"]
    assert kept["parse_documents"] == [0] and len(kept["extract_evidence"]) == 17
    named = [(n["step"], n["item"], n["unit"]) for n in response.json()["rerun_named"]]
    assert named == [("extract_evidence", n, "passage group") for n in (3, 7, 11)]
    assert response.json()["rerun_steps"] == [
        "extract_evidence",
        "draft_answer",
        "verify_citations",
        "review",
        "publish_result",
    ]

    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    assert_consistent(events)
    rerun = [
        e["item"]
        for e in _events_after_replay(events)
        if e["type"] == "step_started" and e["step"] == "extract_evidence"
    ]
    assert sorted(rerun) == [3, 7, 11]
    started = {e["step"] for e in _events_after_replay(events) if e["type"] == "step_started"}
    assert started == set(response.json()["rerun_steps"]) - {"review"}  # (not asked for: a Choice, no step)
    assert dead_letters(platform, "extract_evidence", job_id) == []


def test_replaying_is_for_operators_and_only_for_jobs_that_did_not_complete(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request
):
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    forbidden = alpha.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "draft_answer", "reason": "please"})
    assert forbidden.status_code == 403
    assert forbidden.json()["type"].endswith("/forbidden")
    refused = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "draft_answer", "reason": "again"})
    assert refused.status_code == 409 and refused.json()["type"].endswith("/not-replayable")
    unknown = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "nope", "reason": "typo"})
    assert unknown.status_code in (409, 422)


def test_replaying_twice_is_safe(platform: LocalPlatform, alpha: Client, ops: Client, sample_request, inject):
    inject("publish_result=invalid-inputx1")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "failed"
    first = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "publish_result", "reason": "first"})
    second = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "publish_result", "reason": "second"})
    assert first.status_code == 202
    assert second.status_code == 409, "a replay of a job that is already running again is refused"
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    assert [e["type"] for e in events].count("job_replayed") == 1
    assert_consistent(events)


def test_redrive_is_refused_with_a_reason_when_the_execution_ended_through_its_failure_path(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request, inject
):
    inject("build_index=internal")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "failed"
    events_before = alpha.events(job_id)
    response = ops.post(
        f"/v1/ops/jobs/{job_id}/replay", {"from_step": "build_index", "reason": "try redrive", "mode": "redrive"}
    )
    assert response.status_code == 409
    assert response.json()["type"].endswith("/redrive-unavailable") and "mode=replay" in response.json()["detail"]
    assert alpha.get(f"/v1/jobs/{job_id}").json()["status"] == "failed"
    assert alpha.events(job_id) == events_before, "a refused redrive changes nothing"


def test_a_job_whose_execution_was_aborted_outside_longhaul_is_replayed(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request, inject
):
    # Given a job whose execution an operator aborted in the console while a step hung
    before = platform.time_scale
    platform.set_time_scale(1.0)
    try:
        inject("draft_answer=hang")
        job_id = alpha.submit(sample_request)
        sfn = platform.client("stepfunctions")
        machine = platform.deployment.state_machine(DOCUMENT_ANALYSIS)
        arn = machine.replace(":stateMachine:", ":execution:") + f":{job_id}"
        wait_until(
            lambda: any("draftanswer" in n.lower() for n in lambda_runtime.hanging()) or None, timeout=30, what="hang"
        )
        sfn.stop_execution(executionArn=arn, error="Operator", cause="aborted in the console")
        lambda_runtime.interrupt_waits()
        assert alpha.get(f"/v1/jobs/{job_id}").json()["status"] in ("running", "retrying")
    finally:
        platform.set_time_scale(before)
    # When an operator replays it
    inject("")
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "draft_answer", "reason": "aborted by hand"})
    assert response.status_code == 202, response.text
    # Then the lost execution is recorded as a failure and the replay completes the job
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    failed = next(e for e in events if e["type"] == "job_failed")
    assert failed["detail"]["error"] == "ExecutionAborted"
    assert_consistent(events)


def test_a_replay_gets_the_full_deadline_again(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request, inject
):
    inject("verify_citations=invalid-inputx1")
    job_id = alpha.submit({**sample_request, "deadline_seconds": 120})
    assert alpha.wait(job_id)["status"] == "failed"
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    table.update_item(  # as if it had failed long ago
        Key={"pk": f"JOB#{job_id}", "sk": "JOB"},
        UpdateExpression="SET deadline_at = :past",
        ExpressionAttributeValues={":past": "2020-01-01T00:00:00.000Z"},
    )
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "verify_citations", "reason": "much later"})
    assert response.status_code == 202
    job = alpha.wait(job_id)
    assert job["status"] == "completed"
    assert job["deadline_at"] > job["created_at"]


def _reached(client: Client, job_id: str, status: str) -> dict[str, Any]:
    def now() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        return job if job["status"] == status else None

    return wait_until(now, timeout=60, interval=0.1, what=f"job {job_id} to be {status}")


def test_a_job_cancelled_during_review_and_replayed_goes_back_to_review(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request
):
    # Given a job that asked for review, cancelled while it waited for the reviewer
    job_id = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    first = _reached(alpha, job_id, "waiting_for_review")["review"]["review_id"]
    cancelled = alpha.post(f"/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 202 and "review" not in cancelled.json()["completed_steps"]
    assert cancelled.json()["completed_steps"][-1] == "verify_citations"
    logged = next(e for e in alpha.events(job_id) if e["type"] == "job_cancelled")
    assert "review" not in logged["detail"]["completed_steps"]

    # When an operator plans a replay, and then replays
    plan = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"reason": "cancelled by mistake", "dry_run": True})
    assert plan.status_code == 200, plan.text
    assert plan.json()["from_step"] == "review"
    assert plan.json()["rerun_steps"] == ["review", "publish_result"]
    assert plan.json()["undecided_reviews"] == ["review"]
    replayed = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"reason": "cancelled by mistake"})
    assert replayed.status_code == 202, replayed.text

    # Then the job waits for a reviewer again (a new review), and nothing is published before a decision
    again = _reached(alpha, job_id, "waiting_for_review")
    second = again["review"]["review_id"]
    assert second != first and alpha.get(f"/v1/jobs/{job_id}/result").status_code == 409
    decided = Client(platform, "alpha-reviewer").post(f"/v1/reviews/{second}/decision", {"decision": "approve"})
    assert decided.status_code == 200, decided.text
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    assert_consistent(events)
    after = _events_after_replay(events)
    assert [e["type"] for e in after].index("review_decided") < [e["type"] for e in after].index("job_completed")


class _Held:
    """Holds the invocations of one step of the first job of `tenant` that reaches it, until released (a middleware
    of the local Lambda runtime)."""

    def __init__(self, step: str, tenant: str) -> None:
        self.step, self.tenant, self.job_id = step, tenant, ""
        self.entered, self.released, self.lock = threading.Event(), threading.Event(), threading.Lock()

    def __call__(self, invocation: Any, call_next: Any) -> Any:
        event = invocation.event if isinstance(invocation.event, dict) else {}
        state = event.get("input") or {}
        if event.get("step") == self.step and state.get("tenant_id") == self.tenant:
            with self.lock:
                self.job_id = self.job_id or str(state.get("job_id"))
            if state.get("job_id") == self.job_id:
                self.entered.set()
                self.released.wait(60)
        return call_next()


@pytest.mark.parametrize("stage", ["parse_documents", "extract_evidence", "publish_result"])
def test_a_job_cancelled_at_a_stage_is_replayed_to_completion(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request, stage: str
):
    # Given a job cancelled while a stage (a fan-out's item, the publication) was running
    held = _Held(stage, "alpha")
    with lambda_runtime.middleware(held):
        job_id = alpha.submit(sample_request)
        assert held.entered.wait(60), f"{stage} did not start"
        assert held.job_id == job_id
        cancelled = alpha.post(f"/v1/jobs/{job_id}/cancel")
        held.released.set()
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    stopped = alpha.wait(job_id)
    assert stopped["status"] == "cancelled" and stage not in cancelled.json()["completed_steps"]
    # its progress says what was done and that it stopped, in its view and in the tenant's list alike
    progress = stopped["progress"]
    done = f"cancelled: {progress['completed']:,} of {progress['total']:,} {progress['unit']} done"
    assert progress["message"].startswith(done) and "running" not in progress["message"]
    listed = alpha.get("/v1/jobs", status="cancelled").json()["jobs"]
    assert next(j for j in listed if j["job_id"] == job_id)["progress"] == progress

    # When an operator replays it without naming a step
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"reason": "cancelled by mistake"})

    # Then it starts again from the stage it stopped in (or before), and completes
    assert response.status_code == 202, response.text
    plan = response.json()
    assert stage in plan["rerun_steps"] and plan["undecided_reviews"] == []
    assert plan["estimated_start_seconds"] == 0
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    assert_consistent(events)
    after = [e["type"] for e in _events_after_replay(events)]
    assert after[0] == "job_started" and after[-1] == "job_completed"
    assert alpha.get(f"/v1/jobs/{job_id}/result").status_code == 200


def test_a_job_cancelled_while_queued_is_replayed_and_says_why_it_waits(
    platform: LocalPlatform, ops: Client, sample_request
):
    # Given a tenant with one job in flight, whose second job was cancelled while it waited for the slot
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    key = ApiKey(tenant="zeta", key="lh_local_zeta_0123456789abcdef")
    seed_api_keys(table, [key])
    platform.keys.append(key)
    seed_tenant_policies(table, json.dumps({"zeta": {"jobs_in_flight": 1}}))
    zeta = Client(platform, "zeta")
    held = _Held("list_documents", "zeta")
    with lambda_runtime.middleware(held):
        first = zeta.submit(sample_request)
        assert held.entered.wait(60) and held.job_id == first
        queued = zeta.post("/v1/jobs", sample_request).json()
        job_id = queued["job_id"]
        assert queued["estimated_start_seconds"] > 0
        assert zeta.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"

        # When an operator replays it while the slot is still taken
        response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"reason": "cancelled by mistake"})

        # Then the replay says it waits, and why, in its answer and in the job's log
        assert response.status_code == 202, response.text
        assert response.json()["estimated_start_seconds"] > 0
        assert response.json()["from_step"] == "list_documents"
        waiting = next(e for e in zeta.events(job_id) if e["type"] == "replay_waiting")
        assert waiting["detail"]["estimated_start_seconds"] == response.json()["estimated_start_seconds"]
        assert "admission slot" in waiting["detail"]["reason"]
        assert zeta.get(f"/v1/jobs/{job_id}").json()["status"] == "queued"
        held.released.set()

    # and it starts once the slot frees, and completes
    assert zeta.wait(first)["status"] == "completed"
    assert zeta.wait(job_id)["status"] == "completed"
    assert_consistent(zeta.events(job_id))
