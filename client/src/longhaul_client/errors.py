"""What can go wrong talking to Longhaul, as typed exceptions.

The API answers every error as an RFC 9457 problem (`application/problem+json`: `type`, `title`, `status`, `detail`,
`instance`, and members of its own such as `errors` or `retry_after_seconds`); `Problem` carries those fields, and its
subclass says the status (`NotFound`, `InvalidRequest`, …), so a caller catches what it can handle. `Unreachable` is
an API that did not answer at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

PROBLEM_BASE = "https://longhaul.dev/problems/"


class LonghaulError(Exception):
    """Anything the client raises."""


class Unreachable(LonghaulError):
    """The API could not be reached, or did not answer in time (after the retries that were safe)."""


class Problem(LonghaulError):
    """An RFC 9457 problem the API answered."""

    def __init__(
        self,
        *,
        status: int,
        title: str,
        type: str = "about:blank",
        detail: str | None = None,
        instance: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.status, self.title, self.type = status, title, type
        self.detail, self.instance, self.errors = detail, instance, errors
        self.extra: dict[str, Any] = dict(extra or {})
        super().__init__(f"{title}: {detail}" if detail else title)

    @property
    def slug(self) -> str:
        """The problem's stable name, e.g. `invalid-request` (the last part of its `type`)."""
        return self.type.removeprefix(PROBLEM_BASE) if self.type.startswith(PROBLEM_BASE) else self.type

    def document(self) -> dict[str, Any]:
        """The problem as the API sent it."""
        known = {"type": self.type, "title": self.title, "status": self.status, "detail": self.detail}
        optional = {"instance": self.instance, "errors": self.errors}
        return {**known, **{k: v for k, v in optional.items() if v is not None}, **self.extra}

    @classmethod
    def of(cls, status: int, body: Any) -> Problem:
        """The typed problem of a response: its problem document, or (from something in front of the API, such as a
        gateway's own error) what can be said of it."""
        document: dict[str, Any] = body if isinstance(body, dict) else {}
        if not document.get("title"):
            message = document.get("message") if isinstance(document.get("message"), str) else None
            text = body if isinstance(body, str) and body.strip() else None
            document = {
                "title": _phrase(status),
                "detail": message or (text[:500] if text else None),
                "status": status,
            }
        kind = _BY_STATUS.get(status, ServerError if status >= 500 else Problem)
        fields = ("type", "title", "status", "detail", "instance", "errors")
        errors = document.get("errors")
        return kind(
            status=status,
            title=str(document["title"]),
            type=str(document.get("type") or "about:blank"),
            detail=str(document["detail"]) if document.get("detail") is not None else None,
            instance=str(document["instance"]) if document.get("instance") is not None else None,
            errors=[e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else None,
            extra={k: v for k, v in document.items() if k not in fields},
        )


class BadRequest(Problem):
    """400: malformed JSON, a bad Idempotency-Key or cursor."""


class Unauthorized(Problem):
    """401: no API key, or one the platform does not know."""


class Forbidden(Problem):
    """403: the key's role may not use this route (a tenant key on an operator route, …)."""


class NotFound(Problem):
    """404: no such job, review or webhook for this key (another tenant's job is one too)."""


class Conflict(Problem):
    """409: not now (the result before the job completed, a review already decided, a job already finished)."""


class PayloadTooLarge(Problem):
    """413: the body is above the platform's limit: upload large documents instead."""


class UnsupportedMediaType(Problem):
    """415: the body is not JSON."""


class InvalidRequest(Problem):
    """422: the request is not valid; `errors` says where (`loc`) and why (`msg`)."""


class TooManyRequests(Problem):
    """429: over the tenant's rate or daily allowance; `retry_after_seconds` says when to come back."""


class ServerError(Problem):
    """5xx: the platform could not answer; the request may be retried (safely only where it is idempotent)."""


_BY_STATUS: dict[int, type[Problem]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: InvalidRequest,
    429: TooManyRequests,
}


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"
