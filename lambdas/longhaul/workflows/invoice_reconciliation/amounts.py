"""Amounts and currencies as accounting exports write them, read into `Decimal` (never float).

Supported number formats (documented in `samples/invoices/README.md`):
- `1234.5`, `1,234.50`, `1'234.50`, `1 234.50` (space grouping only inside one table cell): `.` is the decimal mark;
- `1.234,50`, `1 234,50`: read as European when unambiguous, i.e. both marks present (the last one is the decimal
  mark) or a single `,` followed by one, two or four digits. `1,234` is one thousand two hundred and thirty-four,
  `1.234` is one point two three four (the English reading wins when a number could be either);
- negatives as `-50.00`, `−50.00`, `50.00-` or `(50.00)`;
- a currency symbol ($ € £ ¥ ₹, US$ C$ A$ …) or an ISO 4217 code before or after the number.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")

# Curated: common ISO 4217 codes that are not also English words (ALL, TOP, CUP … would match prose).
_ISO_LIST = "USD EUR GBP CHF JPY CAD AUD NZD SEK NOK DKK PLN CZK HUF CNY INR SGD HKD ZAR MXN BRL KRW ILS AED SAR RON"
ISO_CODES = frozenset(_ISO_LIST.split(" "))
# Longest first so that `US$` wins over `$`. A bare `$` is read as USD; see `DOLLAR_CODES`.
SYMBOLS: dict[str, str] = {
    "US$": "USD",
    "CA$": "CAD",
    "AU$": "AUD",
    "NZ$": "NZD",
    "HK$": "HKD",
    "C$": "CAD",
    "A$": "AUD",
    "S$": "SGD",
    "$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
}
DOLLAR_CODES = frozenset({"USD", "CAD", "AUD", "NZD", "HKD", "SGD", "MXN"})

_SYMBOL = "|".join(re.escape(s) for s in SYMBOLS)
_CODE = "|".join(sorted(ISO_CODES))
_CURRENCY = rf"(?:{_SYMBOL}|(?<![A-Za-z])(?:{_CODE})(?![A-Za-z]))"
_GROUP_MARKS = ",.'’\u00a0\u202f"
_NUMBER = rf"\d{{1,3}}(?:[{_GROUP_MARKS}]\d{{3}})+(?:[.,]\d{{1,4}})?|\d+(?:[.,]\d{{1,4}})?"
_NUMBER_SPACED = r"\d{1,3}(?: \d{3})+(?:[.,]\d{1,4})?"
# The patterns are strings that `re` compiles on first use and caches: the API's cold start imports this module
# (through the workflow's models) and compiles none of them.
# One amount inside a line of text: optional sign/parenthesis, currency before or after, not a percentage. A
# currency right before the next number is that number's (`$19.99 $59.97`), not a trailing one of this.
AMOUNT = (
    rf"(?<![\w.,/-])(?P<open>\()?(?:(?P<sign>[-−])\s?)?(?:(?P<pre>{_CURRENCY})\s?)?(?P<sign2>[-−])?"
    rf"(?P<num>{_NUMBER})(?![\d.,]*\d)(?!\s?%)(?:\s?(?P<post>{_CURRENCY})(?!\s?[-−]?\d))?(?P<trail>-(?!\d))?"
    r"(?P<close>\))?"
)
_PERCENT = r"(?<![\w.,])(\d+(?:[.,]\d+)?)\s?%"
_CURRENCY_TOKEN = _CURRENCY
_NUMBER_TOKEN = rf"(?<![\d.,A-Za-z])(?<![A-Za-z]-)(?:{_NUMBER_SPACED}|{_NUMBER})(?![\d])"
_NUMBER_TOKEN_PLAIN = rf"(?<![\d.,A-Za-z])(?<![A-Za-z]-)(?:{_NUMBER})(?![\d])"


class AmountError(ValueError):
    """A string that is not an amount in any supported format."""


def _number_value(digits: str) -> Decimal:
    """The value of one unsigned number written with grouping and decimal marks (see the module docstring)."""
    text = digits.replace(" ", "").replace("\u00a0", "").replace("\u202f", "").replace("'", "").replace("’", "")
    comma, dot = text.rfind(","), text.rfind(".")
    if comma >= 0 and dot >= 0:
        decimal_mark = "," if comma > dot else "."
    elif comma >= 0:
        single = text.count(",") == 1
        decimal_mark = "," if single and len(text) - comma - 1 in (1, 2, 4) else ""
    elif dot >= 0:
        decimal_mark = "." if text.count(".") == 1 else ""
    else:
        decimal_mark = ""
    if decimal_mark:
        whole, fraction = text[: text.rfind(decimal_mark)], text[text.rfind(decimal_mark) + 1 :]
    else:
        whole, fraction = text, ""
    group_mark = {",": ".", ".": ",", "": ",."}[decimal_mark]
    groups = re.split(f"[{re.escape(group_mark)}]", whole) if whole else [""]
    if len(groups) > 1 and (not 1 <= len(groups[0]) <= 3 or any(len(g) != 3 for g in groups[1:])):
        raise AmountError(f"{digits!r} has misplaced grouping marks")
    try:
        return Decimal("".join(groups) + (f".{fraction}" if fraction else ""))
    except InvalidOperation as error:
        raise AmountError(f"{digits!r} is not a number") from error


def parse_amount(raw: str) -> Decimal:
    """The value of one amount cell or token, e.g. `$1,234.50`, `EUR 1.234,50`, `(50.00)`, `3`."""
    text = " ".join(raw.replace("\u00a0", " ").split())
    text = re.sub(_CURRENCY_TOKEN, " ", text).strip()
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    if text[:1] in "-−" and text:
        negative, text = True, text[1:].strip()
    elif text.endswith("-"):
        negative, text = True, text[:-1].strip()
    if not re.fullmatch(rf"{_NUMBER_SPACED}|{_NUMBER}|[.,]\d+", text):
        raise AmountError(f"{raw!r} is not an amount")
    value = _number_value(f"0{text}" if text[:1] in ".," else text)
    return -value if negative else value


def is_amount(raw: str) -> bool:
    try:
        parse_amount(raw)
    except AmountError:
        return False
    return True


def currency_of(text: str) -> str | None:
    """The ISO code an amount or line is written in: an ISO code wins over a symbol; None when neither."""
    symbol: str | None = None
    for match in re.finditer(_CURRENCY_TOKEN, text):
        token = match.group()
        if token in ISO_CODES:
            return token
        symbol = symbol or SYMBOLS[token]
    return symbol


def iso_code_in(text: str) -> str | None:
    """The first ISO code written as a word in `text` (symbols ignored)."""
    for match in re.finditer(_CURRENCY_TOKEN, text):
        if match.group() in ISO_CODES:
            return match.group()
    return None


def mentions_currency(text: str, code: str) -> bool:
    """Whether `text` writes currency `code`, as the code itself or as one of its symbols."""
    return any(code in (token, SYMBOLS.get(token)) for token in re.findall(_CURRENCY_TOKEN, text))


def numbers_in(text: str) -> set[Decimal]:
    """Every number written in `text`, read with and without space grouping (`1 234.50` gives 1, 234.50, 1234.50)."""
    values: set[Decimal] = set()
    text = re.sub(_CURRENCY_TOKEN, " ", text)  # `EUR1,234.50` is a number; `AB-100` is a code, not one
    for pattern in (_NUMBER_TOKEN, _NUMBER_TOKEN_PLAIN):
        for match in re.finditer(pattern, text):
            try:
                values.add(_number_value(match.group()))
            except AmountError:
                continue
    return values


def percentages_in(text: str) -> list[Decimal]:
    """Every `N%` rate written in `text`, in order."""
    return [_number_value(match.group(1)) for match in re.finditer(_PERCENT, text)]


def cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def amount_string(value: Decimal) -> str:
    """A decimal string with at least two decimals (`1234.50`); more when the amount has them (`0.125`)."""
    exponent = value.as_tuple().exponent
    shown = value.quantize(CENT) if isinstance(exponent, int) and exponent > -2 else value
    return format(shown, "f")


def quantity_string(value: Decimal) -> str:
    """A quantity without trailing zeros and never in exponent notation (`3`, `2.5`)."""
    normal = value.normalize()
    return format(normal.quantize(Decimal(1)) if normal == normal.to_integral() else normal, "f")
