"""Per-invoice results, the summary and its check against validated numbers, and the Markdown report."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from longhaul.adapters.models.offline import OfflineExtractiveModel
from longhaul.documents.parsing import media_type_for, parse_document
from longhaul.workflows.invoice_reconciliation.extraction import EXTRACTOR, extract_invoice
from longhaul.workflows.invoice_reconciliation.models import InvoiceReconciliationResult
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList, parse_price_list
from longhaul.workflows.invoice_reconciliation.prompts import summary_request
from longhaul.workflows.invoice_reconciliation.report import (
    check_summary,
    contract_summary,
    deterministic_summary,
    identifiers,
    invoice_result,
    reconciliation_result,
    render_markdown,
    validated_numbers,
)
from longhaul.workflows.invoice_reconciliation.sourcing import verify

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "invoices"
INVOICE_FILES = sorted(p.name for p in SAMPLES.iterdir() if p.name.startswith("inv_"))


def pages_of(name: str) -> list[tuple[int, str]]:
    data = (SAMPLES / name).read_bytes()
    doc = parse_document(index=0, name=name, data=data, media_type=media_type_for(name, None))
    return [(page.number, page.text) for page in doc.pages]


@pytest.fixture(scope="module")
def prices() -> PriceList:
    return parse_price_list("contract_price_list.txt", pages_of("contract_price_list.txt"))


@pytest.fixture(scope="module")
def result(prices: PriceList) -> InvoiceReconciliationResult:
    invoices = []
    for name in INVOICE_FILES:
        extracted = extract_invoice(name, pages_of(name))
        invoices.append(invoice_result(extracted, prices, verify(extracted, pages_of(name))))
    return reconciliation_result(invoices, contract_summary(prices), model_summary=None, model="offline")


def test_the_result_has_the_pinned_shape(result: InvoiceReconciliationResult) -> None:
    body = json.loads(result.model_dump_json())
    assert {"invoices", "summary"} <= body.keys()
    invoice = body["invoices"][0]
    assert {
        "document",
        "invoice_number",
        "currency",
        "status",
        "line_items",
        "totals",
        "discrepancies",
    } <= invoice.keys()
    assert set(invoice["line_items"][0]) == {
        "product_code",
        "description",
        "quantity",
        "unit_price",
        "line_total",
        "source",
    }
    assert set(invoice["line_items"][0]["source"]) == {"document", "page", "quote"}
    assert {"subtotal", "tax", "discount", "total"} <= invoice["totals"].keys()
    dirty = next(i for i in body["invoices"] if i["discrepancies"])
    assert {"rule", "field", "expected", "actual", "source"} <= dirty["discrepancies"][0].keys()


def test_each_invoice_names_the_offline_parser_that_extracted_it(result: InvoiceReconciliationResult) -> None:
    assert {invoice.extractor for invoice in result.invoices} == {EXTRACTOR}
    assert "no language model" in EXTRACTOR


def test_statuses_and_normalised_amounts(result: InvoiceReconciliationResult) -> None:
    status = {i.document: i.status for i in result.invoices}
    assert status == {
        "inv_01_northwind.txt": "matched",
        "inv_02_brightline.md": "discrepancies",
        "inv_03_cobalt.pdf": "discrepancies",
        "inv_04_delta.pdf": "discrepancies",
        "inv_05_eagle.txt": "discrepancies",
        "inv_06_falcon.txt": "discrepancies",
        "inv_07_granite.txt": "matched",
    }
    delta = next(i for i in result.invoices if i.document == "inv_04_delta.pdf")
    assert delta.totals.model_dump(exclude_none=True) == {
        "subtotal": "1209.92",
        "tax": "69.60",
        "discount": "50.00",
        "total": "1239.52",
        "tax_rate": "6",
    }
    eagle = next(i for i in result.invoices if i.document == "inv_05_eagle.txt")
    assert [(i.quantity, i.unit_price, i.line_total) for i in eagle.line_items] == [
        ("30", "42.00", "1260.00"),
        ("200", "4.75", "950.00"),
    ]


def test_an_invoice_without_readable_lines_is_unreadable(prices: PriceList) -> None:
    text = "Invoice No: X-1\nThank you for your business.\nTotal: 10.00\n"
    extracted = extract_invoice("x.txt", [(1, text)])
    outcome = invoice_result(extracted, prices, verify(extracted, [(1, text)]))
    assert outcome.status == "unreadable" and outcome.line_items == []


def test_the_deterministic_summary_states_only_validated_figures(result: InvoiceReconciliationResult) -> None:
    assert result.summary_source == "deterministic"
    assert "7 invoices" in result.summary and "2 matched" in result.summary and "line-total 1" in result.summary
    assert result.contract is not None
    allowed = validated_numbers(result.invoices, result.contract)
    assert check_summary(result.summary, allowed, identifiers(result.invoices, result.contract)) == []


def test_a_model_summary_with_an_invented_figure_is_blocked(result: InvoiceReconciliationResult) -> None:
    assert result.contract is not None
    summary = (
        "Of 7 invoices, 5 have discrepancies. DID-55102 (inv_04_delta.pdf) totals $1,239.52 instead of "
        "$1,229.52, an overcharge of $10.00; Cobalt bills labour at 95.00 against 85.00 in PA-2025-014. "
        "Overall about $12,000 was invoiced."
    )
    outcome = reconciliation_result(result.invoices, result.contract, model_summary=summary)
    assert outcome.summary_source == "deterministic" and outcome.summary == result.summary
    assert outcome.summary_blocked == ["12,000"]  # identifiers such as PA-2025-014 are not figures
    assert "not validated figures" in render_markdown(outcome)


def test_a_model_summary_of_validated_figures_is_kept(result: InvoiceReconciliationResult) -> None:
    assert result.contract is not None
    summary = (
        "Of 7 invoices on contract_price_list.txt, 2 matched. DID-55102 totals $1,239.52 instead of $1,229.52 "
        "(10.00 over); EC-2025-0311 is in EUR; VAT at 20% on GBS/0425 is right; dated 2025-03-20 and March 12, 2025."
    )
    outcome = reconciliation_result(result.invoices, result.contract, model_summary=summary)
    assert (outcome.summary_source, outcome.summary, outcome.summary_blocked) == ("model", summary, [])


@pytest.mark.parametrize(
    ("text", "blocked"),
    [
        ("Total 1,234.50 and 20% tax.", []),
        ("Total USD 1234.5.", []),
        ("Total €1.234,50.", ["1.234"]),  # English reading of figures in prose: the decimal comma is not supported
        ("Totals 1,234.51.", ["1,234.51"]),
        ("3 invoices, 4 lines.", ["4"]),
    ],
)
def test_check_summary_reads_separators_symbols_and_percentages(text: str, blocked: list[str]) -> None:
    allowed = {Decimal("1234.50"), Decimal("20"), Decimal("3"), Decimal("50")}
    assert check_summary(text, allowed) == blocked


def test_the_offline_model_summarises_deterministically(result: InvoiceReconciliationResult) -> None:
    assert result.contract is not None
    request = summary_request(result.invoices, result.contract)
    response = OfflineExtractiveModel().generate(request)
    assert response.text == deterministic_summary(result.invoices, result.contract)
    assert "Steel bracket" not in request.prompt  # the prompt carries findings, not every line


def test_markdown_report_lists_findings_with_their_quotes(result: InvoiceReconciliationResult) -> None:
    text = render_markdown(result)
    assert text.startswith("# Invoice reconciliation\n")
    assert "| inv_04_delta.pdf | DID-55102 | USD | 1239.52 | discrepancies | 1 |" in text
    assert "**unknown-product** `line_items[1].product_code`: expected —, actual NW-9999" in text
    assert "`\\| LED driver 40 W \\| NW-4200 \\| 3 \\| $19.99 \\| $59.79 \\|`" in text
