"""Verify that every extracted value is written in the source line it quotes, and that line on its page.

Matching rules (deliberately strict, so that a model cannot launder an invented value):
- the quote must occur in the cited page of the invoice's own document after collapsing runs of whitespace
  (spaces, tabs, line breaks) to one space; nothing else is normalised: no case folding, no punctuation changes;
- a text value (code, description, number, date, vendor) must occur in the quote, compared the same way;
- an amount, quantity or rate must be a number written in the quote (not a digit run inside a code such as
  `AB-100`) with the same decimal value: `1234.5` is sourced by a quote reading `$1,234.50`, a discount `50.00`
  by `(50.00)`;
- a currency must be written in the quote as its ISO code or one of its symbols.
"""

from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Literal

from longhaul.core.model import Model
from longhaul.workflows.invoice_reconciliation.amounts import AmountError, mentions_currency, numbers_in, parse_amount
from longhaul.workflows.invoice_reconciliation.models import ExtractedInvoice, Source, SourcedValue

Kind = Literal["text", "number", "currency"]


class SourcingError(Model):
    """A value that is not found in its quoted source; `field` is a path like `line_items[2].unit_price`."""

    field: str
    value: str | None
    reason: str
    source: Source | None
    quote_found: bool = False

    def feedback(self) -> str:
        return f"{self.field} = {self.value!r}: {self.reason}"


def _flat(text: str) -> str:
    return " ".join(text.split())


def sourced_values(invoice: ExtractedInvoice) -> Iterator[tuple[str, str, Source, Kind]]:
    """Every extracted value as (field path, raw value, source, kind)."""
    for name in ("invoice_number", "date", "vendor", "currency"):
        value: SourcedValue | None = getattr(invoice, name)
        if value is not None:
            yield name, value.value, value.source, "currency" if name == "currency" else "text"
    for i, item in enumerate(invoice.line_items):
        path = f"line_items[{i}]"
        yield f"{path}.product_code", item.product_code, item.source, "text"
        if item.description.strip():
            yield f"{path}.description", item.description, item.source, "text"
        for name in ("quantity", "unit_price", "line_total"):
            yield f"{path}.{name}", getattr(item, name), item.source, "number"
        for name, written in (("tax", item.tax), ("tax_rate", item.tax_rate)):
            if written is not None:
                yield f"{path}.{name}", written, item.source, "number"
    totals = invoice.totals
    for name in ("subtotal", "tax", "tax_rate", "discount", "total"):
        found: SourcedValue | None = getattr(totals, name)
        if found is not None:
            yield f"totals.{name}", found.value, found.source, "number"
    if totals.tax_included is not None:
        yield "totals.tax_included", totals.tax_included.value, totals.tax_included.source, "text"
    for i, charge in enumerate(totals.charges):
        yield f"totals.charges[{i}]", charge.value, charge.source, "number"


def _value_problem(value: str, quote: str, kind: Kind) -> str | None:
    if not value.strip():
        return "the value is empty"
    if kind == "currency":
        return None if mentions_currency(quote, value.strip()) else "the currency is not written in the quote"
    if kind == "text":
        return None if _flat(value) in _flat(quote) else "the value does not appear in the quote"
    try:
        number = parse_amount(value.replace("%", ""))
    except AmountError:
        return "the value is not a number"
    written: set[Decimal] = numbers_in(quote)
    return None if number in written or -number in written else "the number does not appear in the quote"


def verify(invoice: ExtractedInvoice, pages: Mapping[int, str] | Sequence[tuple[int, str]]) -> list[SourcingError]:
    """The sourcing errors of an extraction, in field order; an empty list means every value is sourced."""
    texts = dict(pages.items()) if isinstance(pages, Mapping) else dict(pages)
    flat_pages = {number: _flat(text) for number, text in texts.items()}
    errors: list[SourcingError] = []
    for field, value, source, kind in sourced_values(invoice):
        quote = _flat(source.quote)
        if source.document != invoice.document:
            reason, found = f"the source cites another document ({source.document!r})", False
        elif source.page not in flat_pages:
            reason, found = f"page {source.page} is not a page of this invoice", False
        elif not quote:
            reason, found = "the quote is empty", False
        elif quote not in flat_pages[source.page]:
            reason, found = f"the quote is not on page {source.page}", False
        else:
            problem = _value_problem(value, source.quote, kind)
            if problem is None:
                continue
            reason, found = problem, True
        errors.append(SourcingError(field=field, value=value, reason=reason, source=source, quote_found=found))
    return errors
