"""Scenario: one trace per job (issue 44's acceptance). A job whose fan-out item fails once, whose evidence answer is
invalid once, whose draft's model call fails once as an outage would (`model-unavailable`), whose retrieval is slow,
which waits for a review a person decides and sends its webhooks: `GET /v1/ops/jobs/{id}/trace` answers one trace,
under the id derived from its correlation id, whose spans cover the submission, the queue wait, every step and item,
the failed model call and the one the retry made (GenAI attributes, attempts 1 and 2, the usage equal to the job's
ledger), the slow step, the review wait and the webhook delivery, none orphaned, with no document or prompt text in
any attribute; the tenant's `…/trace` has no operator-only attribute; the job view's `timing` splits its time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.api.traces import operator_only
from longhaul.core import faults
from longhaul.core.correlation import trace_id_for
from longhaul.core.genai import PROVIDER_ATTRIBUTE
from tests.faults.helpers import charges
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
    inject(
        "extract_evidence#0=transientx1,extract_evidence=schema-invalid-outputx1,"
        "draft_answer=model-unavailablex1,retrieve_passages=slowx1"
    )
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

    # The draft's model call failed as an outage would, and the step's retry made it again: two GenAI spans.
    drafts = sorted(
        (s for s in spans if s["attributes"].get(gen_ai.GEN_AI_OPERATION_NAME) and _in_step(s, spans, "draft_answer")),
        key=lambda s: s["start"],
    )
    assert [s["attributes"]["longhaul.attempt"] for s in drafts] == [1, 2], drafts
    assert (drafts[0]["status"], drafts[1]["status"] == "error") == ("error", False)
    assert drafts[0]["attributes"][error_attributes.ERROR_TYPE] == "UpstreamUnavailableError"
    for call in drafts:
        assert call["attributes"][PROVIDER_ATTRIBUTE] and call["attributes"][gen_ai.GEN_AI_REQUEST_MODEL]
    assert drafts[1]["attributes"][gen_ai.GEN_AI_USAGE_INPUT_TOKENS] > 0
    # Every answered model call's usage is exactly its ledger charge, and every settled charge has its span.
    answered = {
        s["attributes"]["longhaul.call_id"]: s["attributes"]
        for s in spans
        if s["status"] != "error" and gen_ai.GEN_AI_USAGE_INPUT_TOKENS in s["attributes"]
    }
    settled = {c["charge_id"]: c for c in charges(platform, job_id) if c.get("status") == "settled"}
    assert settled and set(answered) == set(settled)
    for call_id, attributes in answered.items():
        charge = settled[call_id]
        assert attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == int(charge["input_tokens"]), call_id
        assert attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == int(charge["output_tokens"]), call_id
    # The slow step's span shows its time.
    [retrieval_step] = [s for s in spans if s["name"] == "step retrieve_passages"]
    assert _seconds(retrieval_step) >= faults.SLOW_SECONDS

    # No span holds the question or a document's text (content capture is off by default).
    text = repr([s["attributes"] for s in spans])
    question = sample_request["input"].get("question", "")
    assert question and question not in text, "the question reached a span"
    for document in sample_request["input"]["documents"]:
        passage = document["text"].strip().splitlines()[-1][:60]
        assert passage and passage not in text, f"{document['name']}'s text reached a span"

    tenant = alpha.get(f"/v1/jobs/{job_id}/trace").json()
    assert tenant["trace_id"] == found["trace_id"]
    assert not [k for s in tenant["spans"] for k in s["attributes"] if operator_only(k)]
    assert Client(platform, "beta").get(f"/v1/jobs/{job_id}/trace").status_code == 404

    timing = alpha.get(f"/v1/jobs/{job_id}").json()["timing"]
    assert timing["review_wait_seconds"] > 0 and timing["executing_seconds"] > 0
    assert timing["backoff_seconds"] > 0  # the item's retry
    assert timing["provider_wait_seconds"] > 0  # the draft's retry after the outage
    assert timing["executing_seconds"] >= faults.SLOW_SECONDS
    parts = (
        "queue_wait_seconds",
        "executing_seconds",
        "backoff_seconds",
        "review_wait_seconds",
        "provider_wait_seconds",
    )
    assert sum(timing[p] for p in parts) <= timing["total_seconds"] + 0.5


def _seconds(span: dict[str, Any]) -> float:
    return (datetime.fromisoformat(span["end"]) - datetime.fromisoformat(span["start"])).total_seconds()


def _in_step(span: dict[str, Any], spans: list[dict[str, Any]], step: str) -> bool:
    """Whether `span` is (under) the span of an attempt of `step`."""
    by_id = {s["span_id"]: s for s in spans}
    current: dict[str, Any] | None = span
    while current is not None:
        if current["name"] == f"step {step}":
            return True
        current = by_id.get(current["parent_id"] or "")
    return False
