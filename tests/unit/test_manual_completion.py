"""Completing a failed job by hand: the person's invoices go through the workflow's own rules (a total that does not
add up is refused unless declared), and only a failed job may move to `completed` that way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.core.records import Job
from longhaul.storage.jobs import TRANSITIONS, JobStore, TransitionRejected
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
