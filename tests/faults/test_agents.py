"""Agents under faults: a crash right after the notices were sent, a crash between a send and its record in the
outbox, the turn limit, and a job cancelled (or failing) after its notices went out: nothing is sent twice, a limit
fails the job `agent-limit`, and the saga retracts what was sent, in reverse order, and lists it on the job."""

from __future__ import annotations

from typing import Any

from local.deploy import wait_until
from local.platform import LocalPlatform
from tests.faults.helpers import assert_consistent, dead_letters
from tests.workflows.conftest import Client
from tests.workflows.disputes import approve, dispute_request, messages_of, reconcile, sent_messages, status_of

DISPUTE_RESOLUTION = "DisputeResolution"


def _notices(client: Client, job_id: str) -> dict[str, dict[str, Any]]:
    return {n["vendor"]: n for n in client.get(f"/v1/jobs/{job_id}/result").json()["notices"]}


def test_a_crash_right_after_the_sends_and_a_retry_send_nothing_twice(
    platform: LocalPlatform, alpha: Client, inject: Any
):
    reconciliation = reconcile(alpha)
    inject("send_notices=crash-after-side-effectx1")
    job_id = alpha.submit(dispute_request(reconciliation))
    job = approve(alpha, Client(platform, "alpha-reviewer"), job_id)
    assert job["status"] == "completed", job
    notices = _notices(alpha, job_id)
    assert {n["status"] for n in notices.values()} == {"sent"} and len(notices) == 2
    for notice in notices.values():
        assert len(messages_of(notice["operation_id"])) == 1, notice["vendor"]
    events = alpha.events(job_id)
    first_turn = [e for e in events if e.get("step") == "send_notices" and e.get("item") == 0]
    assert [e["type"] for e in first_turn].count("step_started") == 2, "the crashed turn ran again"
    assert [e["type"] for e in first_turn].count("step_finished") == 1
    intents = [e for e in events if e["type"] == "effect_intended" and e["detail"]["tool"] == "send_notice"]
    assert len(intents) == 2, "the retried turn answered from the outbox"
    assert_consistent(events)


def test_a_crash_between_a_send_and_its_outcome_is_not_sent_again(platform: LocalPlatform, alpha: Client, inject: Any):
    reconciliation = reconcile(alpha, vendors=("orion", "lumen"))
    inject("send_notices#0=crash-before-outcomex1")
    job_id = alpha.submit(dispute_request(reconciliation))
    job = approve(alpha, Client(platform, "alpha-reviewer"), job_id)
    assert job["status"] == "completed", job
    (notice,) = _notices(alpha, job_id).values()
    assert notice["status"] == "unknown"  # it went (the crash came after the send), but nothing recorded it
    assert len(messages_of(notice["operation_id"])) == 1, "an irreversible effect is never repeated"
    assert "effect_unknown" in [e["type"] for e in alpha.events(job_id)]


def test_max_turns_reached_ends_the_step_agent_limit(platform: LocalPlatform, alpha: Client):
    reconciliation = reconcile(alpha)
    before = len(sent_messages())
    job_id = alpha.submit(dispute_request(reconciliation, agent={"max_turns": 2}))
    job = alpha.wait(job_id)
    assert job["status"] == "failed"
    error = job["error"]
    assert error["kind"] == "agent-limit" and error["error"] == "AgentLimitError"
    assert error["step"] == "draft_notices" and error["message"].startswith("max_turns")
    assert len(sent_messages()) == before, "nothing was sent"
    (letter,) = dead_letters(platform, "draft_notices", job_id, expect=1, workflow=DISPUTE_RESOLUTION)
    assert letter["kind"] == "agent-limit"
    events = alpha.events(job_id)
    assert [e["detail"]["limit"] for e in events if e["type"] == "agent_limit_reached"] == ["max_turns"]
    assert len([e for e in events if e["type"] == "agent_turn"]) == 2
    assert_consistent(events)


def _compensated(client: Client, job_id: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        compensation = job.get("compensation") or {}
        return job if compensation.get("status") in ("finished", "incomplete") else None

    return wait_until(finished, timeout=120, interval=0.3, what=f"job {job_id}'s compensation")


def test_cancelling_after_a_notice_was_sent_retracts_it_and_lists_it_as_compensated(
    platform: LocalPlatform, alpha: Client, inject: Any
):
    reconciliation = reconcile(alpha)
    inject("publish_result=hang")  # the job waits in its last step (till its timeout), after the notices went out
    job_id = alpha.submit(dispute_request(reconciliation))
    waiting = status_of(alpha, job_id, "waiting_for_review", "failed", "completed")
    assert waiting["status"] == "waiting_for_review", waiting
    review_id = waiting["review"]["review_id"]
    Client(platform, "alpha-reviewer").post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"})
    wait_until(
        lambda: True if any(e["type"] == "step_finished" and e["step"] == "send_notices" and e.get("item") is None
                            for e in alpha.events(job_id)) else None,
        timeout=120,
        interval=0.2,
        what="the notices to be sent",
    )  # fmt: skip
    sends = [e for e in alpha.events(job_id) if e["type"] == "effect_done" and e["detail"]["tool"] == "send_notice"]
    assert len(sends) == 2

    cancelled = alpha.post(f"/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 202
    assert any("send_notice" in effect for effect in cancelled.json()["side_effects"])
    job = _compensated(alpha, job_id)

    assert job["status"] == "cancelled" and job["compensation"]["status"] == "finished"
    undone = job["compensation"]["undone"]
    assert job["compensation"]["not_undone"] == []
    notices = [u for u in undone if u["tool"] == "send_notice"]
    assert len(notices) == 2 and {u["compensation"] for u in notices} == {"send_retraction"}
    for sent in notices:
        notice, retraction = messages_of(sent["operation_id"])  # the notice, then its retraction
        assert retraction.subject == f"Withdrawn: {notice.subject}"
        assert retraction.destinations == notice.destinations
    events = alpha.events(job_id)
    started = [e["detail"]["operation_id"] for e in events if e["type"] == "compensation_started"]
    # An effect that did not act (a fact an earlier job of the tenant had confirmed already) has nothing to undo.
    acted = {e["detail"]["operation_id"] for e in events if e["type"] == "effect_done" and e["detail"]["acted"]}
    intended = [e["detail"]["operation_id"] for e in events if e["type"] == "effect_intended"]
    assert started == [op for op in reversed(intended) if op in acted], "compensations run in reverse order"
    assert {u["operation_id"] for u in undone} == acted
    assert [e["type"] for e in events].count("compensation_finished") == len(acted)
    ops = Client(platform, "ops").get("/v1/ops/tenants/alpha/memory").json()["memories"]
    assert job_id not in {m["job_id"] for m in ops}, "what the cancelled job remembered is forgotten"


def test_a_failure_after_the_notices_went_out_retracts_them(platform: LocalPlatform, alpha: Client, inject: Any):
    reconciliation = reconcile(alpha, vendors=("vega", "lumen"))
    inject("publish_result=invalid-input")
    job_id = alpha.submit(dispute_request(reconciliation))
    job = approve(alpha, Client(platform, "alpha-reviewer"), job_id)
    assert job["status"] == "failed" and job["error"]["step"] == "publish_result"
    job = _compensated(alpha, job_id)
    (sent,) = [u for u in job["compensation"]["undone"] if u["tool"] == "send_notice"]
    assert len(messages_of(sent["operation_id"])) == 2  # the notice and its retraction
    assert "saga_finished" in [e["type"] for e in alpha.events(job_id)]
