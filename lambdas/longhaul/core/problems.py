"""API problems (RFC 9457). Each has a stable `type`; the API handler renders them as problem+json."""

from __future__ import annotations

from typing import Any

TYPE_BASE = "https://longhaul.dev/problems/"


class ApiProblem(Exception):
    status = 500
    slug = "internal"
    title = "Internal error"

    def __init__(self, detail: str | None = None, *, errors: list[dict[str, Any]] | None = None, **extra: Any):
        super().__init__(detail or self.title)
        self.detail = detail
        self.errors = errors
        self.extra = extra

    def body(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"type": TYPE_BASE + self.slug, "title": self.title, "status": self.status}
        if self.detail:
            body["detail"] = self.detail
        if instance:
            body["instance"] = instance
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extra)
        return body


class MalformedJson(ApiProblem):
    status, slug, title = 400, "malformed-json", "The request body is not valid JSON"


class BadRequest(ApiProblem):
    status, slug, title = 400, "bad-request", "The request is not acceptable"


class Unauthorized(ApiProblem):
    status, slug, title = 401, "unauthorized", "A valid API key is required (Authorization: Bearer <key>)"


class Forbidden(ApiProblem):
    status, slug, title = 403, "forbidden", "This key's role may not do that"


class NotFound(ApiProblem):
    status, slug, title = 404, "not-found", "No such resource"


class MethodNotAllowed(ApiProblem):
    """A known path with another method: `allow` lists the methods it has (the `Allow` header)."""

    status, slug, title = 405, "method-not-allowed", "Method Not Allowed"


class NotReady(ApiProblem):
    status, slug, title = 409, "result-not-ready", "The job has no result yet"


class JobStatusConflict(ApiProblem):
    """A pause of a job paused or finished, a resume of a finished one: `job_status` says what it is."""

    status, slug, title = 409, "job-status-conflict", "The job's status does not allow this"


class SignalConflict(ApiProblem):
    """A signal that cannot be taken: one of that name was kept already (`signal_status`: `received`, `consumed`),
    its wait ended without it (`timed_out`) or its step is past (`passed`); or the job finished (`job_status`)."""

    status, slug, title = 409, "signal-conflict", "The signal cannot be taken"


class NoProvisionalResult(ApiProblem):
    status, slug, title = 409, "no-provisional-result", "The job has no provisional result yet"


class JobErased(ApiProblem):
    """The job was erased (asked for, or its tenant's retention ended): `erased_at` says when."""

    status, slug, title = 410, "job-erased", "The job was erased"


class PayloadTooLarge(ApiProblem):
    status, slug, title = 413, "payload-too-large", "The request body is too large"


class UnsupportedMediaType(ApiProblem):
    status, slug, title = 415, "unsupported-media-type", "The request body must be application/json"


class InvalidRequest(ApiProblem):
    status, slug, title = 422, "invalid-request", "The request does not match the contract"


class IdempotencyKeyReused(ApiProblem):
    status, slug, title = 422, "idempotency-key-reused", "This Idempotency-Key was used with a different payload"


class DailyAllowanceExhausted(ApiProblem):
    status, slug, title = 429, "daily-allowance-exhausted", "The tenant has spent its daily model allowance"


class RateLimited(ApiProblem):
    """Over the tenant's `submissions_per_minute`: `Retry-After` (and `retry_after_seconds`) says when to come back."""

    status, slug, title = 429, "rate-limited", "The tenant is over its submission rate"


class Unavailable(ApiProblem):
    status, slug, title = 503, "unavailable", "The platform could not accept the job right now; retry later"


class InternalProblem(ApiProblem):
    status, slug, title = 500, "internal", "Internal error"
