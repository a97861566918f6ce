"""Scenarios: scanned pages are read by the OCR worker (a container task resumed by its token) and cited like text.

The worker runs as a subprocess started by the patched ECS RunTask, exactly as the image's entrypoint.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from pypdf import PdfReader, PdfWriter

from local import workers
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core.step_events import task_group
from longhaul.documents.ocr import OcrBatchResult
from tests.workflows.conftest import SAMPLES, Client

SCANNED = SAMPLES / "documents" / "lease_amendment_scanned.pdf"
MSA = SAMPLES / "documents" / "master_services_agreement.pdf"
QUESTION = "What security deposit does the Tenant pay and when is the deposit returned?"


@pytest.fixture
def ops(platform: LocalPlatform) -> Client:
    return Client(platform, "ops")


def _upload(client: Client, name: str, data: bytes) -> str:
    ticket = client.post("/v1/uploads", {"filename": name, "media_type": "application/pdf"}).json()
    put = requests.put(ticket["upload_url"], data=data, headers=ticket["headers"], timeout=30)
    assert put.status_code == 200
    return str(ticket["upload_id"])


def _submit(client: Client, documents: list[tuple[str, bytes]], question: str = QUESTION) -> str:
    refs = [{"name": name, "upload_id": _upload(client, name, data)} for name, data in documents]
    return client.submit({"workflow": "document-analysis", "input": {"question": question, "documents": refs}})


def _ocr_text(platform: LocalPlatform, job_id: str) -> dict[tuple[int, int], str]:
    """(document index, page) → the text the worker read there, from its batch artifacts."""
    s3 = platform.client("s3")
    bucket = platform.deployment.bucket_name
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"work/{job_id}/ocr_pages/")
    pages: dict[tuple[int, int], str] = {}
    for obj in listed.get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        for page in OcrBatchResult.model_validate_json(body).pages:
            pages[(page.document_index, page.number)] = page.text
    return pages


def _mixed_pdf() -> bytes:
    """Page 1 of the MSA (a text layer), then page 2 of the scanned amendment (an image only)."""
    writer = PdfWriter()
    writer.add_page(PdfReader(MSA).pages[0])
    writer.add_page(PdfReader(SCANNED).pages[1])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_scanned_pdf_is_read_by_ocr_and_its_pages_are_cited(alpha: Client, platform: LocalPlatform) -> None:
    # Given an image-only PDF, When a question only its pages answer is asked
    job_id = _submit(alpha, [(SCANNED.name, SCANNED.read_bytes())])
    job = alpha.wait(job_id, timeout=300)

    # Then the job completes, citing pages of that PDF whose quotes are text OCR read there
    assert job["status"] == "completed", job.get("error", {}).get("message")
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    read = _ocr_text(platform, job_id)
    assert result["citations"]
    for citation in result["citations"]:
        assert citation["document"] == SCANNED.name and citation["source"] == "ocr"
        assert citation["quote"] in read[(0, citation["page"])]
        assert 0.5 <= citation["ocr_confidence"] <= 1
    assert any("deposit" in c["quote"] and c["page"] == 2 for c in result["citations"])
    # and figures read as figures: the deposit is 21,000 GBP (the greedy reading had "21,oo0")
    assert "The Tenant shall pay a security deposit of 21,000 GBP." in read[(0, 2)].splitlines()
    assert "84,000 GBP" in read[(0, 1)]
    (summary,) = result["documents"]
    assert summary["pages_ocr"] == [1, 2] and summary["pages_needing_ocr"] == [] and summary["pages_unreadable"] == []

    # And the OCR step ran as items (one batch), each started and finished
    events = alpha.events(job_id)
    ocr = [(e["type"], e.get("item")) for e in events if e.get("step") == "ocr_pages"]
    assert ocr == [("step_started", 0), ("step_finished", 0)]

    # And its cost counts the worker's task time, billed a minute at least
    assert job["cost"]["orchestration"]["fargate_seconds"] >= 60


def test_a_mixed_pdf_cites_its_text_page_and_its_scanned_page(alpha: Client, platform: LocalPlatform) -> None:
    job_id = _submit(
        alpha,
        [("mixed.pdf", _mixed_pdf())],
        question="What is the Supplier and the Customer, and what security deposit does the Tenant pay?",
    )
    job = alpha.wait(job_id, timeout=300)
    assert job["status"] == "completed", job.get("error", {}).get("message")
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    text_page = PdfReader(io.BytesIO(_mixed_pdf())).pages[0].extract_text()
    read = _ocr_text(platform, job_id)
    sources = {(c["page"], c["source"]) for c in result["citations"]}
    assert (1, "text") in sources and (2, "ocr") in sources
    for citation in result["citations"]:
        page_text = text_page if citation["page"] == 1 else read[(0, 2)]
        assert citation["quote"] in page_text
    (summary,) = result["documents"]
    assert summary["pages_ocr"] == [2] and summary["pages_needing_ocr"] == []


def test_an_ocr_failure_is_retried_by_class(alpha: Client, inject: Callable[[str], None]) -> None:
    inject("ocr_pages#0=transientx1")
    job_id = _submit(alpha, [(SCANNED.name, SCANNED.read_bytes())])
    job = alpha.wait(job_id, timeout=300)
    assert job["status"] == "completed", "\n".join(
        str((e["type"], e.get("step"), e.get("detail"))) for e in alpha.events(job_id)
    )
    failures = [e for e in alpha.events(job_id) if e["type"] == "step_attempt_failed"]
    assert [(e["step"], e["detail"]["error"], e["detail"]["will_retry"]) for e in failures] == [
        ("ocr_pages", "TransientError", True)
    ]


def test_a_deterministic_ocr_failure_is_dead_lettered(
    alpha: Client, ops: Client, inject: Callable[[str], None]
) -> None:
    inject("ocr_pages#0=invalid-input")
    job_id = _submit(alpha, [(SCANNED.name, SCANNED.read_bytes())])
    job = alpha.wait(job_id, timeout=300)
    assert job["status"] == "failed" and job["error"]["step"] == "ocr_pages", job
    letters = ops.get("/v1/ops/dead-letters", step="ocr_pages").json()["dead_letters"]
    assert [(d["item"], d["error"]) for d in letters if d["job_id"] == job_id] == [(0, "InvalidInputError")]


def test_a_worker_that_stops_heartbeating_is_timed_out_and_retried(
    alpha: Client, inject: Callable[[str], None]
) -> None:
    inject("ocr_pages#0=hangx1")
    job_id = _submit(alpha, [(SCANNED.name, SCANNED.read_bytes())])
    assert alpha.wait(job_id, timeout=300)["status"] == "completed"
    starts = [e for e in alpha.events(job_id) if e["type"] == "step_started" and e.get("step") == "ocr_pages"]
    assert len(starts) == 1  # the hung task never started the step; the retried one did
    assert not any(e["type"] == "step_attempt_failed" for e in alpha.events(job_id))


def test_cancel_during_ocr_stops_the_worker_and_commits_nothing(alpha: Client, platform: LocalPlatform) -> None:
    job_id = _submit(alpha, [(SCANNED.name, SCANNED.read_bytes())])
    group = task_group(job_id)

    def ocr_started() -> bool | None:
        started = any(e["type"] == "step_started" and e.get("step") == "ocr_pages" for e in alpha.events(job_id))
        return True if started and workers.running_tasks(group) else None

    wait_until(ocr_started, timeout=120, interval=0.1, what="the OCR worker to start")
    cancelled = alpha.post(f"/v1/jobs/{job_id}/cancel", None)
    assert cancelled.status_code == 202, cancelled.text
    wait_until(lambda: not workers.running_tasks(group) or None, timeout=30, interval=0.1, what="the worker to stop")
    assert alpha.wait(job_id)["status"] == "cancelled"
    events = alpha.events(job_id)
    assert not any(e["type"] == "step_finished" and e.get("step") == "ocr_pages" for e in events)
    assert not _ocr_results(platform, job_id)

    # and an operator's replay runs the OCR again and completes the job, reusing the steps before it
    ops = Client(platform, "ops")
    replayed = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"reason": "cancelled by mistake"})
    assert replayed.status_code == 202, replayed.text
    assert replayed.json()["from_step"] == "ocr_pages" and replayed.json()["estimated_start_seconds"] == 0
    assert alpha.wait(job_id, timeout=180)["status"] == "completed"
    assert _ocr_results(platform, job_id)


def _ocr_results(platform: LocalPlatform, job_id: str) -> list[Path]:
    listed = platform.client("s3").list_objects_v2(
        Bucket=platform.deployment.bucket_name, Prefix=f"work/{job_id}/ocr_pages/"
    )
    return [Path(o["Key"]) for o in listed.get("Contents", [])]
