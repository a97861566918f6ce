"""Fix-and-replay: an operator replays a failed job from a step; finished work is reused, not redone."""

from __future__ import annotations

from typing import Any

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
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
