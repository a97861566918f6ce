"""The reconciliation rules and the sourcing check, on the samples and on invoices written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from longhaul.documents.parsing import media_type_for, parse_document
from longhaul.workflows.invoice_reconciliation.extraction import extract_invoice
from longhaul.workflows.invoice_reconciliation.models import ExtractedInvoice
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList, parse_price_list
from longhaul.workflows.invoice_reconciliation.report import invoice_result
from longhaul.workflows.invoice_reconciliation.rules import check
from longhaul.workflows.invoice_reconciliation.sourcing import verify

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "invoices"
CONTRACT = (
    "Currency: USD\n\nProduct Code   Description      Agreed Unit Price\n"
    "AB-100         Widget                      19.99\nCD-200         Gadget                     125.00\n"
    "EF-300         Service hour                 0.125\n"
)


def pages_of(name: str) -> list[tuple[int, str]]:
    data = (SAMPLES / name).read_bytes()
    doc = parse_document(index=0, name=name, data=data, media_type=media_type_for(name, None))
    return [(page.number, page.text) for page in doc.pages]


@pytest.fixture(scope="module")
def sample_prices() -> PriceList:
    return parse_price_list("contract_price_list.txt", pages_of("contract_price_list.txt"))


def invoice(lines: str, totals: str, header: str = "Invoice No: T-1\nCurrency: USD") -> tuple[ExtractedInvoice, str]:
    text = f"{header}\n\nCode     Description     Qty    Unit Price     Amount\n{lines}\n\n{totals}\n"
    return extract_invoice("t.txt", [(1, text)]), text


def findings(
    inv: ExtractedInvoice, text: str, contract: str = CONTRACT
) -> list[tuple[str, str, str | None, str | None]]:
    prices = parse_price_list("c.txt", [(1, contract)])
    return [(d.rule, d.field, d.expected, d.actual) for d in check(inv, prices, verify(inv, [(1, text)]))]


PLANTED = [
    ("inv_02_brightline.md", "line-total", "line_items[2].line_total", "59.97", "59.79"),
    ("inv_03_cobalt.pdf", "contract-price", "line_items[0].unit_price", "85.00", "95.00"),
    ("inv_04_delta.pdf", "invoice-total", "totals.total", "1229.52", "1239.52"),
    ("inv_05_eagle.txt", "currency", "currency", "USD", "EUR"),
    ("inv_06_falcon.txt", "unknown-product", "line_items[1].product_code", None, "NW-9999"),
]


@pytest.mark.parametrize(("name", "rule", "field", "expected", "actual"), PLANTED)
def test_every_planted_sample_discrepancy_is_found_with_a_verbatim_quote(
    sample_prices: PriceList, name: str, rule: str, field: str, expected: str | None, actual: str
) -> None:
    pages = pages_of(name)
    extracted = extract_invoice(name, pages)
    found = check(extracted, sample_prices, verify(extracted, pages))
    assert [(d.rule, d.field, d.expected, d.actual) for d in found] == [(rule, field, expected, actual)]
    source = found[0].source
    assert source is not None and source.document == name
    assert source.quote in dict(pages)[source.page]


@pytest.mark.parametrize("name", ["inv_01_northwind.txt", "inv_07_granite.txt"])
def test_clean_samples_have_no_discrepancy(sample_prices: PriceList, name: str) -> None:
    pages = pages_of(name)
    extracted = extract_invoice(name, pages)
    assert check(extracted, sample_prices, verify(extracted, pages)) == []


def test_decimal_arithmetic_is_exact_where_float_is_not() -> None:
    # 3 × 19.99 is 59.97 exactly; 0.1 + 0.2 sums are not 0.30000000000000004.
    inv, text = invoice(
        "AB-100   Widget   3   19.99   59.97\nEF-300   Service hour   0.8   0.125   0.10",
        "Subtotal   60.07\nTotal   60.07",
    )
    assert findings(inv, text) == []


def test_line_total_to_the_cent_accepts_either_rounding_of_a_half_cent() -> None:
    inv, text = invoice("EF-300   Service hour   1   0.125   0.12", "Total   0.12")  # half-even
    assert findings(inv, text) == []
    inv, text = invoice("EF-300   Service hour   1   0.125   0.14", "Total   0.14")
    assert findings(inv, text) == [("line-total", "line_items[0].line_total", "0.13", "0.14")]


def test_totals_are_checked_against_their_immediate_inputs() -> None:
    inv, text = invoice(
        "AB-100   Widget   1   19.99   19.99\nCD-200   Gadget   2   125.00   250.00",
        "Subtotal   279.99\nVAT (20%)   50.00\nDiscount   -10.00\nShipping   5.00\nTotal   324.99",
    )
    assert findings(inv, text) == [
        ("invoice-total", "totals.subtotal", "269.99", "279.99"),
        ("invoice-total", "totals.tax", "56.00", "50.00"),
    ]


def test_without_a_subtotal_the_total_is_the_sum_of_lines_plus_tax() -> None:
    inv, text = invoice("CD-200   Gadget   2   125.00   250.00", "Sales tax   20.00\nAmount due   $275.00")
    assert findings(inv, text) == [("invoice-total", "totals.total", "270.00", "275.00")]


def test_a_bare_dollar_does_not_contradict_a_dollar_contract_but_a_code_does() -> None:
    cad = CONTRACT.replace("Currency: USD", "Currency: CAD")
    inv, text = invoice("CD-200   Gadget   2   $125.00   $250.00", "Total   $250.00", header="Invoice No: T-1")
    assert findings(inv, text, cad) == []
    inv, text = invoice("CD-200   Gadget   2   125.00   250.00", "Total   250.00 USD", header="Invoice No: T-1")
    assert findings(inv, text, cad) == [("currency", "currency", "CAD", "USD")]


def test_an_unsourced_value_is_reported_and_takes_no_part_in_other_rules() -> None:
    inv, text = invoice("AB-100   Widget   3   19.99   59.97\nCD-200   Gadget   1   125.00   125.00", "Total   184.97")
    item = inv.line_items[0].model_copy(update={"unit_price": "21.99"})  # a model's invented price
    tampered = inv.model_copy(update={"line_items": [item, inv.line_items[1]]})
    errors = verify(tampered, [(1, text)])
    assert [(e.field, e.quote_found) for e in errors] == [("line_items[0].unit_price", True)]
    found = check(tampered, parse_price_list("c.txt", [(1, CONTRACT)]), errors)
    assert [(d.rule, d.field, d.actual) for d in found] == [("unsourced-value", "line_items[0].unit_price", "21.99")]
    assert found[0].source is not None and found[0].source.quote == inv.line_items[0].source.quote


def test_a_quote_that_is_not_on_the_page_cites_no_source() -> None:
    inv, text = invoice("AB-100   Widget   3   19.99   59.97", "Total   59.97")
    total = inv.totals.total
    assert total is not None
    forged = total.model_copy(update={"source": total.source.model_copy(update={"quote": "Total 99.99"})})
    tampered = inv.model_copy(update={"totals": inv.totals.model_copy(update={"total": forged})})
    found = findings(tampered, text)
    assert found == [("unsourced-value", "totals.total", None, "59.97")]
    assert check(tampered, parse_price_list("c.txt", [(1, CONTRACT)]), verify(tampered, [(1, text)]))[0].source is None


def test_digits_inside_a_code_do_not_source_a_number() -> None:
    inv, text = invoice("AB-100   Widget   3   19.99   59.97", "Total   59.97")
    item = inv.line_items[0].model_copy(update={"quantity": "100"})
    errors = verify(inv.model_copy(update={"line_items": [item]}), [(1, text)])
    assert [e.field for e in errors] == ["line_items[0].quantity"]


def test_an_unseen_clean_layout_is_matched_and_an_unseen_dirty_one_is_not() -> None:
    contract = "Price list (EUR)\n| Art. | Bezeichnung | Preis |\n|---|---|---|\n"
    contract += "| K-1 | Kabel | 2,50 |\n| K-2 | Dose | 7,00 |\n"
    clean = (
        "Supplier: Kabelwerk AG\nInvoice no.: KW-1\n\n"
        "| Quantity | Article | Price | Total |\n| 4 | K-1 | 2,50 | 10,00 |\n| 2 | K-2 | 7,00 | 14,00 |\n"
        "| Subtotal | 24,00 |\n| VAT 19% | 4,56 |\n| Total EUR | 28,56 |\n"
    )
    inv = extract_invoice("k.txt", [(1, clean)])
    assert findings(inv, clean, contract) == []
    dirty = clean.replace("| 2 | K-2 | 7,00 | 14,00 |", "| 2 | K-2 | 7,50 | 15,00 |").replace("24,00", "25,00")
    inv = extract_invoice("k.txt", [(1, dirty)])
    assert findings(inv, dirty, contract) == [
        ("contract-price", "line_items[1].unit_price", "7.00", "7.50"),
        ("invoice-total", "totals.total", "29.56", "28.56"),
        ("invoice-total", "totals.tax", "4.75", "4.56"),
    ]


EUR_CONTRACT = CONTRACT.replace("Currency: USD", "Currency: EUR")


def test_a_header_full_of_identifiers_reconciles_on_its_labelled_amounts() -> None:
    """`VAT No: IE 6388047V` above the table once read as a tax of 6,388,047.00: identifiers are no amounts."""
    header = (
        "Emerald Office Furniture Ltd\nVAT No: IE 6388047V\nOrder No: 4500012345\n"
        "IBAN: IE29 AIBK 9311 5212 3456 78\nInvoice No: EM-2291\nCurrency: EUR"
    )
    inv, text = invoice("CD-200   Gadget   40   125.00   5,000.00", "VAT (23%): €1,150.00\nTotal: €6,150.00", header)
    assert findings(inv, text, EUR_CONTRACT) == []
    inv, text = invoice("CD-200   Gadget   40   125.00   5,000.00", "VAT (23%): €1,140.80\nTotal: €6,140.80", header)
    assert findings(inv, text, EUR_CONTRACT) == [("invoice-total", "totals.tax", "1150.00", "1140.80")]


def test_a_tax_column_per_line_is_summed_and_checked_against_its_rate() -> None:
    text = (
        "Invoice No: T-2\nCurrency: EUR\n\n"
        "SKU        Item                 Qty   Unit Price   VAT %   VAT      Net\n"
        "AB-100     Widget                 3        19.99     23%   13.79    59.97\n"
        "CD-200     Gadget                 4       125.00     23%  115.00   500.00\n\n"
        "Subtotal: €559.97\nVAT (23%): €128.79\nTotal due: €688.76\n"
    )
    assert findings(extract_invoice("t.txt", [(1, text)]), text, EUR_CONTRACT) == []
    no_tax_line = text.replace("VAT (23%): €128.79\n", "")  # the lines' taxes are the invoice's tax
    assert findings(extract_invoice("t.txt", [(1, no_tax_line)]), no_tax_line, EUR_CONTRACT) == []
    wrong = text.replace("23%  115.00   500.00", "23%  105.00   500.00")
    assert findings(extract_invoice("t.txt", [(1, wrong)]), wrong, EUR_CONTRACT) == [
        ("invoice-total", "line_items[1].tax", "115.00", "105.00"),
        ("invoice-total", "totals.tax", "118.79", "128.79"),
    ]


TAX_INCLUSIVE = (
    "Sunrise Cafe Wholesale\nTax invoice no: SC-77\n\n"
    "1. AB-100 Widget, 3 x $19.99 = $59.97\n2. CD-200 Gadget, 1 x $125.00 = $125.00\n\n"
    "Total (GST inclusive): $184.97\nIncludes GST 10%: $16.82\n"
)


def test_a_tax_inclusive_invoice_does_not_add_its_tax_again() -> None:
    inv = extract_invoice("t.txt", [(1, TAX_INCLUSIVE)])
    assert len(inv.line_items) == 2 and inv.totals.tax_included is not None
    assert findings(inv, TAX_INCLUSIVE) == []
    net_subtotal = TAX_INCLUSIVE.replace("Total (GST", "Subtotal excl. GST: $168.15\nTotal (GST")
    assert findings(extract_invoice("t.txt", [(1, net_subtotal)]), net_subtotal) == []
    wrong_tax = TAX_INCLUSIVE.replace("$16.82", "$18.50")  # 10% of the gross, not the share of it
    assert findings(extract_invoice("t.txt", [(1, wrong_tax)]), wrong_tax) == [
        ("invoice-total", "totals.tax", "16.82", "18.50")
    ]
    added = TAX_INCLUSIVE.replace("$184.97", "$203.47")  # tax added once more
    assert findings(extract_invoice("t.txt", [(1, added)]), added) == [
        ("invoice-total", "totals.total", "184.97", "203.47")
    ]


def test_the_result_says_tax_inclusive_and_carries_line_taxes_only_when_written() -> None:
    prices = parse_price_list("c.txt", [(1, CONTRACT)])
    result = invoice_result(extract_invoice("t.txt", [(1, TAX_INCLUSIVE)]), prices)
    assert result.status == "matched" and result.totals.tax_included is True
    assert "tax" not in result.line_items[0].model_dump() and "tax_included" in result.totals.model_dump()
    inv, _ = invoice("AB-100   Widget   3   19.99   59.97", "Total   59.97")
    plain = invoice_result(inv, prices).model_dump()
    assert "tax_included" not in plain["totals"] and "tax" not in plain["line_items"][0]  # the shape is unchanged
