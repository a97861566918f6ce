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
from longhaul.workflows.invoice_reconciliation.tables import (
    TAX_WORDS,
    Header,
    Role,
    detect_header,
    is_rule,
    map_row,
)

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

_POSITION = re.compile(r"^(?:\d{1,3}[.)]?\s+|[|]\s*\d{1,3}\s*[|]\s*)")  # a line's position number before its code
_DATE_LIKE = re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}$")
# What may stand between a header-less row's quantity and unit price (a unit, `x`, `@`), and its price and total.
_QUANTITY_GAP = re.compile(r"\s*(?:[A-Za-z]{1,6}\.?\s*)?(?:[x×@*|]|at|per|\s)\s*", re.IGNORECASE)
_TOTAL_GAP = re.compile(r"\s*[=|:→]?\s*|\s+", re.IGNORECASE)

_ITEM_REQUIRED: frozenset[Role] = frozenset({"quantity", "unit_price", "line_total"})
_ITEM_ONE_OF: frozenset[Role] = frozenset({"code", "description"})

TotalKind = Literal["subtotal", "tax", "discount", "charge", "total"]
_NOT_A_TOTAL = frozenset(
    {"items", "qty", "quantity", "units", "weight", "pages", "page", "lines", "paid", "deposit", "received",
     "prepaid", "forward", "carried", "brought", "date", "days", "terms", "phone", "tel", "fax", "iban",
     "account", "previous", "credit", "credits"}
)  # fmt: skip
_TAX_WORDS = TAX_WORDS
# Words of a label that names an identifier, whose number is never an amount: `VAT No`, `Tax ID`, `Reg. No.`,
# `Order number`, `IBAN`, `Account`, `Sort code` …
_IDENTIFIER_WORDS = frozenset(
    {"no", "nr", "num", "number", "numbers", "id", "ids", "ident", "identification", "identifier", "reg",
     "registration", "registered", "vatin", "tin", "ein", "abn", "acn", "gstin", "uid", "siret", "siren", "ref",
     "reference", "order", "po", "iban", "bic", "swift", "sort", "routing", "aba", "acct", "customer", "client",
     "code", "phone", "mobile", "zip", "postcode", "license", "licence", "contract", "project", "case"}
)  # fmt: skip


def total_kind(label: str) -> tuple[TotalKind, int] | None:
    """What a totals-block label names, with a rank among totals (lower wins): None if it is no total."""
    words = set(_LABEL_WORD.findall(label.lower()))
    joined = "".join(_LABEL_WORD.findall(label.lower()))
    if not words or words & _NOT_A_TOTAL or words & _IDENTIFIER_WORDS or "#" in label:
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


@dataclass(frozen=True)
class _Total:
    """A labelled amount of a totals line: its kind and rank (`total_kind`), the value, its label, and whether it is
    written as money (a currency or decimals), which wins over a bare number of the same kind."""

    kind: TotalKind
    rank: int
    value: SourcedValue
    label: str
    money: bool


@dataclass
class _Reading:
    document: str
    header: Header | None = None
    fields: dict[_HEADER_FIELD, SourcedValue] = field(default_factory=dict)
    items: list[ExtractedLineItem] = field(default_factory=list)
    totals: list[_Total] = field(default_factory=list)
    tax_included: SourcedValue | None = None
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
    tax = row.get("tax")
    rate = row.get("tax_rate")
    return ExtractedLineItem(
        product_code=code,
        description=description,
        quantity=quantity,
        unit_price=unit_price,
        line_total=line_total,
        tax=tax if tax and is_amount(tax) else None,
        tax_rate=rate if rate and is_amount(rate.replace("%", "").strip()) else None,
        source=source,
    )


def _headerless_item(line: str, source: Source) -> ExtractedLineItem | None:
    """A line item written without a table header row: a product code (after an optional position number), its
    description, then quantity, unit price and line total as the line's last three numbers, joined by spaces or by
    `x`, `@`, `=` (`AB-100 Widget, 3 x $19.99 = $59.97`; `1  AB-100  Widget  3  19.99  59.97`). The numbers are
    taken as written, never checked against each other here: a wrong line total is what the rules look for."""
    numbers = list(re.finditer(AMOUNT, line))
    if len(numbers) < 3:
        return None
    quantity, price, total = numbers[-3:]
    if quantity.group("pre") or quantity.group("post") or quantity.group("open") or quantity.group("sign"):
        return None  # a quantity has no currency and no sign
    if not _QUANTITY_GAP.fullmatch(line[quantity.end() : price.start()]) or not _TOTAL_GAP.fullmatch(
        line[price.end() : total.start()]
    ):
        return None
    head = _POSITION.sub("", line[: quantity.start()].strip(), count=1)
    code, _, description = head.replace("\t", " ").partition(" ")
    code = code.strip("|:,*")
    if not _CODE_LIKE.match(code) or _DATE_LIKE.match(code) or line[total.end() :].strip(" |"):
        return None
    return ExtractedLineItem(
        product_code=code,
        description=description.strip(" |,:-–—\t"),
        quantity=quantity.group("num"),
        unit_price=price.group().strip(),
        line_total=total.group().strip(),
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
    """The labelled amounts of a line: each amount with the label written just before it. A number that is part of
    an identifier is none (see `_identifier`), whatever its label says."""
    previous_end = 0
    for match in re.finditer(AMOUNT, line):
        label = line[previous_end : match.start()]
        previous_end = match.end()
        kind = total_kind(label)
        if kind is None or _identifier(line, match, label):
            continue
        value = SourcedValue(value=match.group().strip(), source=source)
        reading.totals.append(_Total(kind[0], kind[1], value, label, _money_like(match)))


def _identifier(line: str, match: re.Match[str], label: str) -> bool:
    """Whether the number `match` is (part of) an identifier rather than an amount: glued to letters (`6388047V`),
    after a country or bank prefix (`IE 6388047`, `GB 123 4567 89`), or one group of digits spaced as codes are."""
    after = line[match.end() :]
    if re.match(r"[A-Za-z0-9]", after) or re.match(r" \d", after):
        return True
    return bool(re.search(r"(?<![A-Za-z])[A-Z]{2}\d{0,2}\s?$", label)) and not (match.group("pre") or "")


def _money_like(match: re.Match[str]) -> bool:
    """Written as money: with a currency, or with decimals (`1,140.80`), rather than a bare count of digits."""
    return bool(match.group("pre") or match.group("post") or re.search(r"[.,]\d{1,4}$", match.group("num")))


_INCLUDED = re.compile(r"\b(?:incl(?:ude[sd]?|uding|usive)?|of\s+which|contain(?:s|ed)?)\b", re.IGNORECASE)


def _tax_included(reading: _Reading, line: str, source: Source) -> None:
    """Where the invoice says its prices include the tax: a tax line that says so (`Includes VAT 23%: 103.48`,
    `of which VAT`), or a line without amounts (`Prices include VAT`). Not a total's label (`Total incl. VAT` ends
    tax-exclusive invoices too)."""
    if reading.tax_included is not None:
        return
    words = set(_LABEL_WORD.findall(line.lower()))
    found = _INCLUDED.search(line)
    if not found or not words & _TAX_WORDS:
        return
    amounts = [m for m in re.finditer(AMOUNT, line) if not _identifier(line, m, line[: m.start()])]
    if amounts:
        label = line[: amounts[0].start()]
        kind = total_kind(label)
        if kind is None or kind[0] != "tax" or not _INCLUDED.search(label):
            return
    reading.tax_included = SourcedValue(value=found.group(), source=source)


def _currency_hints(reading: _Reading, line: str, source: Source) -> None:
    code = iso_code_in(line)
    if code and reading.code_currency is None:
        reading.code_currency = SourcedValue(value=code, source=source)
    symbol = currency_of(line)
    if (
        symbol
        and reading.symbol_currency is None
        and any(m.group("pre") or m.group("post") for m in re.finditer(AMOUNT, line))
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
    item = _item(map_row(reading.header, line), source) if reading.header else _headerless_item(line, source)
    if item is not None:
        reading.items.append(item)
        _currency_hints(reading, line, source)
        return
    _header_fields(reading, re.sub(r"\*\*|__", "", line), source)  # Markdown emphasis around labels
    _totals(reading, line, source)
    _tax_included(reading, line, source)
    _currency_hints(reading, line, source)
    if (
        reading.first_line is None
        and not re.search(r"\d|:|invoice", line, re.IGNORECASE)
        and not _INCLUDED.search(line)
    ):
        reading.first_line = SourcedValue(value=line.strip().strip("#*| ").strip(), source=source)


def _assemble_totals(found: list[_Total], tax_included: SourcedValue | None) -> ExtractedTotals:
    def first(kind: TotalKind) -> _Total | None:
        ranked = sorted((not t.money, t.rank, n) for n, t in enumerate(found) if t.kind == kind)
        return found[ranked[0][2]] if ranked else None

    tax = first("tax")
    tax_rate = None
    if tax is not None:
        rates = percentages_in(tax.label)
        match = re.search(r"\d+(?:[.,]\d+)?\s?%", tax.label)
        if rates and match:
            tax_rate = SourcedValue(value=match.group(), source=tax.value.source)
    extra_taxes = [t.value for t in found if t.kind == "tax" and tax is not None and t is not tax and t.money]
    charges = [t.value for t in found if t.kind == "charge"] + extra_taxes
    subtotal, discount, total = first("subtotal"), first("discount"), first("total")
    return ExtractedTotals(
        subtotal=subtotal.value if subtotal else None,
        tax=tax.value if tax else None,
        tax_rate=tax_rate,
        discount=discount.value if discount else None,
        charges=charges,
        total=total.value if total else None,
        tax_included=tax_included if tax is not None or tax_included is not None else None,
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
        totals=_assemble_totals(reading.totals, reading.tax_included),
        extractor=EXTRACTOR,
    )
