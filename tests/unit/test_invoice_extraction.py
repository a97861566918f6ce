"""The invoice family parser, amounts, price lists and the model-output parser (no network)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from longhaul.adapters.models.offline import OfflineExtractiveModel
from longhaul.core.errors import OutputInvalidError
from longhaul.core.llm import ModelResponse, Usage
from longhaul.documents.parsing import media_type_for, parse_document
from longhaul.workflows.document_analysis.analysis import parse_model_output
from longhaul.workflows.invoice_reconciliation.amounts import AmountError, parse_amount
from longhaul.workflows.invoice_reconciliation.extraction import EXTRACTOR, extract_invoice, total_kind
from longhaul.workflows.invoice_reconciliation.models import ExtractedInvoice, amount, extraction_json_schema
from longhaul.workflows.invoice_reconciliation.pricelist import (
    NoCurrencyError,
    NoPricesError,
    PriceListError,
    parse_price_list,
)
from longhaul.workflows.invoice_reconciliation.prompts import extraction_request, own_document
from longhaul.workflows.invoice_reconciliation.sourcing import verify
from longhaul.workflows.invoice_reconciliation.tables import column_role

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "invoices"
INVOICE_FILES = sorted(p.name for p in SAMPLES.iterdir() if p.name.startswith("inv_"))


def pages_of(name: str) -> list[tuple[int, str]]:
    data = (SAMPLES / name).read_bytes()
    doc = parse_document(index=0, name=name, data=data, media_type=media_type_for(name, None))
    return [(page.number, page.text) for page in doc.pages]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1,234.50", "1234.50"),
        ("$1,234.50", "1234.50"),
        ("US$ 12", "12"),
        ("EUR 1.234,50", "1234.50"),
        ("1.234,50 €", "1234.50"),
        ("1 234,50", "1234.50"),
        ("1'234.50", "1234.50"),
        ("12,5", "12.5"),
        ("1,234", "1234"),
        ("1.234", "1.234"),
        ("(50.00)", "-50.00"),
        ("-50.00", "-50.00"),
        ("50.00-", "-50.00"),
        ("£0.125", "0.125"),
        ("350.00 USD", "350.00"),
    ],
)
def test_amounts_in_the_supported_formats_read_exactly(raw: str, expected: str) -> None:
    assert parse_amount(raw) == Decimal(expected)


@pytest.mark.parametrize("raw", ["abc", "1,23,4", "", "12.34.5,6,7", "USD"])
def test_non_amounts_are_rejected(raw: str) -> None:
    with pytest.raises(AmountError):
        parse_amount(raw)


def test_normalised_amounts_are_decimal_strings_with_cents() -> None:
    assert [amount(r) for r in ("$1,234.5", "3", "(50)", "0.125")] == ["1234.50", "3.00", "-50.00", "0.125"]


@pytest.mark.parametrize(
    ("header", "role"),
    [
        ("SKU", "code"),
        ("Part No.", "code"),
        ("Item #", "code"),
        ("Product Code", "code"),
        ("Item Description", "description"),
        ("Designation", "description"),
        ("Qty", "quantity"),
        ("Quantity", "quantity"),
        ("Hours", "quantity"),
        ("Unit Price", "unit_price"),
        ("Rate", "unit_price"),
        ("Unit Cost", "unit_price"),
        ("Unit Amount", "unit_price"),
        ("Amount", "line_total"),
        ("Line Total", "line_total"),
        ("Ext. Price", "line_total"),
        ("Net Amount", "line_total"),
        ("VAT %", "tax_rate"),
        ("Tax rate", "tax_rate"),
        ("VAT", "tax"),
        ("Tax amount", "tax"),
        ("Amount incl. VAT", "line_total"),
        ("Unit price excl. tax", "unit_price"),
        ("Discount", None),
        ("Unit", None),
        ("Pos", None),
    ],
)
def test_column_names_map_to_roles(header: str, role: str | None) -> None:
    assert column_role(header) == role


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("Subtotal", "subtotal"),
        ("Sub-total:", "subtotal"),
        ("Net total", "subtotal"),
        ("Total excl. VAT", "subtotal"),
        ("VAT (20%)", "tax"),
        ("Sales tax 8.5%", "tax"),
        ("GST", "tax"),
        ("Discount", "discount"),
        ("Less: volume rebate", "discount"),
        ("Freight", "charge"),
        ("Total incl. VAT", "total"),
        ("Grand Total", "total"),
        ("Amount due", "total"),
        ("Balance due", "total"),
        ("Total items:", None),
        ("Amount paid", None),
        ("Due date:", None),
        ("Payment terms: net", None),
        ("VAT No:", None),
        ("VAT Reg. No.", None),
        ("Tax ID:", None),
        ("GST Registration Number", None),
        ("Order no.", None),
        ("Order #", None),
        ("IBAN:", None),
    ],
)
def test_totals_labels_are_classified(label: str, kind: str | None) -> None:
    found = total_kind(label)
    assert (found[0] if found else None) == kind


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("Invoice No:   INV-1001          Date: 2025-03-01", "invoice_number", "INV-1001"),
        ("Invoice No:   INV-1001          Date: 2025-03-01", "date", "2025-03-01"),
        ("Invoice # 4471", "invoice_number", "4471"),
        ("INVOICE #A-77", "invoice_number", "A-77"),
        ("| Invoice number | 2025/118 |", "invoice_number", "2025/118"),
        ("**Invoice #:** BL-3391", "invoice_number", "BL-3391"),
        ("Inv. No.  FF-77120", "invoice_number", "FF-77120"),
        ("Issue date: 1 March 2025", "date", "1 March 2025"),
        ("Supplier: Acme Tools Ltd", "vendor", "Acme Tools Ltd"),
        ("Sold by: Acme Tools Ltd", "vendor", "Acme Tools Ltd"),
        ("Currency: EUR", "currency", "EUR"),
        ("Currency: €", "currency", "EUR"),
    ],
)
def test_header_labels_are_read_with_their_line_as_source(line: str, field: str, value: str) -> None:
    invoice = extract_invoice("x.txt", [(1, f"{line}\nDue date: 2025-04-01\n")])
    found = getattr(invoice, field)
    assert found is not None and found.value == value
    assert found.source.quote == line.strip()


def test_a_markdown_table_in_any_column_order_with_currency_symbols() -> None:
    text = (
        "| Line | Qty | Item Description | Part Number | Unit Amount | Net Amount |\n"
        "|:----:|----:|------------------|-------------|------------:|-----------:|\n"
        "| 1 | 2 | Torque wrench | TW-220 | £84.50 | £169.00 |\n"
        "| 2 | 10 | Socket set 1/2 in | SS-012 | £12.99 | £129.90 |\n"
        "\n| Total excl. VAT | £298.90 |\n| VAT (20%) | £59.78 |\n| Total incl. VAT | £358.68 |\n"
    )
    invoice = extract_invoice("unseen.md", [(1, text)])
    assert [(i.product_code, i.description, i.quantity, i.unit_price, i.line_total) for i in invoice.line_items] == [
        ("TW-220", "Torque wrench", "2", "£84.50", "£169.00"),
        ("SS-012", "Socket set 1/2 in", "10", "£12.99", "£129.90"),
    ]
    totals = invoice.totals
    assert totals.subtotal and totals.tax and totals.total and totals.tax_rate
    assert (totals.subtotal.value, totals.tax.value, totals.total.value) == ("£298.90", "£59.78", "£358.68")
    assert totals.tax_rate.value == "20%"
    assert invoice.currency is not None and invoice.currency.value == "GBP"
    assert verify(invoice, [(1, text)]) == []


def test_a_tab_separated_export_with_the_code_inside_the_description() -> None:
    text = (
        "Quality Fasteners Inc\nInvoice number:\tQF-9\nDate:\t2025-05-02\n\n"
        "Description\tHours\tPrice\tTotal\n"
        "QF-100 Anchor bolt\t4 hrs\t2.50\t10.00\n"
        "QF-200 Wall plug\t30\t0.33\t9.90\n\n"
        "Subtotal\t19.90\nSales Tax\t1.59\nAmount paid\t5.00\nBalance Due\tUSD 16.49\n"
    )
    invoice = extract_invoice("unseen.txt", [(1, text)])
    assert [(i.product_code, i.description, i.quantity) for i in invoice.line_items] == [
        ("QF-100", "Anchor bolt", "4"),
        ("QF-200", "Wall plug", "30"),
    ]
    assert invoice.totals.total is not None and invoice.totals.total.value == "USD 16.49"
    assert invoice.currency is not None and invoice.currency.value == "USD"
    assert invoice.vendor is not None and invoice.vendor.value == "Quality Fasteners Inc"
    assert verify(invoice, [(1, text)]) == []


def test_a_space_aligned_table_with_an_empty_cell_maps_cells_by_position() -> None:
    text = (
        "Code      Description            Qty    Unit Price      Amount\n"
        "ZX-1      Cable                    5          2.00       10.00\n"
        "ZX-2                               1        100.00      100.00\n"
    )
    invoice = extract_invoice("gap.txt", [(1, text)])
    assert [(i.product_code, i.description, i.quantity, i.line_total) for i in invoice.line_items] == [
        ("ZX-1", "Cable", "5", "10.00"),
        ("ZX-2", "", "1", "100.00"),
    ]


def _totals_of(text: str) -> dict[str, str | None]:
    invoice = extract_invoice("unseen.txt", [(1, text)])
    assert verify(invoice, [(1, text)]) == []
    t = invoice.totals
    found = {"subtotal": t.subtotal, "tax": t.tax, "tax_rate": t.tax_rate, "total": t.total}
    return {name: value.value if value else None for name, value in found.items()} | {
        "charges": ",".join(c.value for c in t.charges) or None,
        "tax_included": t.tax_included.value if t.tax_included else None,
    }


HEADER_IDENTIFIERS = (
    "Emerald Office Furniture Ltd\nVAT No: IE 6388047V\nCompany Reg. No. 512345\nTax ID: 98-7654321\n"
    "Order No: 4500012345    Customer no. 88120\nIBAN: IE29 AIBK 9311 5212 3456 78\nBIC: AIBKIE2D\n"
    "VAT registration number GB 123 4567 89\nInvoice No: EM-2291\n\n"
    "Code     Description     Qty    Unit Price     Amount\nEM-1     Desk            10     496.00         4,960.00\n\n"
)


def test_identifiers_in_the_header_are_never_amounts() -> None:
    """VAT, tax and registration numbers, order numbers and IBANs are labelled like amounts (`VAT No: IE
    6388047V`) but are none: the tax is the labelled amount line further down, whatever comes first."""
    text = HEADER_IDENTIFIERS + "Subtotal: €4,960.00\nVAT (23%): €1,140.80\nTotal: €6,100.80\n"
    assert _totals_of(text) == {
        "subtotal": "€4,960.00",
        "tax": "€1,140.80",
        "tax_rate": "23%",
        "total": "€6,100.80",
        "charges": None,
        "tax_included": None,
    }
    without_tax_line = HEADER_IDENTIFIERS + "Total: €4,960.00\n"
    assert _totals_of(without_tax_line)["tax"] is None and _totals_of(without_tax_line)["charges"] is None


def test_a_tax_column_per_line_is_the_line_tax_not_its_total() -> None:
    text = (
        "SKU        Item                 Qty   Unit Price   VAT %   VAT      Net\n"
        "AB-100     Widget                 3        19.99     23%   13.79    59.97\n"
        "CD-200     Gadget                 4       125.00     23%  115.00   500.00\n\n"
        "Subtotal: €559.97\nVAT (23%): €128.79\nTotal due: €688.76\n"
    )
    invoice = extract_invoice("unseen.txt", [(1, text)])
    assert [(i.product_code, i.description, i.quantity, i.unit_price, i.line_total, i.tax, i.tax_rate) for i in
            invoice.line_items] == [
        ("AB-100", "Widget", "3", "19.99", "59.97", "13.79", "23%"),
        ("CD-200", "Gadget", "4", "125.00", "500.00", "115.00", "23%"),
    ]  # fmt: skip
    assert _totals_of(text)["tax"] == "€128.79" and _totals_of(text)["total"] == "€688.76"


@pytest.mark.parametrize(
    "lines",
    [
        "1. AB-100 Widget, 3 x $19.99 = $59.97\n2. CD-200 Gadget, 1 x $125.00 = $125.00",
        "1   AB-100   Widget   3   $19.99   $59.97\n2   CD-200   Gadget   1   $125.00   $125.00",
        "AB-100 Widget 3 pcs @ $19.99 $59.97\nCD-200 Gadget 1 pc @ $125.00 $125.00",
    ],
)
def test_line_items_without_a_table_header_row(lines: str) -> None:
    text = f"Sunrise Cafe Wholesale\nInvoice No: SC-77\nDate: 2025-06-01\n\n{lines}\n\nTotal: $184.97\n"
    invoice = extract_invoice("unseen.txt", [(1, text)])
    assert [(i.product_code, i.description, i.quantity, i.unit_price, i.line_total) for i in invoice.line_items] == [
        ("AB-100", "Widget", "3", "$19.99", "$59.97"),
        ("CD-200", "Gadget", "1", "$125.00", "$125.00"),
    ]
    assert invoice.invoice_number is not None and invoice.invoice_number.value == "SC-77"
    assert verify(invoice, [(1, text)]) == []


@pytest.mark.parametrize(
    ("totals", "included"),
    [
        ("Total (GST inclusive): $184.97\nIncludes GST 10%: $16.82", "Includes"),
        ("Total: 202.93\nof which VAT 23%: 37.95", "of which"),
        ("All prices include VAT.\nTotal: 202.93\nVAT 23%: 37.95", "include"),
        ("Total incl. VAT: 202.93\nVAT 23%: 37.95", None),  # a gross total alone says nothing of the prices
        ("Subtotal: 165.00\nVAT 23%: 37.95\nTotal incl. VAT: 202.95", None),
    ],
)
def test_a_tax_inclusive_invoice_says_so_and_only_then(totals: str, included: str | None) -> None:
    table = "Code   Description   Qty   Price   Amount\nAB-100   Widget   1   10.00   10.00"
    text = f"Invoice No: X-9\n\n{table}\n\n{totals}\n"
    found = _totals_of(text)
    assert found["tax_included"] == included
    assert found["tax"] is not None and found["total"] is not None


@pytest.mark.parametrize("name", INVOICE_FILES)
def test_every_sample_value_is_sourced_verbatim_on_its_page(name: str) -> None:
    pages = pages_of(name)
    invoice = extract_invoice(name, pages)
    assert invoice.line_items and invoice.totals.total and invoice.invoice_number and invoice.currency
    assert verify(invoice, pages) == []
    texts = dict(pages)
    for item in invoice.line_items:
        assert item.source.quote in texts[item.source.page]  # verbatim, not only after normalisation


def test_the_multi_page_pdf_keeps_the_header_across_pages() -> None:
    pages = pages_of("inv_04_delta.pdf")
    assert len(pages) == 2
    invoice = extract_invoice("inv_04_delta.pdf", pages)
    assert [(i.product_code, i.source.page) for i in invoice.line_items] == [
        ("NW-1002", 1),
        ("NW-2020", 1),
        ("NW-2010", 1),
        ("NW-4100", 2),
        ("NW-4200", 2),
    ]
    assert invoice.totals.discount is not None and invoice.totals.discount.value == "(50.00)"
    assert invoice.totals.total is not None and invoice.totals.total.source.page == 2


def test_the_sample_price_list() -> None:
    prices = parse_price_list("contract_price_list.txt", pages_of("contract_price_list.txt"))
    assert prices.currency == "USD" and len(prices.prices) == 10
    bracket = prices.lookup("nw 1001")
    assert bracket is not None and bracket.unit_price == Decimal("4.75")
    assert bracket.source.quote.startswith("NW-1001") and bracket.source.page == 1


def test_a_price_list_without_header_and_with_the_currency_in_a_symbol() -> None:
    text = "Schedule 2 - Prices\n\nA-1   Widget   €10.00\nA-2 | Gizmo | €1.250,00\n"
    prices = parse_price_list("c.txt", [(1, text)])
    assert prices.currency == "EUR"
    assert {code: p.unit_price for code, p in prices.prices.items()} == {
        "A1": Decimal("10.00"),
        "A2": Decimal("1250.00"),
    }


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("Currency: USD\nThe parties agree on fair prices.\n", NoPricesError, "lists no prices"),
        ("Code   Description   Price\nA-1    Widget        10.00\n", NoCurrencyError, "states no currency"),
        ("Currency: USD\nSKU  Price\nA-1  10.00\nA-1  12.00\n", PriceListError, "twice with different prices"),
    ],
)
def test_malformed_price_lists_say_what_is_missing(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_price_list("c.txt", [(1, text)])


def test_the_offline_model_extraction_round_trips_through_the_output_parser() -> None:
    pages = pages_of("inv_06_falcon.txt")
    response = OfflineExtractiveModel().generate(extraction_request("inv_06_falcon.txt", pages))
    parsed = own_document(parse_model_output(response, ExtractedInvoice, task="extract_invoice"), "inv_06_falcon.txt")
    assert parsed == extract_invoice("inv_06_falcon.txt", pages)
    assert parsed.extractor == EXTRACTOR and "no language model" in EXTRACTOR


def test_the_extraction_prompt_carries_the_schema_and_the_feedback() -> None:
    pages = [(1, "Invoice No: 1")]
    invoice = extract_invoice("a.txt", pages)
    assert invoice.invoice_number is not None
    number = invoice.invoice_number.model_copy(update={"value": "2"})
    bad = invoice.model_copy(update={"invoice_number": number, "vendor": None})
    request = extraction_request("a.txt", pages, errors=verify(bad, pages))
    assert '"ExtractedInvoice"' in request.prompt and "invoice_number = '2'" in request.prompt
    assert request.context["feedback"] == ["invoice_number = '2': the value does not appear in the quote"]
    assert extraction_json_schema()["title"] == "ExtractedInvoice"


def parse_extraction(text: str, document: str) -> ExtractedInvoice:
    answer = ModelResponse(
        text=text, usage=Usage(input_tokens=1, output_tokens=1), model_id="m", stop_reason="end_turn"
    )
    return own_document(parse_model_output(answer, ExtractedInvoice, task="extract_invoice"), document)


def test_malformed_model_output_is_repaired_or_rejected() -> None:
    good = extract_invoice("a.txt", pages_of("inv_01_northwind.txt")).model_dump_json()
    wrapped = f"Here it is:\n```json\n{good[:-1]},}}\n```"  # fenced, with a trailing comma
    assert parse_extraction(wrapped, "a.txt").line_items
    with pytest.raises(OutputInvalidError, match="ExtractedInvoice"):
        parse_extraction('{"line_items": [{"product_code": 5}]}', "a.txt")
    with pytest.raises(OutputInvalidError):
        parse_extraction("I could not read this invoice.", "a.txt")
