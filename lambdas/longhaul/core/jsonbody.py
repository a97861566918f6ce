"""Request bodies as JSON, read strictly: every body the API parses comes through here, so no input reaches a model,
a store or a log as something the platform cannot hold.

- Not UTF-8 (RFC 8259 §8.1), not JSON, `NaN`/`Infinity` (not JSON numbers) or a string holding a lone surrogate (not
  Unicode text; I-JSON, RFC 7493 §2.1): `400 …/malformed-json`.
- Nested deeper than `limits.MAX_JSON_DEPTH`, an integer of more than `limits.MAX_JSON_DIGITS` digits, a number
  beyond a double's range: `422 …/invalid-request`.

Each problem names where it is (`errors[].loc`, e.g. `["body", "input", "max_passages"]`). The standard library's
parser is kept (it is fast and well tried); its hooks mark what cannot be held, and one walk over the result finds
the marks, the depth and the surrogates with their paths. A number written with a fraction or an exponent whose value
is a whole number (`1.0`, `1e2`) is read as that integer: JSON, and JSON Schema's `integer`, do not tell them apart.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any, NamedTuple

from longhaul.core import limits
from longhaul.core.problems import InvalidRequest, MalformedJson

MAX_ERRORS = 20  # listed in one problem; a hostile body could otherwise make a problem as large as itself
_SURROGATE = re.compile("[\ud800-\udfff]")
_EXACT_FLOAT_INTEGERS = 2**53  # above it a double's integer value is not the one written


class _Unreadable(NamedTuple):
    """A value the parser met that the platform will not hold: found again, with its path, by the walk."""

    kind: str
    text: str


def _parse_int(text: str) -> int | _Unreadable:
    digits = len(text) - text.startswith("-")
    if digits > limits.MAX_JSON_DIGITS:
        return _Unreadable("number_too_large", f"an integer of {digits} digits (at most {limits.MAX_JSON_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float | int | _Unreadable:
    value = float(text)
    if not math.isfinite(value):
        return _Unreadable("number_out_of_range", f"{text[:40]} is beyond the range of a number")
    if value.is_integer() and abs(value) <= _EXACT_FLOAT_INTEGERS:
        return int(value)
    return value


def _parse_constant(text: str) -> _Unreadable:
    return _Unreadable("json_invalid", f"{text} is not a JSON number")


_MALFORMED_KINDS = frozenset({"json_invalid", "string_unicode"})


def text_of(body: str, *, base64_encoded: bool) -> str:
    """The body as text: a base64-encoded body (API Gateway's binary passthrough, the local front door for a body
    that is not text) must decode to UTF-8."""
    if not base64_encoded:
        return body
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise _malformed("the body is not valid base64 (as its event says it is)") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _malformed(f"the body is not UTF-8 text (byte {error.start} is not UTF-8); JSON is UTF-8") from None


def loads(text: str | bytes) -> Any:
    """The JSON value of a request body, or the problem (400 or 422) naming what is wrong and where."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _malformed(f"the body is not UTF-8 text (byte {error.start} is not UTF-8); JSON is UTF-8") from None
    try:
        value = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except RecursionError:
        raise InvalidRequest(
            f"the body is nested deeper than {limits.MAX_JSON_DEPTH} levels",
            errors=[{"loc": ["body"], "msg": "nested too deep", "type": "too_deep"}],
        ) from None
    except json.JSONDecodeError as error:
        raise _malformed(f"the body could not be parsed as JSON: {error}") from None
    errors = _problems(value)
    if any(e["type"] in _MALFORMED_KINDS for e in errors):
        raise MalformedJson("the body is not JSON the API reads; see `errors`", errors=errors)
    if errors:
        raise InvalidRequest("see `errors` for what is not allowed", errors=errors)
    return value


def _malformed(detail: str) -> MalformedJson:
    return MalformedJson(detail, errors=[{"loc": ["body"], "msg": detail, "type": "json_invalid"}])


def _problems(value: Any) -> list[dict[str, Any]]:
    """Every unreadable value, lone surrogate and over-deep container, with its path (at most `MAX_ERRORS`)."""
    errors: list[dict[str, Any]] = []
    stack: list[tuple[Any, list[str | int]]] = [(value, ["body"])]
    while stack and len(errors) < MAX_ERRORS:
        item, path = stack.pop()
        if isinstance(item, dict | list) and len(path) > limits.MAX_JSON_DEPTH:
            errors.append(
                {"loc": path, "msg": f"nested deeper than {limits.MAX_JSON_DEPTH} levels", "type": "too_deep"}
            )
        elif isinstance(item, dict):
            for key, member in item.items():
                if _has_surrogate(key):
                    errors.append({"loc": path, "msg": "a member name is not Unicode text", "type": "string_unicode"})
                stack.append((member, [*path, key]))
        elif isinstance(item, list):
            stack.extend((member, [*path, index]) for index, member in enumerate(item))
        elif isinstance(item, str):
            if _has_surrogate(item):
                errors.append(
                    {"loc": path, "msg": "not Unicode text (a lone surrogate escape)", "type": "string_unicode"}
                )
        elif isinstance(item, _Unreadable):
            errors.append({"loc": path, "msg": item.text, "type": item.kind})
    return sorted(errors, key=lambda e: [str(p) for p in e["loc"]])


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None
