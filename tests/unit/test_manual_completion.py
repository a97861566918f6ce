"""Completing a failed job by hand: the person's invoices go through the workflow's own rules (a total that does not
add up is refused unless declared), and only a failed job may move to `completed` that way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from longhaul.core.contracts import Claim, JobResult, JobStatus, PersonCompletion, Verification
from longhaul.core.records import Job
from longhaul.core.step_events import StepEvent, WorkflowState
from longhaul.documents.parsing import Chunk
from longhaul.engine.context import StepContext
from longhaul.review.completion import ResultRefused
from longhaul.storage.jobs import TRANSITIONS, JobStore, TransitionRejected
from longhaul.storage.outbox import OutboxStore
from longhaul.workflows.document_analysis import by_hand as analysis_by_hand
from longhaul.workflows.invoice_reconciliation import by_hand, report
from longhaul.workflows.invoice_reconciliation.extraction import extract_invoice
from longhaul.workflows.invoice_reconciliation.models import Discrepancy, InvoiceResult
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList, parse_price_list
from tests.unit.step_support import JOB_ID, current, event_types
from tests.unit.step_support import job as job  # the fixture

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "invoices"
DOCUMENT = "inv_01_northwind.txt"


@pytest.fixture(scope="module")
def prices() -> PriceList:
    contract = SAMPLES / "contract_price_list.txt"
    return parse_price_list(contract.name, [(1, contract.read_text())])


@pytest.fixture
def invoice(prices: PriceList) -> InvoiceResult:
    """The sample invoice as the workflow reads it: its figures add up and match the contract."""
    extracted = extract_invoice(DOCUMENT, [(1, (SAMPLES / DOCUMENT).read_text())])
    return report.invoice_result(extracted, prices)


def _check(invoice: InvoiceResult, prices: PriceList) -> tuple[InvoiceResult, list[dict[str, Any]]]:
    errors: list[dict[str, Any]] = []
    return by_hand._checked_invoice(0, invoice, prices, errors), errors


def test_a_result_whose_figures_add_up_passes_as_the_rules_read_it(invoice: InvoiceResult, prices: PriceList):
    checked, errors = _check(invoice, prices)

    assert errors == []
    assert checked.status == "matched" and checked.discrepancies == []
    assert checked.extractor == "person" and checked.totals.total == invoice.totals.total


def test_a_total_that_does_not_add_up_is_refused_where_it_is(invoice: InvoiceResult, prices: PriceList):
    wrong = invoice.model_copy(update={"totals": invoice.totals.model_copy(update={"total": "775.24"})})

    _, errors = _check(wrong, prices)

    assert [e["loc"] for e in errors] == [["invoices", 0, "totals", "total"]]
    assert "expected 765.24" in errors[0]["msg"]


def test_a_wrong_line_total_is_refused_at_its_line(invoice: InvoiceResult, prices: PriceList):
    lines = [i.model_copy() for i in invoice.line_items]
    lines[1] = lines[1].model_copy(update={"line_total": "93.00"})

    _, errors = _check(invoice.model_copy(update={"line_items": lines}), prices)

    assert ["invoices", 0, "line_items", 1, "line_total"] in [e["loc"] for e in errors]


def test_a_declared_discrepancy_is_accepted_and_an_unfounded_one_refused(invoice: InvoiceResult, prices: PriceList):
    source = invoice.line_items[0].source
    declared = Discrepancy(
        rule="invoice-total", field="totals.total", expected="765.24", actual="775.24", source=source
    )
    wrong = invoice.model_copy(
        update={"totals": invoice.totals.model_copy(update={"total": "775.24"}), "discrepancies": [declared]}
    )

    checked, errors = _check(wrong, prices)
    _, unfounded = _check(invoice.model_copy(update={"discrepancies": [declared]}), prices)

    assert errors == [] and checked.status == "discrepancies"
    assert [d.field for d in checked.discrepancies] == ["totals.total"]
    assert [e["loc"] for e in unfounded] == [["invoices", 0, "discrepancies", 0]]


def test_a_figure_that_is_not_a_number_is_refused(invoice: InvoiceResult, prices: PriceList):
    wrong = invoice.model_copy(update={"totals": invoice.totals.model_copy(update={"subtotal": "seven hundred"})})

    _, errors = _check(wrong, prices)

    assert [e["loc"] for e in errors] == [["invoices", 0]]


def test_failed_to_completed_is_allowed_only_to_a_person(store: JobStore, job: Job):
    store.transition(JOB_ID, JobStatus.FAILED, event="job_failed")
    assert JobStatus.COMPLETED not in TRANSITIONS[JobStatus.FAILED]
    with pytest.raises(TransitionRejected):
        store.transition(JOB_ID, JobStatus.COMPLETED, event="job_completed")

    done = store.complete_by_person(current(store), detail={"by": "t/reviewer/k"}, fields={"result_key": "r"})

    assert done.status == JobStatus.COMPLETED and event_types(store)[-1] == "job_completed_by_person"
    with pytest.raises(TransitionRejected):  # and only once
        store.complete_by_person(current(store), detail={"by": "t/reviewer/k"}, fields={"result_key": "r"})


def test_a_completion_by_a_person_announces_job_completed_to_the_jobs_webhook(store: JobStore, job: Job, table: Any):
    store.update_job(JOB_ID, {"callback_url": "https://hooks.example.com/h"}, only_if=[JobStatus.QUEUED])
    store.transition(JOB_ID, JobStatus.FAILED, event="job_failed")

    done = store.complete_by_person(current(store), detail={"review_id": "rev_1"}, fields={"result_key": "r"})

    assert done.callback is not None and done.callback.event == "job.completed"
    webhook = OutboxStore(table).get(done.callback.webhook_id or "")
    assert webhook is not None and json.loads(webhook.body)["data"]["status"] == "completed"


# ---------------------------------------------------------------------- document-analysis: citations verified


PASSAGE = Chunk(
    chunk_id="d0-p1-c0", document="dpa.txt", document_index=0, page=1, text="Personal data is deleted within 90 days."
)


def _analysis_context(monkeypatch: pytest.MonkeyPatch, steps: dict[str, Any]) -> Any:
    """A context whose job indexed one passage; the result is built from what the person wrote alone."""
    monkeypatch.setattr(analysis_by_hand, "_chunks_by_id", lambda ctx, ids: {PASSAGE.chunk_id: PASSAGE})
    monkeypatch.setattr(analysis_by_hand, "indexed", lambda ctx: "plan_ocr" in ctx.state.steps)

    def result(ctx: Any, answer: str, claims: list[Claim], verification: Verification) -> JobResult:
        citations = [c for claim in claims for c in claim.citations]
        return JobResult(
            job_id=JOB_ID, question="q", answer=answer, claims=claims, citations=citations,
            verification=verification, model="offline", documents=[],
        )  # fmt: skip

    monkeypatch.setattr(analysis_by_hand, "_result", result)
    state = WorkflowState(job_id=JOB_ID, tenant_id="t", workflow="document-analysis", input_key="k", steps=steps)
    return StepContext(event=StepEvent(step="publish_result", input=state), services=None)  # type: ignore[arg-type]


COMPLETION = PersonCompletion(
    by="t/reviewer/k", review_id="rev_1", at=datetime(2026, 1, 1, tzinfo=UTC), requested_by="o"
)


def test_a_persons_citations_must_be_on_their_passages(monkeypatch: pytest.MonkeyPatch):
    ctx = _analysis_context(monkeypatch, {"plan_ocr": {}})
    quote = {"chunk_id": PASSAGE.chunk_id, "quote": "deleted within 90 days"}
    misquoted = {"chunk_id": PASSAGE.chunk_id, "quote": "deleted within 30 days"}
    answer = {"answer": "Within 90 days.", "claims": [{"text": "Deleted within 90 days.", "citations": [quote]}]}

    done = analysis_by_hand.complete(ctx, answer, COMPLETION)
    with pytest.raises(ResultRefused) as refused:
        analysis_by_hand.complete(
            ctx, {**answer, "claims": [{"text": "30 days", "citations": [quote, misquoted]}]}, COMPLETION
        )

    assert done.result.completed_by == "person" and done.result.completion == COMPLETION  # type: ignore[attr-defined]
    assert done.result.citations[0].page == 1 and "completed_by" in done.result.model_dump()  # type: ignore[attr-defined]
    assert [e["loc"] for e in refused.value.errors] == [["claims", 0, "citations", 1]]


def test_a_job_that_never_indexed_its_documents_cannot_be_cited_by_hand(monkeypatch: pytest.MonkeyPatch):
    ctx = _analysis_context(monkeypatch, {})
    answer = {"answer": "a", "claims": [{"text": "t", "citations": [{"chunk_id": "d0-p1-c0", "quote": "x"}]}]}

    with pytest.raises(ResultRefused, match="before its documents were indexed"):
        analysis_by_hand.complete(ctx, answer, COMPLETION)
