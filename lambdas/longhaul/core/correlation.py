"""One correlation id per job, from the client's request to the model calls and the webhook deliveries.

The id is the client's W3C `traceparent` trace id, else its `X-Request-Id` (1–128 of `A-Za-z0-9._:-`), else a new
one (32 hex digits, a valid trace id). It is stored on the job, travels in the execution's state (`WorkflowState`),
is a key of every log line of the job's work (the API's request, each step, each delivery), is returned in every API
response (`X-Request-Id`) and sent on each model call whose provider takes headers and on each webhook delivery
(`X-Request-Id`, and `traceparent` when the id is a trace id), so one search finds the job's whole story.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

REQUEST_ID_HEADER = "X-Request-Id"
TRACEPARENT_HEADER = "traceparent"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-(?P<trace>[0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_INVALID_TRACE = "0" * 32

_current: ContextVar[str | None] = ContextVar("longhaul_correlation_id", default=None)


def new_id() -> str:
    return secrets.token_hex(16)


def from_headers(headers: Mapping[str, str] | None) -> str:
    """The request's correlation id (see the module docstring); header names in any case."""
    lowered = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
    parent = _TRACEPARENT.match(lowered.get(TRACEPARENT_HEADER.lower(), "").strip().lower())
    if parent and parent["trace"] != _INVALID_TRACE:
        return parent["trace"]
    given = lowered.get(REQUEST_ID_HEADER.lower(), "").strip()
    return given if _REQUEST_ID.match(given) else new_id()


def trace_id_for(correlation_id: str) -> str:
    """The job's trace id: the first 128 bits of the SHA-256 of its correlation id, as 32 lowercase hex digits.

    Stable (every function, retry, replay and webhook delivery of the job computes the same one from the id its
    state carries) and never the invalid all-zero trace id."""
    digest = hashlib.sha256(correlation_id.encode()).hexdigest()[:32]
    return digest if digest != _INVALID_TRACE else "0" * 31 + "1"


def current() -> str | None:
    """The correlation id of the work this thread does now (None outside a job's or a request's work)."""
    return _current.get()


@contextmanager
def bound(correlation_id: str | None) -> Iterator[None]:
    token = _current.set(correlation_id)
    try:
        yield
    finally:
        _current.reset(token)


def outgoing_headers(correlation_id: str | None = None) -> dict[str, str]:
    """Headers that carry the id on a call the platform makes (a model call, a webhook delivery)."""
    cid = correlation_id if correlation_id is not None else current()
    if not cid:
        return {}
    headers = {REQUEST_ID_HEADER: cid}
    if _TRACE_ID.match(cid) and cid != _INVALID_TRACE:
        headers[TRACEPARENT_HEADER] = f"00-{cid}-{secrets.token_hex(8)}-01"
    return headers
