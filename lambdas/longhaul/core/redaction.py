"""Personal data in what the platform keeps: detection and typed placeholders (`<EMAIL_1>`, `<IBAN_2>`, ...).

A tenant's policy names the kinds to redact (`TenantPolicy.redact`); a `Redactor` replaces each value of those kinds
by a placeholder of its kind, the same value by the same placeholder (numbered in order of appearance, so a text
redacted twice reads the same twice), and can put the values back (`restore`) for as long as it lives: the mapping
is held by that object in the memory of the step, never written anywhere.

Detection is done by maintained libraries where one exists, on candidates found by a pattern:
- `email`: the WHATWG (HTML) pattern of an e-mail address, checked by email-validator's syntax rules (no DNS);
- `phone`: Google's libphonenumber (`phonenumberslite`), numbers valid for their country (leniency VALID), in
  international form anywhere and in the national form of `PHONE_REGION`; a number run into a longer token (an invoice
  number `INV-2024-000123`) is not one;
- `iban`: python-stdnum's IBAN check (ISO 13616 mod 97 and the country's BBAN format);
- `credit_card`: 13 to 19 digits with a card network's prefix (ISO/IEC 7812 IIN ranges) and a valid Luhn check digit
  (python-stdnum), so an invoice or order number is not read as a card;
- `ip`: IPv4 and IPv6 addresses as the standard library's `ipaddress` parses them;
- `person`: no maintained library does this without a language model (Presidio needs spaCy and a model that is not on
  PyPI): a name introduced by a title (`Mr`, `Mrs`, `Ms`, `Dr`, `Prof`, `Herr`, `Frau`, `Mme`, ...) or by a label
  (`Name:`, `Contact:`, `Attn:`, `Dear`, `Account holder:`, ...). A name that stands alone is not found.

The libraries are imported by the first candidate each checks, and the patterns compiled by it (`re`'s cache), never
with this module: the API imports the kinds (the policy's validation) and the log formatter `scrub`, but never detects.

`scrub(text)` redacts with the kinds bound to the current context (`bound(kinds)`): what the log formatter and the
GenAI spans apply to the content they write while a step of such a tenant works.
"""

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any, Literal, NamedTuple

Kind = Literal["email", "phone", "iban", "credit_card", "ip", "person"]
#: Every kind a policy may name, in the order overlapping findings are preferred (an IBAN's digits are not a card's).
KINDS: tuple[Kind, ...] = ("email", "iban", "credit_card", "ip", "phone", "person")
#: The region whose national phone numbers are read (international ones, `+…`, are read for every country).
PHONE_REGION = "US"
PLACEHOLDER = r"<(EMAIL|PHONE|IBAN|CREDIT_CARD|IP|PERSON)_([1-9][0-9]*)>"

_EMAIL = (
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
)
# Written grouped by four with single spaces, or run together; a candidate is shortened group by group until valid.
_IBAN = r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{1,4}){3,8}(?![A-Za-z0-9])|[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}"
_CARD = r"(?<![\w.,/-])[0-9](?:[ -]?[0-9]){12,18}(?![\w/]|[.,-][0-9])"
_IPV4 = r"(?<![\w.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![\w]|\.[0-9])"
_IPV6 = r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"
_TITLES = r"Mr|Mrs|Ms|Mx|Miss|Dr|Prof|Sir|Madam|Herr|Frau|Mme|Mlle|Sra|Sr"
_NAME = rf"(?!(?:{_TITLES})\b)[A-Z][a-zà-öø-ÿ'’-]+(?:[ ](?:[A-Z]\.|[A-Z][a-zà-öø-ÿ'’-]+)){{0,3}}"
_PERSON = (
    rf"\b(?:(?:{_TITLES})\.?[ ]+"
    r"|(?:(?:Full |Contact |Customer |Client )?[Nn]ame|Contact(?: person)?|Attn|Attention|Account holder|Cardholder"
    r"|Signed by|Dear)[ ]*[:,]?[ ]+)"
    rf"(?P<name>{_NAME})"
)
# ISO/IEC 7812 issuer ranges of the card networks: Visa, Mastercard, American Express, Discover, JCB, Diners, UnionPay.
_CARD_PREFIX = r"^(?:4|5[1-5]|2(?:2[2-9]|[3-6][0-9]|7[01]|720)|3[47]|6(?:011|5|4[4-9]|2)|35|30[0-5]|3[689])"
# A run of digits and the separators phone numbers are written with (the matcher's candidates are within one).
_PHONE_RUN = r"[+(]?[0-9][0-9 ().\-/]{5,}[0-9]"
# Characters that, next to a phone number, make it part of a longer token (an invoice or reference number).
_TOKEN = r"[\w/-]"


class Finding(NamedTuple):
    start: int
    end: int
    kind: Kind
    value: str


class Redactor:
    """Redacts the kinds it is given; `restore` puts back what it replaced (its mapping lives only in this object)."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds: frozenset[str] = frozenset(kinds)
        unknown = self.kinds - set(KINDS)
        if unknown:
            raise ValueError(f"unknown kinds of personal data: {', '.join(sorted(unknown))}")
        self._placeholders: dict[tuple[str, str], str] = {}
        self._values: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def redact(self, text: str) -> str:
        """`text` with every finding of the redactor's kinds replaced by its placeholder."""
        if not self.kinds or not text:
            return text
        out, at = [], 0
        for found in detect(text, self.kinds):
            out.append(text[at : found.start])
            out.append(self._placeholder(found))
            at = found.end
        out.append(text[at:])
        return "".join(out)

    def redact_value(self, value: Any) -> Any:
        """Every string in a JSON-like value redacted (dict keys kept)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {k: self.redact_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact_value(v) for v in value]
        return value

    def restore_value(self, value: Any) -> Any:
        """Every string in a JSON-like value with this redactor's placeholders replaced by their values."""
        if isinstance(value, str):
            return self.restore(value)
        if isinstance(value, Mapping):
            return {k: self.restore_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.restore_value(v) for v in value]
        return value

    def restore(self, text: str) -> str:
        """`text` with the placeholders this redactor made replaced by their values (others left as they are)."""
        if not self._values:
            return text
        return re.sub(PLACEHOLDER, lambda m: self._values.get(m.group(0), m.group(0)), text)

    @property
    def counts(self) -> dict[str, int]:
        """How many distinct values of each kind were replaced."""
        return dict(self._counts)

    def _placeholder(self, found: Finding) -> str:
        key = (found.kind, _normal(found.kind, found.value))
        placeholder = self._placeholders.get(key)
        if placeholder is None:
            number = self._counts.get(found.kind, 0) + 1
            self._counts[found.kind] = number
            placeholder = f"<{found.kind.upper()}_{number}>"
            self._placeholders[key] = placeholder
            self._values[placeholder] = found.value
        return placeholder


def detect(text: str, kinds: Iterable[str]) -> list[Finding]:
    """The findings of `kinds` in `text`, in order, none overlapping (on overlap the earlier of `KINDS` wins, then the
    longer)."""
    wanted = [k for k in KINDS if k in set(kinds)]
    if not wanted or not text:
        return []
    found: list[tuple[int, Finding]] = []
    for rank, kind in enumerate(wanted):
        found.extend((rank, f) for f in _DETECTORS[kind](text))
    found.sort(key=lambda rf: (rf[0], rf[1].start, rf[1].start - rf[1].end))
    taken: list[Finding] = []
    for _, finding in found:
        if all(finding.end <= t.start or finding.start >= t.end for t in taken):
            taken.append(finding)
    return sorted(taken, key=lambda f: f.start)


def _normal(kind: str, value: str) -> str:
    """The form two writings of one value share (`DE89 3704…` and `DE893704…`; an e-mail address in any case)."""
    if kind == "email":
        return value.lower()
    if kind in ("iban", "credit_card", "phone"):
        return re.sub(r"[^0-9A-Za-z+]", "", value).upper()
    return value


# The detection libraries, each imported on the first candidate it is asked to check (a step's, never the API's
# cold start; a prompt without an IBAN-like run never imports python-stdnum's IBAN module).
@cache
def _email_validator() -> Any:
    import email_validator

    return email_validator


@cache
def _phonenumbers() -> Any:
    import phonenumbers

    return phonenumbers


@cache
def _iban() -> Any:
    from stdnum import iban

    return iban


@cache
def _luhn() -> Any:
    from stdnum import luhn

    return luhn


def _emails(text: str) -> Iterator[Finding]:
    if "@" not in text:
        return
    for match in re.finditer(_EMAIL, text):
        value = match.group(0).rstrip(".-")
        email_validator = _email_validator()
        try:
            email_validator.validate_email(value, check_deliverability=False)
        except email_validator.EmailNotValidError:
            continue
        yield Finding(match.start(), match.start() + len(value), "email", value)


def _phones(text: str) -> Iterator[Finding]:
    """libphonenumber's matcher, run on each run of digits and separators long enough to be a number (the matcher
    over a whole prompt costs ten times more: it tries its patterns at every position)."""
    phonenumbers = None
    for candidate in re.finditer(_PHONE_RUN, text):
        if sum(c.isdigit() for c in candidate.group(0)) < 7:
            continue
        phonenumbers = phonenumbers or _phonenumbers()
        window = candidate.group(0)
        matcher = phonenumbers.PhoneNumberMatcher(window, PHONE_REGION, leniency=phonenumbers.Leniency.VALID)
        for match in matcher:
            start, end = candidate.start() + match.start, candidate.start() + match.end
            before = text[start - 1] if start > 0 else " "
            after = text[end] if end < len(text) else " "
            if re.match(_TOKEN, before) or re.match(_TOKEN, after):
                continue  # part of a longer token: a reference, not a phone number
            yield Finding(start, end, "phone", match.raw_string)


def _ibans(text: str) -> Iterator[Finding]:
    for match in re.finditer(_IBAN, text):
        iban = _iban()
        groups = match.group(0).split(" ")
        for n in range(len(groups), 0, -1):  # the longest prefix (by groups) that is a valid IBAN
            value = " ".join(groups[:n])
            if len(value.replace(" ", "")) >= 15 and iban.is_valid(value):
                yield Finding(match.start(), match.start() + len(value), "iban", value)
                break


def _cards(text: str) -> Iterator[Finding]:
    for match in re.finditer(_CARD, text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if 13 <= len(digits) <= 19 and re.match(_CARD_PREFIX, digits) and _luhn().is_valid(digits):
            yield Finding(match.start(), match.end(), "credit_card", match.group(0))


def _ips(text: str) -> Iterator[Finding]:
    import ipaddress

    for pattern in (_IPV4, _IPV6):
        for match in re.finditer(pattern, text):
            value = match.group(0)
            if pattern is _IPV6 and sum(c.isalnum() for c in value) < 2:
                continue  # `::` and the like: not an address worth a placeholder
            try:
                ipaddress.ip_address(value)
            except ValueError:
                continue
            yield Finding(match.start(), match.end(), "ip", value)


# Words that make a salutation's or a label's capitalized words a group or a role, not a person's name.
_NOT_NAMES = frozenset(
    {
        "Team", "Teams", "Department", "Office", "Committee", "Board", "Customer", "Customers", "Client", "Clients",
        "Colleague", "Colleagues", "Partner", "Partners", "Member", "Members", "Supplier", "Suppliers", "Sir", "Madam",
        "Sirs", "All", "Everyone", "Support", "Service", "Services", "Manager",
    }
)  # fmt: skip


def _persons(text: str) -> Iterator[Finding]:
    for match in re.finditer(_PERSON, text):
        name = match.group("name")
        if _NOT_NAMES.isdisjoint(name.split()):
            yield Finding(match.start("name"), match.end("name"), "person", name)


_DETECTORS = {
    "email": _emails,
    "phone": _phones,
    "iban": _ibans,
    "credit_card": _cards,
    "ip": _ips,
    "person": _persons,
}

# ------------------------------------------------------------------------------------- logs and spans of a step

_bound: ContextVar[frozenset[str]] = ContextVar("longhaul_redact", default=frozenset())


@contextmanager
def bound(kinds: Iterable[str]) -> Iterator[None]:
    """Within the block, `scrub` (log lines, span content) redacts `kinds` (nested blocks keep the outer kinds too)."""
    token = _bound.set(_bound.get() | frozenset(kinds))
    try:
        yield
    finally:
        _bound.reset(token)


def active() -> frozenset[str]:
    return _bound.get()


def scrub(text: str) -> str:
    """`text` redacted with the kinds bound to this context (itself when none is)."""
    kinds = _bound.get()
    return Redactor(kinds).redact(text) if kinds and text else text
