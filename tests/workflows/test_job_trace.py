"""Scenario: one trace per job. A job whose fan-out item fails once and whose draft's model answer is invalid once,
which waits for a review a person decides and sends its webhooks: `GET /v1/ops/jobs/{id}/trace` answers one trace,
under the id derived from its correlation id, whose spans cover the submission, the queue wait, every step and item,
the review wait and the webhook delivery, none orphaned, with no document or prompt text in any attribute; the
tenant's `…/trace` has no operator-only attribute; the job view's `timing` splits its time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.api.traces import operator_only
from longhaul.core.correlation import trace_id_for
from tests.unit.receiver import receiver
from tests.workflows.conftest import Client
from tests.workflows.test_review_and_webhooks import allow, reviewer, status_of

__all__ = ["allow", "reviewer"]


def test_a_jobs_trace_covers_its_whole_story(
    platform: LocalPlatform,
    alpha: Client,
    reviewer: Client,
    allow: Any,
    inject: Callable[[str], None],
    sample_request: dict[str, Any],
) -> None:
    inject("extract_evidence#0=transientx1,draft_answer=schema-invalid-outputx1")
    with receiver() as hook:
        allow(hook)
        job_id = alpha.submit(
            {**sample_request, "review": {"mode": "always"}, "callback_url": f"{hook.origin}/longhaul"},
            **{"X-Request-Id": "trace-scenario-1"},
        )
        review_id = status_of(alpha, job_id, "waiting_for_review")["review"]["review_id"]
        assert reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"}).status_code == 200
        job = alpha.wait(job_id)
        wait_until(
            lambda: alpha.get(f"/v1/jobs/{job_id}").json()["callback"]["status"] == "delivered" or None,
            timeout=60,
            what="the webhook to be delivered",
        )
    assert job["status"] == "completed"
    ops = Client(platform, "ops")

    def delivered() -> dict[str, Any] | None:
        answer = ops.get(f"/v1/ops/jobs/{job_id}/trace")
        trace = answer.json()
        assert answer.status_code == 200, trace
        return trace if any(s["name"] == "webhook delivery" for s in trace["spans"]) else None

    found = wait_until(delivered, timeout=30, what="the webhook's span")
    assert found["trace_id"] == trace_id_for("trace-scenario-1")
    spans = found["spans"]
    ids = {s["span_id"] for s in spans}
    assert [s["name"] for s in spans if s["parent_id"] is None] == ["submit job"]
    assert all(s["parent_id"] in ids for s in spans if s["parent_id"] is not None), "an orphaned span"
    names = {s["name"] for s in spans}
    assert {"submission transaction", "queue wait", "review wait", "webhook delivery", "retrieval"} <= names
    started = {(e["step"], e.get("item")) for e in alpha.events(job_id) if e["type"] == "step_started"}
    assert started and {f"step {step}" for step, _ in started} <= names  # every step that ran
    attempts = {
        (s["attributes"].get("longhaul.step"), s["attributes"].get("longhaul.item"))
        for s in spans
        if s["name"].startswith("step ")
    }
    assert started <= attempts, "a step or item without its span"
    items = {s["attributes"].get("longhaul.item") for s in spans if s["name"] == "step extract_evidence"}
    assert 0 in items
    failed = [s for s in spans if s["name"] == "step extract_evidence" and s["status"] == "error"]
    assert failed and failed[0]["attributes"]["error.type"]
    question = sample_request["input"].get("question", "")
    text = repr([s["attributes"] for s in spans])
    assert question and question not in text, "the question reached a span"

    tenant = alpha.get(f"/v1/jobs/{job_id}/trace").json()
    assert tenant["trace_id"] == found["trace_id"]
    assert not [k for s in tenant["spans"] for k in s["attributes"] if operator_only(k)]
    assert Client(platform, "beta").get(f"/v1/jobs/{job_id}/trace").status_code == 404

    timing = alpha.get(f"/v1/jobs/{job_id}").json()["timing"]
    assert timing["review_wait_seconds"] > 0 and timing["executing_seconds"] > 0
    assert timing["backoff_seconds"] > 0  # the item's retry
    parts = ("queue_wait_seconds", "executing_seconds", "backoff_seconds", "review_wait_seconds")
    assert sum(timing[p] for p in parts) <= timing["total_seconds"] + 0.5
