"""Scenario: a client submits documents and a question; the job runs every step and publishes cited answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import requests

from local import lambda_runtime
from longhaul.documents.parsing import parse_document
from longhaul.workflows import REGISTRY
from tests.workflows.conftest import SAMPLES, Client

SPEC = REGISTRY["document-analysis"]
STEPS = SPEC.step_names


def _page_text(request: dict[str, Any], document: str, page: int) -> str:
    doc = next(d for d in request["input"]["documents"] if d["name"] == document)
    parsed = parse_document(index=0, name=document, data=doc["text"].encode(), media_type=doc["media_type"])
    return parsed.pages[page - 1].text


def test_happy_path_completes_with_verified_citations_and_ordered_step_events(alpha: Client, sample_request):
    # Given the sample request, When it is submitted
    response = alpha.post("/v1/jobs", sample_request)
    assert response.status_code == 202
    accepted = response.json()
    assert response.headers["Location"] == accepted["status_url"]
    assert accepted["status"] == "queued" and accepted["estimated_sla_seconds"] > 0

    # Then it completes
    job = alpha.wait(accepted["job_id"])
    assert job["status"] == "completed", job
    assert job["progress"]["completed"] == job["progress"]["total"] == len(STEPS)

    # And the result answers with citations that resolve to a document, a page and a verbatim quote
    result = alpha.get(f"/v1/jobs/{accepted['job_id']}/result").json()
    assert result["answer"]
    assert result["citations"]
    names = {d["name"] for d in sample_request["input"]["documents"]}
    for citation in result["citations"]:
        assert citation["document"] in names
        assert citation["quote"] in _page_text(sample_request, citation["document"], citation["page"])

    # And the events list every step's start and finish, in workflow order (no page needs OCR: no OCR step)
    events = alpha.events(accepted["job_id"])
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
    top_level = [(e["type"], e["step"]) for e in events if e["type"].startswith("step_") and e.get("item") is None]
    # (a review the job did not ask for is a Choice of the state machine: it starts no step)
    skipped = {*SPEC.fan_out_steps, "review"}
    expected = [(kind, step) for step in STEPS if step not in skipped for kind in ("step_started", "step_finished")]
    assert top_level == expected
    items = [e for e in events if e.get("step") == "extract_evidence"]
    assert items and {e["type"] for e in items} == {"step_started", "model_called", "step_finished"}
    assert events[0]["type"] == "job_queued" and events[-1]["type"] == "job_completed"


def test_uploaded_pdf_is_parsed_and_pages_without_text_are_marked_for_ocr(alpha: Client):
    pdf = SAMPLES / "documents" / "schedule_3_service_levels_signed.pdf"
    ticket = alpha.post("/v1/uploads", {"filename": pdf.name, "media_type": "application/pdf"}).json()
    put = requests.put(ticket["upload_url"], data=pdf.read_bytes(), headers=ticket["headers"], timeout=30)
    assert put.status_code == 200
    job_id = alpha.submit(
        {
            "workflow": "document-analysis",
            "input": {
                "question": "What service levels and service credits apply?",
                "documents": [{"name": pdf.name, "upload_id": ticket["upload_id"]}],
            },
        }
    )
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    (summary,) = result["documents"]
    # The scanned page holds only drawn lines: OCR finds no text there, so it is reported unreadable, not dropped
    # (and only there: OCR tried it, so it no longer needs OCR)
    assert summary["media_type"] == "application/pdf" and summary["pages_needing_ocr"] == []
    assert summary["pages_unreadable"] == [2] and summary["pages_ocr"] == []
    assert all(c["document"] == pdf.name for c in result["citations"])


def test_same_idempotency_key_gives_the_same_job_and_a_different_body_is_rejected(alpha: Client, sample_request):
    first = alpha.post("/v1/jobs", sample_request, **{"Idempotency-Key": "wf-idem-1"})
    reordered = json.dumps(dict(reversed(list(sample_request.items()))), indent=2)
    second = alpha.post("/v1/jobs", data=reordered, **{"Idempotency-Key": "wf-idem-1"})
    assert first.status_code == second.status_code == 202
    assert first.json()["job_id"] == second.json()["job_id"]

    changed = {**sample_request, "input": {**sample_request["input"], "question": "Something else entirely?"}}
    conflict = alpha.post("/v1/jobs", changed, **{"Idempotency-Key": "wf-idem-1"})
    assert conflict.status_code == 422
    assert conflict.headers["Content-Type"].startswith("application/problem+json")
    assert conflict.json()["type"].endswith("/idempotency-key-reused")


def test_other_tenants_cannot_see_a_job(alpha: Client, beta: Client, sample_request):
    job_id = alpha.submit(sample_request)
    for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events", f"/v1/jobs/{job_id}/result"):
        response = beta.get(path)
        assert response.status_code == 404
        assert response.headers["Content-Type"].startswith("application/problem+json")


def test_bad_requests_get_specific_problems(alpha: Client):
    malformed = alpha.post("/v1/jobs", data="{not json")
    assert malformed.status_code == 400 and malformed.json()["type"].endswith("/malformed-json")
    unknown = alpha.post("/v1/jobs", {"workflow": "poetry", "input": {}})
    assert unknown.status_code == 422 and unknown.json()["type"].endswith("/invalid-request")
    assert alpha.post("/v1/jobs", data="x" * 2_000_000).status_code == 413


def test_an_unknown_workflow_is_422_listing_the_allowed_workflows(alpha: Client):
    unknown = alpha.post("/v1/jobs", {"workflow": "poetry", "input": {}})
    assert unknown.status_code == 422
    assert unknown.json()["allowed_workflows"] == list(REGISTRY)


def test_events_stream_as_sse_from_the_last_event_id_and_the_result_renders_as_markdown(alpha: Client, sample_request):
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    resume_after = events[3]["seq"]
    stream = requests.get(
        f"{alpha.base}/v1/jobs/{job_id}/events",
        headers={**alpha.headers, "Accept": "text/event-stream", "Last-Event-ID": str(resume_after)},
        timeout=30,
    )
    assert stream.status_code == 200 and stream.headers["Content-Type"].startswith("text/event-stream")
    ids = [int(line[4:]) for line in stream.text.splitlines() if line.startswith("id: ")]
    assert ids == [e["seq"] for e in events if e["seq"] > resume_after]
    assert stream.text.rstrip().endswith('data: {"status": "completed"}')

    markdown = requests.get(
        f"{alpha.base}/v1/jobs/{job_id}/result", headers={**alpha.headers, "Accept": "text/markdown"}, timeout=30
    )
    assert markdown.headers["Content-Type"].startswith("text/markdown")
    assert sample_request["input"]["question"] in markdown.text
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert all(c["quote"] in markdown.text for c in result["citations"])


def test_a_question_the_documents_do_not_address_completes_with_an_honest_answer_and_no_citations(
    alpha: Client, sample_request
):
    body = {**sample_request, "input": {**sample_request["input"], "question": "Quelle météo fera-t-il à Zanzibar?"}}
    job_id = alpha.submit(body)
    assert alpha.wait(job_id)["status"] == "completed"
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert result["citations"] == [] and result["claims"] == []
    assert "no passage" in result["answer"]


def test_fan_out_items_run_in_parallel(alpha: Client, sample_request):
    # Given a middleware that holds the first delivery of the first two extract_evidence items until both are inside
    # their invocations (serialized items would break the barrier: the first would wait alone, in vain)
    meet = threading.Barrier(2, timeout=30)
    lock = threading.Lock()
    claimed: set[int] = set()
    met: list[int] = []

    def rendezvous(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        event = invocation.event
        step = lambda_runtime.is_step_event(event) and event["step"] == "extract_evidence"  # not a failure record
        item = event.get("item") if step else None
        with lock:
            first = item in (0, 1) and item not in claimed
            if first:
                claimed.add(item)
        if first:
            meet.wait()
            met.append(item)
        return call_next()

    # When a job whose fan-out has one item per passage runs
    request = {**sample_request, "input": {**sample_request["input"], "passages_per_group": 1}}
    with lambda_runtime.middleware(rendezvous):
        job_id = alpha.submit(request)
        job = alpha.wait(job_id)

    # Then two items of the fan-out were in their invocations at the same time, and the job completed
    assert sorted(met) == [0, 1]
    assert job["status"] == "completed", job
    events = alpha.events(job_id)
    assert {0, 1} <= {e.get("item") for e in events if e.get("step") == "extract_evidence"}
