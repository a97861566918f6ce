"""A contract's price list: product code → agreed unit price, in one currency, each price citing its line.

Rows come from a table whose header names a code and a price column (description optional), in any order, or,
when there is no such header, from lines that start with a product code and end with an amount. The currency comes
from a `Currency:` label, else an ISO code written anywhere (e.g. `Price (USD)`), else the symbol of the prices.
"""

import re
from collections.abc import Sequence
from decimal import Decimal

from longhaul.core.model import Model
from longhaul.workflows.invoice_reconciliation.amounts import AmountError, currency_of, iso_code_in, parse_amount
from longhaul.workflows.invoice_reconciliation.models import Source
from longhaul.workflows.invoice_reconciliation.tables import Header, Role, detect_header, is_rule, map_row, split_cells

_CURRENCY_LABEL = re.compile(
    r"(?:^|\s{2}|\|)\s*(?:contract\s+|invoice\s+)?(?:currency|ccy)\s*[:|]?\s*(?P<value>.+)", re.I
)
_CODE_LIKE = re.compile(r"^(?=[A-Za-z0-9._/-]*\d)[A-Za-z0-9][A-Za-z0-9._/-]{1,24}$")


class PriceListError(ValueError):
    """A contract that cannot serve as a price list; the message says what is missing, for a 422."""


class NoPricesError(PriceListError):
    def __init__(self, document: str) -> None:
        super().__init__(
            f"the contract '{document}' lists no prices: expected rows of product code, description and unit price"
        )


class NoCurrencyError(PriceListError):
    def __init__(self, document: str) -> None:
        super().__init__(
            f"the contract '{document}' states no currency: expected a 'Currency: XXX' line, an ISO code such as "
            "USD in the price column header, or a currency symbol on the prices"
        )


class ConflictingPriceError(PriceListError):
    def __init__(self, document: str, code: str) -> None:
        super().__init__(f"the contract '{document}' lists product '{code}' twice with different prices")


class ContractPrice(Model):
    code: str
    description: str
    unit_price: Decimal
    source: Source


class PriceList(Model):
    document: str
    currency: str
    currency_source: Source
    prices: dict[str, ContractPrice]

    def lookup(self, code: str) -> ContractPrice | None:
        """The contract's price for a product code, ignoring case, spaces and punctuation (`ab 100` = `AB-100`)."""
        return self.prices.get(code_key(code))


def code_key(code: str) -> str:
    return re.sub(r"[^0-9A-Za-z]", "", code).upper()


_PRICE_REQUIRED: frozenset[Role] = frozenset({"code"})
_PRICE_ONE_OF: frozenset[Role] = frozenset({"unit_price", "line_total"})


def _header_row(header: Header, line: str) -> tuple[str, str, str] | None:
    row = map_row(header, line)
    code = row.get("code", "")
    price = row.get("unit_price") or row.get("line_total", "")
    if not code or not price:
        return None
    return code, row.get("description", ""), price


def _bare_row(line: str) -> tuple[str, str, str] | None:
    cells, _ = split_cells(line)
    texts = [cell.text for cell in cells if cell.text]
    if len(texts) < 2 or not _CODE_LIKE.match(texts[0]):
        return None
    return texts[0], " ".join(texts[1:-1]), texts[-1]


def _currency(document: str, lines: list[tuple[int, str]], prices: list[ContractPrice]) -> tuple[str, Source]:
    for page, line in lines:
        match = _CURRENCY_LABEL.search(line)
        code = currency_of(match.group("value")) if match else None
        if code:
            return code, Source(document=document, page=page, quote=line.strip())
    for page, line in lines:
        code = iso_code_in(line)
        if code:
            return code, Source(document=document, page=page, quote=line.strip())
    for price in prices:
        code = currency_of(price.source.quote)
        if code:
            return code, price.source
    raise NoCurrencyError(document)


def parse_price_list(document: str, pages: Sequence[tuple[int, str]]) -> PriceList:
    """Read the price list from a contract's pages, given as (1-based page number, text)."""
    lines = [(page, raw.rstrip()) for page, text in pages for raw in text.split("\n")]
    lines = [(page, line) for page, line in lines if line.strip() and not is_rule(line)]
    headers = [detect_header(line, _PRICE_REQUIRED, _PRICE_ONE_OF) for _, line in lines]
    has_header = any(header is not None for header in headers)
    header: Header | None = None
    prices: list[ContractPrice] = []
    for (page, line), found in zip(lines, headers, strict=True):
        if found is not None:
            header = found
            continue
        # Under a header only its rows count (prose may start with a code-like word); without one, bare rows.
        row = _bare_row(line) if not has_header else _header_row(header, line) if header is not None else None
        if row is None:
            continue
        code, description, raw_price = row
        try:
            unit_price = parse_amount(raw_price)
        except AmountError:
            continue
        source = Source(document=document, page=page, quote=line.strip())
        prices.append(ContractPrice(code=code, description=description, unit_price=unit_price, source=source))
    if not prices:
        raise NoPricesError(document)
    by_code: dict[str, ContractPrice] = {}
    for price in prices:
        known = by_code.setdefault(code_key(price.code), price)
        if known.unit_price != price.unit_price:
            raise ConflictingPriceError(document, price.code)
    currency, currency_source = _currency(document, lines, prices)
    return PriceList(document=document, currency=currency, currency_source=currency_source, prices=by_code)
