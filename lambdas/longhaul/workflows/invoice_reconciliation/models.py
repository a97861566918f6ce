"""Typed records of invoice reconciliation: what the model extracts, and the result the job publishes.

Extraction keeps every value as the raw string written in the source (`"$1,234.50"`, `"(50.00)"`) with the source
line it was read from; `decimal()` and the `*_string` helpers normalise raw values. The result carries decimal
strings (`"1234.50"`), computed in `Decimal`, never float.
"""

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from longhaul.core.contracts import CompletedBy, Completion
from longhaul.core.model import Model
from longhaul.workflows.invoice_reconciliation.amounts import amount_string, parse_amount, quantity_string

RuleName = Literal["line-total", "invoice-total", "unknown-product", "contract-price", "currency", "unsourced-value"]
RULES: tuple[RuleName, ...] = (
    "line-total",
    "invoice-total",
    "unknown-product",
    "contract-price",
    "currency",
    "unsourced-value",
)
Status = Literal["matched", "discrepancies", "unreadable"]


class Source(Model):
    """Where a value was read: the whole source line, verbatim, on a 1-based page of a document."""

    document: str
    page: Annotated[int, Field(ge=1)]
    quote: Annotated[str, Field(description="The full source line the value appears in, copied verbatim.")]


# ---------------------------------------------------------------- extraction (what the model fills)


class SourcedValue(Model):
    value: Annotated[str, Field(description="The value exactly as written in the quote, e.g. '$1,234.50'.")]
    source: Source


class ExtractedLineItem(Model):
    product_code: Annotated[str, Field(description="Product code / SKU exactly as written.")]
    description: str = ""
    quantity: Annotated[str, Field(description="As written, e.g. '3' or '2.5'.")]
    unit_price: Annotated[str, Field(description="As written, e.g. '$19.99' or '1.234,50'.")]
    line_total: Annotated[str, Field(description="As written, e.g. '59.97'.")]
    tax: Annotated[
        str | None, Field(description="The line's own tax amount, when the invoice has a tax column, as written.")
    ] = None
    tax_rate: Annotated[str | None, Field(description="The line's own tax rate, when written on it, e.g. '19%'.")] = (
        None
    )
    source: Source


class ExtractedTotals(Model):
    subtotal: SourcedValue | None = None
    tax: Annotated[SourcedValue | None, Field(description="The (first) tax / VAT / GST amount.")] = None
    tax_rate: Annotated[SourcedValue | None, Field(description="The stated tax rate, e.g. '20%'.")] = None
    discount: Annotated[SourcedValue | None, Field(description="As written: '50.00', '-50.00' or '(50.00)'.")] = None
    charges: Annotated[
        list[SourcedValue],
        Field(description="Other amounts added to the total: shipping, freight, fees, further taxes."),
    ] = Field(default=[])
    total: Annotated[SourcedValue | None, Field(description="Total / amount due / grand total.")] = None
    tax_included: Annotated[
        SourcedValue | None,
        Field(
            description="Only when the invoice says its prices and totals already include the tax ('Prices include "
            "VAT', 'of which VAT 23%', 'Includes GST'): those words as written, and their line."
        ),
    ] = None


class ExtractedInvoice(Model):
    """One invoice as read from its pages; every value cites the line it was read from."""

    model_config = ConfigDict(title="ExtractedInvoice")

    document: str
    invoice_number: SourcedValue | None = None
    date: SourcedValue | None = None
    vendor: SourcedValue | None = None
    currency: Annotated[SourcedValue | None, Field(description="ISO 4217 code, e.g. 'USD'.")] = None
    line_items: list[ExtractedLineItem] = Field(default=[])
    totals: ExtractedTotals = ExtractedTotals()
    extractor: Annotated[str | None, Field(description="Who extracted it, when not a language model.")] = None


def extraction_json_schema() -> dict[str, Any]:
    """The JSON schema a model's structured output must match."""
    return ExtractedInvoice.model_json_schema()


def decimal(raw: str) -> Decimal:
    """The value of a raw amount, quantity or rate (`20%` is 20); raises `AmountError` (a ValueError) if none."""
    return parse_amount(raw.strip().removesuffix("%"))


def amount(raw: str) -> str:
    """A raw amount normalised to a decimal string: `"$1,234.5"` → `"1234.50"`."""
    return amount_string(parse_amount(raw))


def quantity(raw: str) -> str:
    return quantity_string(parse_amount(raw))


# ---------------------------------------------------------------- result (pinned shape)


class LineItem(Model):
    product_code: str
    description: str
    quantity: str
    unit_price: str
    line_total: str
    source: Source
    tax: Annotated[str | None, Field(description="The line's tax, when the invoice has a tax column.")] = Field(
        default=None, exclude_if=lambda value: value is None
    )


class Totals(Model):
    subtotal: str | None = None
    tax: str | None = None
    discount: Annotated[str | None, Field(description="The amount deducted, as a positive decimal string.")] = None
    total: str | None = None
    tax_rate: Annotated[str | None, Field(description="Stated tax rate in percent, e.g. '20'.")] = None
    charges: Annotated[str | None, Field(description="Sum of shipping, fees and further taxes.")] = None
    tax_included: Annotated[
        bool | None, Field(description="True when the prices and the total include the tax (tax-inclusive).")
    ] = Field(default=None, exclude_if=lambda value: value is None)


class Discrepancy(Model):
    rule: RuleName
    field: Annotated[str, Field(description="e.g. 'line_items[1].line_total' or 'totals.total'.")]
    expected: Annotated[str | None, Field(description="Decimal string, code or currency; null if none applies.")]
    actual: str | None
    source: Annotated[Source | None, Field(description="Null only for a value whose quote is not in the page.")]
    note: str | None = None


class InvoiceResult(Model):
    document: str
    invoice_number: str | None
    currency: str | None
    status: Status
    line_items: list[LineItem]
    totals: Totals
    discrepancies: list[Discrepancy]
    date: str | None = None
    vendor: str | None = None
    extractor: Annotated[
        str | None,
        Field(description="What extracted the values when it was not a language model (offline: the parser)."),
    ] = None


class AgreedPrice(Model):
    """One price of the contract's price list, with the line it was read from."""

    code: str
    description: str
    unit_price: Annotated[str, Field(description="Decimal string, in the contract's currency.")]
    source: Source


class ContractSummary(Model):
    document: str
    currency: str
    products: int
    prices: Annotated[
        list[AgreedPrice], Field(description="The agreed prices, each with its source line (what disputes cite).")
    ] = Field(default=[])


class InvoiceReconciliationResult(Model):
    invoices: list[InvoiceResult]
    summary: str
    summary_source: Annotated[
        Literal["model", "deterministic", "person"],
        Field(description="Who wrote the summary: the model, the deterministic summary, or a person (by hand)."),
    ] = "deterministic"
    summary_blocked: Annotated[
        list[str], Field(description="Figures in the model's summary that are not validated numbers.")
    ] = Field(default=[])
    contract: ContractSummary | None = None
    job_id: str | None = None
    model: str | None = None
    markdown_key: str | None = None
    completed_by: CompletedBy = None
    completion: Completion = None
