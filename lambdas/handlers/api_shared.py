"""What the API function's route modules share: the job service, the caller, the responses routes declare, event pages.

Every operation documents every answer it can give: its success (merged in by the resolver when a route declares
only problems), each problem as `application/problem+json` with the RFC 9457 schema (`Problem`), and the 500
problem every operation may answer (declared once, on the resolver).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseContentModel,
    OpenAPIResponseHeader,
)
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from longhaul.api.jobs import JobService
from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.budgets import SlaClass
from longhaul.core.contracts import CURSOR_MAX_CHARS, CURSOR_PATTERN, TERMINAL_STATUSES, IsoTime, Problem
from longhaul.services import services
from longhaul.storage.listing import JobFilter

PROBLEM_JSON = "application/problem+json"
SSE = "text/event-stream"
#: The schema of one Server-Sent Event (what a client's parser hands it: its `event`, `data` and `id` fields), which an
#: SSE answer is documented with: each event of the stream fits it (a validator reads the stream event by event).
SSE_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}
SSE_RETRY_MS = 2000
EventsLimit = Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)]
EventsWait = Annotated[
    int,
    Query(
        ge=0,
        le=limits.MAX_EVENTS_WAIT_SECONDS,
        description=f"Long-poll: wait up to this many seconds (0-{limits.MAX_EVENTS_WAIT_SECONDS}) for an event after "
        "`cursor` (the `seq` of the last event you have) and answer as soon as there is one; an empty page when none "
        "came. A finished job is answered at once.",
    ),
]
# Time the API function keeps for itself after a long-poll's wait: the reads around it and the answer.
ANSWER_MARGIN_SECONDS = 3.0
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=CURSOR_MAX_CHARS,
        json_schema_extra={"pattern": CURSOR_PATTERN},
        description="`next_cursor` of the previous page: 1-4096 of A-Z a-z 0-9 _ - (a value of that form this listing "
        "did not hand out is a 400; omit it for the first page).",
    ),
]
# A job listing's filters (the tenants' and the operators'), with `status`.
WorkflowFilter = Annotated[
    str | None,
    Query(min_length=1, max_length=64, description="Only this workflow's jobs (its name, e.g. document-analysis)"),
]
SlaClassFilter = Annotated[SlaClass | None, Query(description="Only the jobs of this SLA class")]
CreatedSince = Annotated[
    IsoTime | None, Query(description="Only the jobs created at or after this time (ISO 8601, e.g. 2026-12-01T00:00Z)")
]
CreatedUntil = Annotated[IsoTime | None, Query(description="Only the jobs created at or before this time (ISO 8601)")]
EscalatedFilter = Annotated[
    bool | None,
    Query(description="Only the jobs an operator escalated for engineering (true), or only the others (false)"),
]
SearchFilter = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="Find a job by a prefix of its id (`job_01…`), or by words of its request (its question, its "
        "documents' names): a job is kept when its request has every word given, whatever the case.",
    ),
]


def job_filter(
    *,
    workflow: str | None,
    sla_class: str | None,
    created_since: datetime | None,
    created_until: datetime | None,
    q: str | None,
    escalated: bool | None = None,
) -> JobFilter:
    return JobFilter(
        workflow=workflow,
        sla_class=sla_class,
        created_since=created_since,
        created_until=created_until,
        q=q,
        escalated=escalated,
    )


Responses = dict[int, OpenAPIResponse]

# The API reference's sections (each operation is tagged with one), in the order a client meets them.
JOBS, RESULTS, UPLOADS, TRIGGERS, REVIEWS, OPERATORS, ADMIN, SERVICE = (
    "jobs",
    "results",
    "uploads",
    "triggers",
    "reviews",
    "operators",
    "admin",
    "service",
)
TAGS: dict[str, str] = {
    JOBS: "Submit a job (`POST /v1/jobs`), then follow it: its status and progress, its events (JSON pages, "
    "Server-Sent Events or long polls), its workflow as a graph; cancel it, list your jobs. Needs a tenant key.",
    RESULTS: "A completed job's result (JSON or Markdown, with its budget) and the pages of its documents that its "
    "citations quote. Needs a tenant key.",
    UPLOADS: f"Upload a document (a PDF, or one too large for a request body; up to {limits.MAX_UPLOAD_BYTES} "
    "bytes) to a presigned URL, then give its `upload_id` in a job's documents. Needs a tenant key.",
    TRIGGERS: "Jobs that start themselves: schedules (a cron or rate expression, EventBridge Scheduler), an S3 "
    "inbox (each object dropped there, or each window's objects) and EventBridge rules (each matching event). "
    "Needs a tenant key.",
    REVIEWS: "Human review: the reviews waiting for a decision, what to review, the decision that resumes the job. "
    "Needs a reviewer key.",
    OPERATORS: "Operating the platform across tenants: every tenant's jobs, their model calls (the exact prompt and "
    "response), cancel and replay, dead letters, dead webhooks and their redelivery, metrics. Needs an operator key.",
    ADMIN: "Administering a tenant: its budget policy (ceilings, daily allowance, routes) and its memory. "
    "Needs an operator key.",
    SERVICE: "Whose key it is (its tenant and role), and whether the platform is ready. Without a key: "
    "`GET /v1/health`, this document (`GET /v1/openapi.json`) and Swagger UI (`GET /v1/docs`).",
}

_HEADERS: dict[int, dict[str, OpenAPIResponseHeader]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "Seconds until a retry may succeed.", "schema": {"type": "string"}}},
}


def problems(status: int, description: str) -> Responses:
    """An OpenAPI response declaration for a problem+json answer."""
    response: OpenAPIResponse = {"description": description, "content": {PROBLEM_JSON: {"model": Problem}}}
    if status in _HEADERS:
        response["headers"] = _HEADERS[status]
    return {status: response}


def erased() -> Responses:
    """What a job route answers for an erased job (or one past its retention)."""
    return problems(410, "The job was erased (`job-erased`, with its `erased_at`): asked for, or its retention ended")


def keyed(forbidden: str, *, takes_body: bool = False) -> Responses:
    """What every route behind an API key may answer before it runs: 401 without a valid key, 403 for a key of
    another role, 413 for a body over the limit, and (for a method with a body) 415 for a body that is not JSON."""
    declared = {
        **problems(401, "Missing or unknown API key"),
        **problems(403, forbidden),
        **problems(413, f"Body over {limits.MAX_BODY_BYTES} bytes (LONGHAUL_MAX_BODY_BYTES)"),
    }
    if takes_body:
        declared |= problems(415, f"Body not {limits.ACCEPTED_MEDIA_TYPE}")
    return declared


def with_json_body(description: str) -> Responses:
    """What a route that reads a JSON body may answer about it: 400 (not UTF-8 JSON; `errors` name where) and 422
    (not the contract, numbers out of range, nested too deep; `errors` name every field)."""
    return {
        **problems(400, "The body is not UTF-8 JSON (or holds NaN, Infinity or a lone surrogate); `errors` say where"),
        **problems(422, description),
    }


def model_on_first_read(model: Callable[[], Any]) -> OpenAPIResponseContentModel:
    """A response content `{"model": model()}` whose model is made when Powertools first reads it (the OpenAPI
    document, or the route's first request), not at init: for a model only its route needs (every workflow's
    result)."""
    return cast("OpenAPIResponseContentModel", _ModelOnFirstRead(model))


class _ModelOnFirstRead(Mapping[str, Any]):
    def __init__(self, model: Callable[[], Any]) -> None:
        self._model = model

    def __getitem__(self, key: str) -> Any:
        if key != "model":
            raise KeyError(key)
        return self._model()

    def __iter__(self) -> Iterator[str]:
        return iter(("model",))

    def __len__(self) -> int:
        return 1


INVALID_PARAMETERS = problems(422, "A parameter outside its schema; `errors` name it")
BAD_CURSOR = problems(400, "Not a cursor of this listing")


def base_url(router: BaseRouter) -> str:
    """The API's base URL as the caller reached it (scheme, host and stage prefix), for the links of a response."""
    event = router.current_event
    assert isinstance(event, APIGatewayProxyEvent)  # the API is a REST API: its requests are REST proxy events
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    proto = headers.get("x-forwarded-proto", "https")
    host = headers.get("host", "localhost")
    full_path = event.request_context.path or event.path
    prefix = full_path[: -len(event.path)] if full_path.endswith(event.path) else ""
    return f"{proto}://{host}{prefix}"


def job_service() -> JobService:
    return JobService(services())


def principal(router: BaseRouter) -> Principal:
    """The caller, authenticated by the handler before routing."""
    found = router.context.get("principal")
    assert isinstance(found, Principal)
    return found


def _wait_budget(router: BaseRouter, wait: int) -> float:
    """The long-poll's wait, within what is left of the function's time (API Gateway's 29 s integration timeout)."""
    remaining_ms = getattr(router.lambda_context, "get_remaining_time_in_millis", None)
    if remaining_ms is None:
        return float(wait)
    return max(0.0, min(float(wait), float(remaining_ms()) / 1000 - ANSWER_MARGIN_SECONDS))


def events_response(
    router: BaseRouter, job_id: str, cursor: str | None, limit: int, wait: int = 0, *, any_tenant: bool
) -> Response[str]:
    """A page of the job's events as JSON, or as Server-Sent Events with `Accept: text/event-stream`; with `wait`, a
    long-poll (see `JobService.events`), which is how a client follows a job through API Gateway (a REST API cannot
    hold a stream open)."""
    service, caller, event = job_service(), principal(router), router.current_event
    wait_seconds = _wait_budget(router, wait) if wait else 0.0
    if SSE not in (event.get_header_value("Accept") or ""):
        page = service.events(caller, job_id, cursor, limit, any_tenant=any_tenant, wait_seconds=wait_seconds)
        return Response(status_code=200, content_type="application/json", body=page.model_dump_json())
    # Server-Sent Events: what is new since Last-Event-ID (after waiting for it, with `wait`), then the client
    # reconnects (EventSource does).
    after = event.get_header_value("Last-Event-ID") or cursor
    if wait_seconds:
        service.events(caller, job_id, after, 1, any_tenant=any_tenant, wait_seconds=wait_seconds)
    # the status before the events: no missed last event
    job = service.view(caller, job_id, any_tenant=any_tenant)
    page = service.events(caller, job_id, after, limit, any_tenant=any_tenant)
    frames = [f"id: {e.seq}\nevent: {e.type}\ndata: {e.model_dump_json()}\n\n" for e in page.events]
    if job.status in TERMINAL_STATUSES and page.next_cursor is None:
        frames.append(f"event: end\ndata: {json.dumps({'status': job.status.value})}\n\n")
    body = f"retry: {SSE_RETRY_MS}\n\n" + "".join(frames)
    return Response(status_code=200, content_type=SSE, body=body, headers={"Cache-Control": "no-cache"})
