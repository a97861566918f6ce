"""A deterministic parser of the accounting-export invoice family: the offline model's extractor.

It reads `Label: value` header lines (invoice number, date, vendor, currency), a line-item table whose header row
names its columns in any order (`|`-separated, Markdown or runs of 2+ spaces) and a totals block (subtotal, tax /
VAT / GST with an optional rate, discount, shipping and fees, total / amount due). The pages of one invoice are read
in order, so a table continued on the next page without its header row keeps the previous header.

Every value is the raw text of its cell or token and cites the whole line it was read from (`quote`, stripped of
leading and trailing whitespace, otherwise verbatim) and its page. Nothing is inferred that is not written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from longhaul.workflows.invoice_reconciliation.amounts import (
    AMOUNT,
    currency_of,
    is_amount,
    iso_code_in,
    percentages_in,
)
from longhaul.workflows.invoice_reconciliation.models import (
    ExtractedInvoice,
    ExtractedLineItem,
    ExtractedTotals,
    Source,
    SourcedValue,
)
from longhaul.workflows.invoice_reconciliation.tables import Header, Role, detect_header, is_rule, map_row

EXTRACTOR = "longhaul deterministic invoice parser (no language model): reads labelled headers, tables and totals"

_HEADER_FIELD = Literal["invoice_number", "date", "vendor", "currency"]
_LABELS: dict[_HEADER_FIELD, str] = {
    "invoice_number": r"(?:tax\s+)?invoice\s*(?:no\.?|number|num\.?|nr\.?|#|id)|inv\.?\s*(?:no\.?|#)|invoice"
    r"|bill\s*(?:no\.?|number|#)|document\s*(?:no\.?|number)",
    "date": r"(?:invoice\s+|issue\s+|billing\s+|document\s+)?date(?:\s+of\s+issue)?|issued(?:\s+on)?",
    "vendor": r"vendor|supplier|seller|from|bill(?:ed)?\s+from|sold\s+by|issued\s+by|remit\s+to",
    "currency": r"(?:invoice\s+)?currency|ccy",
}
_HEADER_RE = {
    name: re.compile(
        rf"(?:^|(?<=\s\s)|(?<=\|))\s*\**(?P<label>{pattern})\**(?:\s*[:|]\s*|\s{{2,}}|(?<=[#.])\s*)"
        rf"(?P<value>[^\s|:](?:[^|]*?[^\s|*])?)\**(?=\s{{2,}}|\s*\||\s*$)",
        re.IGNORECASE,
    )
    for name, pattern in _LABELS.items()
}
_CODE_LIKE = re.compile(r"^(?=[A-Za-z0-9._/-]*\d)[A-Za-z0-9][A-Za-z0-9._/-]{1,24}$")
_LABEL_WORD = re.compile(r"[a-z]+")
_COUNTED = re.compile(r"^(\d+(?:[.,]\d+)?)\s*[A-Za-z]{1,6}\.?$")

_ITEM_REQUIRED: frozenset[Role] = frozenset({"quantity", "unit_price", "line_total"})
_ITEM_ONE_OF: frozenset[Role] = frozenset({"code", "description"})

TotalKind = Literal["subtotal", "tax", "discount", "charge", "total"]
_NOT_A_TOTAL = frozenset(
    {"items", "qty", "quantity", "units", "weight", "pages", "page", "lines", "paid", "deposit", "received",
     "prepaid", "forward", "carried", "brought", "date", "days", "terms", "phone", "tel", "fax", "iban",
     "account", "previous", "credit", "credits"}
)  # fmt: skip
_TAX_WORDS = frozenset({"tax", "vat", "gst", "hst", "pst", "qst", "iva", "mwst", "btw", "tva", "ust"})


def total_kind(label: str) -> tuple[TotalKind, int] | None:
    """What a totals-block label names, with a rank among totals (lower wins): None if it is no total."""
    words = set(_LABEL_WORD.findall(label.lower()))
    joined = "".join(_LABEL_WORD.findall(label.lower()))
    if not words or words & _NOT_A_TOTAL:
        return None
    has_total = "total" in words or joined.endswith("total")
    if "subtotal" in joined or ("sub" in words and has_total) or ("net" in words and words & {"total", "amount"}):
        return "subtotal", 0
    if has_total and words & {"excl", "excluding", "before", "pre", "ex", "without", "exclusive"}:
        return "subtotal", 0
    if words & {"discount", "rebate", "less", "deduction", "allowance", "promo", "promotion"}:
        return "discount", 0
    if words & {"shipping", "freight", "delivery", "handling", "postage", "carriage", "surcharge", "fee", "fees"}:
        return "charge", 0
    if "grand" in words and has_total:
        return "total", 0
    if has_total and words & {"incl", "including", "inc", "gross", "with", "inclusive"}:
        return "total", 1
    if words & _TAX_WORDS:
        return "tax", 0
    if has_total:
        return "total", 1
    if words & {"due", "payable"} and words & {"amount", "balance", "sum"}:
        return "total", 3 if "balance" in words else 2
    return None


@dataclass
class _Reading:
    document: str
    header: Header | None = None
    fields: dict[_HEADER_FIELD, SourcedValue] = field(default_factory=dict)
    items: list[ExtractedLineItem] = field(default_factory=list)
    totals: list[tuple[TotalKind, int, SourcedValue, str]] = field(default_factory=list)
    first_line: SourcedValue | None = None
    code_currency: SourcedValue | None = None
    symbol_currency: SourcedValue | None = None

    def source(self, page: int, line: str) -> Source:
        return Source(document=self.document, page=page, quote=line.strip())


def _item(row: dict[Role, str], source: Source) -> ExtractedLineItem | None:
    values = [row.get(role, "") for role in ("quantity", "unit_price", "line_total")]
    counted = _COUNTED.match(values[0])
    if counted:  # "10 hrs", "3 pcs": the number is the quantity, the unit word is not part of it
        values[0] = counted.group(1)
    if not all(is_amount(value) for value in values):
        return None
    description = row.get("description", "")
    code = row.get("code", "")
    if not code and description:
        first, _, rest = description.partition(" ")
        if _CODE_LIKE.match(first):
            code, description = first, rest.strip()
    if not code:
        return None
    quantity, unit_price, line_total = values
    return ExtractedLineItem(
        product_code=code,
        description=description,
        quantity=quantity,
        unit_price=unit_price,
        line_total=line_total,
        source=source,
    )


def _header_fields(reading: _Reading, line: str, source: Source) -> None:
    for name, pattern in _HEADER_RE.items():
        if name in reading.fields:
            continue
        match = pattern.search(line)
        if not match:
            continue
        value = match.group("value").strip()
        if name == "currency":
            code = currency_of(value)
            if code is None:
                continue
            value = code
        reading.fields[name] = SourcedValue(value=value, source=source)


def _totals(reading: _Reading, line: str, source: Source) -> None:
    previous_end = 0
    for match in AMOUNT.finditer(line):
        label = line[previous_end : match.start()]
        previous_end = match.end()
        kind = total_kind(label)
        if kind is None:
            continue
        reading.totals.append((kind[0], kind[1], SourcedValue(value=match.group().strip(), source=source), label))


def _currency_hints(reading: _Reading, line: str, source: Source) -> None:
    code = iso_code_in(line)
    if code and reading.code_currency is None:
        reading.code_currency = SourcedValue(value=code, source=source)
    symbol = currency_of(line)
    if (
        symbol
        and reading.symbol_currency is None
        and any(m.group("pre") or m.group("post") for m in AMOUNT.finditer(line))
    ):
        reading.symbol_currency = SourcedValue(value=symbol, source=source)


def _read_line(reading: _Reading, page: int, raw: str) -> None:
    line = raw.rstrip()
    if not line.strip() or is_rule(line):
        return
    source = reading.source(page, line)
    header = detect_header(line, _ITEM_REQUIRED, _ITEM_ONE_OF)
    if header is not None:
        reading.header = header
        _currency_hints(reading, line, source)
        return
    if reading.header is not None:
        item = _item(map_row(reading.header, line), source)
        if item is not None:
            reading.items.append(item)
            _currency_hints(reading, line, source)
            return
    _header_fields(reading, re.sub(r"\*\*|__", "", line), source)  # Markdown emphasis around labels
    _totals(reading, line, source)
    _currency_hints(reading, line, source)
    if reading.first_line is None and not re.search(r"\d|:|invoice", line, re.IGNORECASE):
        reading.first_line = SourcedValue(value=line.strip().strip("#*| ").strip(), source=source)


def _assemble_totals(found: list[tuple[TotalKind, int, SourcedValue, str]]) -> ExtractedTotals:
    def first(kind: TotalKind) -> tuple[SourcedValue, str] | None:
        ranked = sorted((rank, n) for n, (k, rank, _, _) in enumerate(found) if k == kind)
        return (found[ranked[0][1]][2], found[ranked[0][1]][3]) if ranked else None

    tax = first("tax")
    tax_rate = None
    if tax is not None:
        rates = percentages_in(tax[1])
        match = re.search(r"\d+(?:[.,]\d+)?\s?%", tax[1])
        if rates and match:
            tax_rate = SourcedValue(value=match.group(), source=tax[0].source)
    extra_taxes = [value for kind, _, value, _ in found if kind == "tax" and tax is not None and value is not tax[0]]
    charges = [value for kind, _, value, _ in found if kind == "charge"] + extra_taxes
    subtotal, discount, total = first("subtotal"), first("discount"), first("total")
    return ExtractedTotals(
        subtotal=subtotal[0] if subtotal else None,
        tax=tax[0] if tax else None,
        tax_rate=tax_rate,
        discount=discount[0] if discount else None,
        charges=charges,
        total=total[0] if total else None,
    )


def extract_invoice(document: str, pages: Sequence[tuple[int, str]]) -> ExtractedInvoice:
    """Read one invoice from its pages, given together and in order as (1-based page number, text)."""
    reading = _Reading(document=document)
    for page, text in pages:
        for raw in text.split("\n"):
            _read_line(reading, page, raw)
    currency = reading.fields.get("currency") or reading.code_currency or reading.symbol_currency
    return ExtractedInvoice(
        document=document,
        invoice_number=reading.fields.get("invoice_number"),
        date=reading.fields.get("date"),
        vendor=reading.fields.get("vendor") or reading.first_line,
        currency=currency,
        line_items=reading.items,
        totals=_assemble_totals(reading.totals),
        extractor=EXTRACTOR,
    )
