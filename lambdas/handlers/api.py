"""The API function: Powertools REST resolver, validated by the pydantic contracts, RFC 9457 errors.

Before routing: the body size, then the API key (no validation feedback without one), the operator role on
`/v1/ops/`, the reviewer role on `/v1/reviews` (a reviewer key reaches nothing else but `/v1/me`), and a JSON body's
media type. Health, the OpenAPI document, Swagger UI and the web console (`/console`) need no key.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import api_audit, api_mcp, init_complete
from handlers.api_console import is_console_path
from handlers.api_console import router as console_routes
from handlers.api_ops import router as operator_routes
from handlers.api_reports import router as report_routes
from handlers.api_reviews import router as reviewer_routes
from handlers.api_shared import (
    BAD_CURSOR,
    INVALID_PARAMETERS,
    JOBS,
    PROBLEM_JSON,
    RESULTS,
    SERVICE,
    SSE,
    SSE_EVENT_SCHEMA,
    TAGS,
    UPLOADS,
    CreatedSince,
    CreatedUntil,
    Cursor,
    EscalatedFilter,
    EventsLimit,
    EventsWait,
    SearchFilter,
    SlaClassFilter,
    WorkflowFilter,
    base_url,
    erased,
    events_response,
    job_filter,
    job_service,
    keyed,
    model_on_first_read,
    principal,
    problems,
    with_json_body,
)
from handlers.api_steer import router as steering_routes
from handlers.api_stream import router as stream_routes
from handlers.api_trace import router as trace_routes
from handlers.api_triggers import router as trigger_routes
from handlers.api_updates import router as update_routes
from handlers.resolver import ThreadSafeRestResolver
from longhaul.adapters.tokens import expires_later, looks_like_jwt
from longhaul.api.graph import WorkflowGraph
from longhaul.api.jobs import readiness
from longhaul.core import correlation, jsonbody, limits
from longhaul.core.auth import JWT_KEY_PREFIX, ROLES, Principal, bearer_token
from longhaul.core.contracts import (
    IDEMPOTENCY_KEY_PATTERN,
    Caller,
    CancelOutcome,
    EventPage,
    Health,
    JobAccepted,
    JobList,
    JobStatus,
    JobView,
    PageText,
    ResultDownload,
    UploadRequest,
    UploadTicket,
)
from longhaul.core.erasure import ErasureAccepted
from longhaul.core.observability import logger
from longhaul.core.problems import (
    ApiProblem,
    Forbidden,
    InternalProblem,
    InvalidRequest,
    MalformedJson,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from longhaul.services import services
from longhaul.workflows import EDITS_MODELS, REGISTRY, JobRequest, job_result_body, result_models

MARKDOWN = "text/markdown"
API_VERSION = "1.0.0"
TITLE = "Longhaul API"
DESCRIPTION = (
    "Durable, observable, budget-aware execution of long-running LLM jobs.\n\n"
    f"Limits: request bodies up to {limits.MAX_BODY_BYTES} bytes (413 above; `LONGHAUL_MAX_BODY_BYTES`); "
    f"1-{limits.MAX_DOCUMENTS} documents per job; names up to {limits.MAX_NAME_CHARS} characters; "
    f"1-{limits.MAX_PASSAGES} passages; uploads up to {limits.MAX_UPLOAD_BYTES} bytes "
    f"(presigned URL valid {limits.UPLOAD_URL_SECONDS} s); "
    f"ZIP archives of documents up to {limits.MAX_ARCHIVE_BYTES} bytes, "
    f"{limits.MAX_ARCHIVE_EXPANDED_BYTES} bytes expanded; deadlines {limits.MIN_DEADLINE_SECONDS}-"
    f"{limits.MAX_DEADLINE_SECONDS} s (default {limits.DEFAULT_DEADLINE_SECONDS}). Request bodies are "
    f"{limits.ACCEPTED_MEDIA_TYPE} (415 otherwise).\n\n"
    "Without a key: `GET /v1/health`, this document at `GET /v1/openapi.json`, Swagger UI at `GET /v1/docs`."
)
# Served without an API key (and checked against the gateway's routes); so is the console (`/console`, `/console/…`).
PUBLIC_PATHS = frozenset({"/v1/health", "/v1/openapi.json", "/v1/docs"})
MCP_PATH = "/mcp"
# What every role may call: who the key is, and the MCP endpoint (each key sees its role's tools there).
EVERY_ROLE_PATHS = frozenset({"/v1/me", MCP_PATH})
JSON_METHODS = frozenset({"POST", "PUT", "PATCH"})
MERGE_PATCH = "application/merge-patch+json"  # (RFC 7396) also accepted for a PATCH's body
# Every operation may meet an error nobody foresaw: a 500 problem whose `error_id` is in the log line of the error.
UNEXPECTED = problems(500, "An unexpected error; `error_id` finds its log line")
app = ThreadSafeRestResolver(  # the local runtime resolves requests concurrently
    enable_validation=True,
    json_body_deserializer=jsonbody.loads,  # strict: no body reaches a model as something the platform cannot hold
    always_responses=UNEXPECTED,
)


def _problem_response(problem: ApiProblem) -> Response[str]:
    headers = {"WWW-Authenticate": 'Bearer realm="longhaul"'} if problem.status == 401 else {}
    if "retry_after_seconds" in problem.extra:  # a 429 says when to come back (RFC 9110 Retry-After, in seconds)
        headers["Retry-After"] = str(problem.extra["retry_after_seconds"])
    return Response(
        status_code=problem.status,
        content_type=PROBLEM_JSON,
        body=json.dumps(problem.body(instance=app.current_event.path)),
        headers=headers or None,
    )


TENANT_KEY = "A reviewer key (it reaches only the review routes)"
JOB_PROBLEMS = {
    **keyed(TENANT_KEY),
    **problems(404, "No such job for this tenant"),
    **problems(410, "The job was erased (`job-erased`, with its `erased_at`): asked for, or its retention ended"),
}


def _base_url() -> str:
    return base_url(app)


# ---------------------------------------------------------------------- middleware and errors


@app.exception_handler(ApiProblem)
def _api_problem(problem: ApiProblem) -> Response[str]:
    return _problem_response(problem)


def _internal_problem() -> InternalProblem:
    """The 500 problem of the exception being handled, logged once with its trace under a new `error_id`, which
    the problem carries: a client's report finds the log line."""
    error_id = f"err_{uuid.uuid4().hex}"
    logger.exception("unhandled error in the API", extra={"error_id": error_id})
    return InternalProblem(f"an unexpected error occurred; it is logged as {error_id}", error_id=error_id)


@app.exception_handler(Exception)
def _unexpected(error: Exception) -> Response[str]:
    """Anything unforeseen is a 500 problem (logged with its trace), never a bare gateway error."""
    return _problem_response(_internal_problem())


@app.exception_handler(RequestUnsupportedContentType)
def _unsupported_media_type(_: RequestUnsupportedContentType) -> Response[str]:
    return _problem_response(_not_json(app.current_event.get_header_value("Content-Type") or ""))


def _not_json(content_type: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"send the body as {limits.ACCEPTED_MEDIA_TYPE}, not {content_type.split(';')[0].strip() or 'that'}",
        accepted=[limits.ACCEPTED_MEDIA_TYPE],
    )


@app.exception_handler(RequestValidationError)
def _validation_problem(error: RequestValidationError) -> Response[str]:
    errors = error.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return _problem_response(MalformedJson("the body could not be parsed as JSON"))
    details = [{"loc": _location(e), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors]
    extra: dict[str, Any] = {}
    if any(tuple(e["loc"][:2]) == ("body", "workflow") for e in details):
        extra["allowed_workflows"] = list(REGISTRY)
    if any(tuple(e["loc"][:2]) == ("body", "sla_class") for e in details):  # as for a class the policy refuses
        extra["allowed_sla_classes"] = job_service().allowed_sla_classes(principal(app))
    return _problem_response(InvalidRequest("see `errors` for what is not allowed", errors=details, **extra))


def _location(error: Mapping[str, Any]) -> list[int | str]:
    """A field's location as the client wrote it: without the union's tag (`body.<workflow>.input` → `body.input`)
    or the member of a union it is about (a reviewer's `edits`); a missing or unknown `workflow` (the union's tag) is
    located at `body.workflow`."""
    parts = list(error.get("loc", ()))
    if error.get("type") in ("union_tag_invalid", "union_tag_not_found") and parts == ["body"]:
        return ["body", "workflow"]
    parts = parts[:1] + parts[2:] if len(parts) > 1 and parts[0] == "body" and parts[1] in REGISTRY else parts
    return [part for part in parts if not _union_member(part)]


_EDITS_MODELS = frozenset(model.__name__ for model in EDITS_MODELS)


def _union_member(part: object) -> bool:
    """pydantic's label of a union's member: the model's name (`SummaryEdits`), or its validator's
    (`function-after[_something(), AnswerEdits]`)."""
    return isinstance(part, str) and (part in _EDITS_MODELS or (part.startswith("function-") and "[" in part))


@app.not_found
def _not_found(_: Exception) -> Response[str]:
    """No route: a path the resolver knows with another method is 405 with `Allow` (the operator routes reach this
    function through one greedy gateway resource, so the gateway cannot say it), any other 404."""
    method, path = app.current_event.http_method, app.current_event.path
    allowed = app.methods_at(path)
    if allowed:
        response = _problem_response(MethodNotAllowed(f"{method} is not allowed on {path}"))
        response.headers["Allow"] = ", ".join(allowed)
        return response
    return _problem_response(NotFound(f"no route {method} {path}"))


# ---------------------------------------------------------------------- routes


_JOB_LINKS = {
    name: {"operationId": operation, "parameters": {"job_id": "$response.body#/job_id"}}
    for name, operation in (
        ("GetJob", "get_job"),
        ("GetEvents", "get_events"),
        ("GetResult", "get_result"),
        ("CancelJob", "cancel_job"),
    )
}


@app.post(
    "/v1/jobs",
    summary="Submit a job",
    description="Start a job of a workflow on its input; the 202 names the job and its status URL (`Location`). "
    "Follow it there, in its events, then read its result. A retry with the same Idempotency-Key is the same job.",
    operation_id="submit_job",
    tags=[JOBS],
    responses={
        202: {
            "description": "Accepted (or, for a known Idempotency-Key with the same payload, the same job again)",
            "headers": {"Location": {"description": "The job's status URL.", "schema": {"type": "string"}}},
            "content": {"application/json": {"model": JobAccepted}},
            "links": _JOB_LINKS,
        },
        **keyed(TENANT_KEY, takes_body=True),
        **with_json_body(
            "Invalid input or name, unknown workflow, Idempotency-Key outside its pattern or reused with another "
            "payload, a budget, route or sla_class outside the tenant's policy, an upload that is missing, or a job "
            "id (`supersedes`, a dispute's `reconciliation_job_id`) that is not one of the tenant's: a request that "
            "matches this schema can still name something that does not exist, and that is a 422 naming the field"
        ),
        **problems(
            429,
            "Over the tenant's submissions_per_minute (`rate-limited`) or daily model allowance; the Retry-After "
            "header and `retry_after_seconds` say when to retry",
        ),
        **problems(503, "The platform could not accept the job now; retry with the same Idempotency-Key"),
    },
)
def submit_job(
    request: Annotated[JobRequest, Body()],  # one model per workflow, discriminated on `workflow`
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            pattern=IDEMPOTENCY_KEY_PATTERN,
            description="The same key with the same payload answers the same job (24 h, per tenant); with another "
            "payload it is a 422.",
        ),
    ] = None,
) -> Response[str]:
    accepted, _ = job_service().submit(principal(app), request, idempotency_key, _base_url())
    return Response(
        status_code=202,
        content_type="application/json",
        body=accepted.model_dump_json(),
        headers={"Location": accepted.status_url},
    )


@app.get(
    "/v1/jobs/<job_id>",
    summary="Get a job's status and progress",
    operation_id="get_job",
    tags=[JOBS],
    responses=JOB_PROBLEMS,
)
def get_job(job_id: Annotated[str, Path()]) -> JobView:
    return job_service().view(principal(app), job_id)


@app.get(
    "/v1/jobs/<job_id>/events",
    summary="Follow a job's events",
    description="The job's append-only event log: JSON pages, or Server-Sent Events with `Accept: text/event-stream`; "
    "`wait` long-polls for the next event.",
    operation_id="get_events",
    tags=[JOBS],
    responses={
        200: {
            "description": "A page of events",
            "content": {"application/json": {"model": EventPage}, SSE: {"schema": SSE_EVENT_SCHEMA}},
        },
        **JOB_PROBLEMS,
        **BAD_CURSOR,
        **INVALID_PARAMETERS,
    },
)
def get_events(
    job_id: Annotated[str, Path()], cursor: Cursor = None, limit: EventsLimit = 100, wait: EventsWait = 0
) -> Response[str]:
    return events_response(app, job_id, cursor, limit, wait, any_tenant=False)


GRAPH_PROBLEMS = {**problems(503, "The workflow engine did not answer")}


@app.get(
    "/v1/jobs/<job_id>/graph",
    summary="Get a job's workflow as a graph",
    description="The states of the state machine its execution runs, each with this job's status (done, running, "
    "waiting, failed, stopped, skipped, pending), and each fan-out's progress.",
    operation_id="get_graph",
    tags=[JOBS],
    responses={**JOB_PROBLEMS, **GRAPH_PROBLEMS},
)
def get_graph(job_id: Annotated[str, Path()]) -> WorkflowGraph:
    return job_service().graph(principal(app), job_id)


@app.get(
    "/v1/jobs/<job_id>/result",
    summary="Get a job's result",
    description="The completed job's result as JSON, or its Markdown rendering with `Accept: text/markdown`. With "
    '`provisional=true`, before the job completes: its provisional result (`"provisional": true`, `as_of_step`: '
    "the step whose output it is, e.g. a draft before its verification), 409 `no-provisional-result` while there is "
    'none; after completion the final result (`"provisional": false`).',
    operation_id="get_result",
    tags=[RESULTS],
    responses={
        200: {
            "description": "The result of the job's workflow, with its `budget` (limits, usage, cost and what "
            "remains, per step)",
            "content": {
                "application/json": model_on_first_read(job_result_body),  # every workflow's result: built when read
                MARKDOWN: {"schema": {"type": "string"}},
            },
        },
        303: {
            "description": "A result over `LONGHAUL_RESULT_INLINE_MAX_BYTES` (default 5 MiB) is not answered in the "
            "body: `Location` is its presigned download (as `GET …/result/download` gives it; a client that follows "
            "redirects reads the result from there, without sending its key), and the body says the same",
            "headers": {"Location": {"description": "The presigned download URL", "schema": {"type": "string"}}},
            "content": {"application/json": {"model": ResultDownload}},
        },
        **JOB_PROBLEMS,
        **problems(
            409, "Not completed yet (`result-not-ready`), or no provisional result yet (`no-provisional-result`)"
        ),
        **INVALID_PARAMETERS,
    },
)
def get_result(
    job_id: Annotated[str, Path()],
    provisional: Annotated[
        bool,
        Query(description="Answer the provisional result before the job completes (the final one after)."),
    ] = False,
) -> Response[str]:
    jobs = job_service()
    job = jobs.job(principal(app), job_id)
    wants_markdown = MARKDOWN in (app.current_event.get_header_value("Accept") or "")
    large = jobs.oversized(job, media="markdown" if wants_markdown else "json")
    if large is not None:  # too large for a response body: a link to the object instead
        return Response(
            status_code=303,
            content_type="application/json",
            body=large.model_dump_json(),
            headers={"Location": large.url},
        )
    result, as_of_step = jobs.result_of(job, provisional=provisional)
    markdown_key = getattr(result, "markdown_key", None)
    if wants_markdown and isinstance(markdown_key, str):
        markdown = services().artifacts.get_bytes(markdown_key).decode()
        return Response(status_code=200, content_type=f"{MARKDOWN}; charset=utf-8", body=markdown)
    view = jobs.view(principal(app), job_id)
    marks = {"provisional": as_of_step is not None, "as_of_step": as_of_step, "superseded_by": view.superseded_by}
    body = result_models()[view.workflow].model_validate({**result.model_dump(), "budget": view.budget, **marks})
    return Response(status_code=200, content_type="application/json", body=body.model_dump_json())


@app.get(
    "/v1/jobs/<job_id>/result/download",
    summary="Get an expiring link to a job's result",
    description="A presigned GET of the completed job's result: `format=json` the result its workflow wrote, "
    "`markdown` its rendering. The URL works until `expires_at` (`expires_in`, default 900 s, at most the tenant "
    "policy's `download_ttl_seconds`), then answers 403; fetch it without an `Authorization` header.",
    operation_id="download_result",
    tags=[RESULTS],
    responses={
        **JOB_PROBLEMS,
        **problems(404, "No such job for this tenant, or no rendering of its result in that format"),
        **problems(409, "Not completed yet (`result-not-ready`)"),
        **INVALID_PARAMETERS,
    },
)
def download_result(
    job_id: Annotated[str, Path()],
    format: Annotated[Literal["json", "markdown"], Query(description="The result or its Markdown rendering.")] = "json",
    expires_in: Annotated[
        int | None,
        Query(ge=1, le=limits.MAX_DOWNLOAD_TTL_SECONDS, description="Seconds the URL lives (default 900)."),
    ] = None,
) -> ResultDownload:
    return job_service().download(principal(app), job_id, media=format, expires_in=expires_in)


@app.get(
    "/v1/jobs/<job_id>/pages",
    summary="Read a page of a job's document",
    description="A page of the job's document as its steps read it: where a citation's quote is shown in context.",
    operation_id="get_page",
    tags=[RESULTS],
    responses={**keyed(TENANT_KEY), **problems(404, "No such job, document or page"), **erased(), **INVALID_PARAMETERS},
)
def get_page(
    job_id: Annotated[str, Path()],
    document: Annotated[str, Query(min_length=1, max_length=limits.MAX_ARCHIVE_NAME_CHARS)],
    page: Annotated[int, Query(ge=1)],
) -> PageText:
    return job_service().page(principal(app), job_id, document, page)


@app.post(
    "/v1/uploads",
    summary="Get a URL to upload a document to",
    description=f"A presigned URL to upload a document to (up to {limits.MAX_UPLOAD_BYTES} bytes, valid "
    f"{limits.UPLOAD_URL_SECONDS} s); a job's document then names it by its `upload_id`. With `trigger_id` (an S3 "
    "trigger's), the upload goes to that trigger's inbox under its `filename`, and starts its job.",
    operation_id="create_upload",
    tags=[UPLOADS],
    responses={
        201: {"description": "The upload's id and URL", "content": {"application/json": {"model": UploadTicket}}},
        **keyed(TENANT_KEY, takes_body=True),
        **with_json_body("Invalid name or media type, or a `trigger_id` that is not one of the tenant's S3 triggers"),
    },
)
def create_upload(request: Annotated[UploadRequest, Body()]) -> Response[str]:
    if request.trigger_id is not None:  # into an S3 trigger's inbox: the object starts the trigger's job
        from longhaul.api.triggers import TriggerService

        ticket: UploadTicket = TriggerService(services()).inbox_upload(principal(app), request)
        return Response(status_code=201, content_type="application/json", body=ticket.model_dump_json())
    ticket = job_service().create_upload(principal(app), request)
    return Response(status_code=201, content_type="application/json", body=ticket.model_dump_json())


@app.get(
    "/v1/jobs",
    summary="List your jobs",
    description="The tenant's jobs, newest first, paged; filter by status, workflow, SLA class and creation time, and "
    "find one by a prefix of its id or words of its question (`q`). A filtered page may hold fewer than `limit` "
    "jobs and still have a `next_cursor`: follow it until it is null.",
    operation_id="list_jobs",
    tags=[JOBS],
    responses={**keyed(TENANT_KEY), **BAD_CURSOR, **INVALID_PARAMETERS},
)
def list_jobs(
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)] = 50,
    cursor: Cursor = None,
    workflow: WorkflowFilter = None,
    sla_class: SlaClassFilter = None,
    created_since: CreatedSince = None,
    created_until: CreatedUntil = None,
    q: SearchFilter = None,
    escalated: EscalatedFilter = None,
) -> JobList:
    narrow = job_filter(
        workflow=workflow,
        sla_class=sla_class,
        created_since=created_since,
        created_until=created_until,
        q=q,
        escalated=escalated,
    )
    return job_service().list(principal(app), status, limit, cursor, narrow)


@app.post(
    "/v1/jobs/<job_id>/cancel",
    summary="Cancel a job",
    description="Stop the job's execution; its completed steps are kept.",
    operation_id="cancel_job",
    tags=[JOBS],
    responses={
        202: {
            "description": "Cancelled (or already cancelled)",
            "content": {"application/json": {"model": CancelOutcome}},
        },
        **JOB_PROBLEMS,
        **keyed(TENANT_KEY, takes_body=True),
        **problems(409, "The job already finished"),
        **problems(503, "The workflow engine did not stop the job now; retry"),
    },
)
def cancel_job(job_id: Annotated[str, Path()]) -> Response[str]:
    outcome = job_service().cancel(principal(app), job_id)
    return Response(status_code=202, content_type="application/json", body=outcome.model_dump_json())


@app.delete(
    "/v1/jobs/<job_id>",
    summary="Erase a job",
    description="Erase everything of the job: its documents and uploads, artifacts, kept prompts and responses, "
    "results, events and records, webhook bodies, the memory derived from it, its live output and its spans. A "
    "running job is cancelled first. A tombstone stays (its usage and cost, for billing, and the `job_erased` "
    "event); from then the job answers 410 `job-erased`. Asked again, it answers the same (an erasure cut short "
    "goes on).",
    operation_id="erase_job",
    tags=[JOBS],
    responses={
        202: {
            "description": "The job is erased (or being erased): what will go and what stays",
            "content": {"application/json": {"model": ErasureAccepted}},
        },
        **keyed(TENANT_KEY),
        **problems(404, "No such job for this tenant"),
        **problems(503, "The workflow engine did not stop the job now; retry"),
    },
)
def erase_job(job_id: Annotated[str, Path()]) -> Response[str]:
    from longhaul.api.erasure import erase_own_job  # an erasure's modules: not every cold start's import

    accepted = erase_own_job(services(), principal(app), job_id)
    return Response(status_code=202, content_type="application/json", body=accepted.model_dump_json())


app.include_router(operator_routes)
app.include_router(api_audit.router)
app.use(middlewares=[api_audit.middleware])  # every audited request is recorded, whatever its route
app.include_router(reviewer_routes)
app.include_router(steering_routes)
app.include_router(console_routes)
app.include_router(stream_routes)
app.include_router(trace_routes)
app.include_router(update_routes)
app.include_router(report_routes)
app.include_router(trigger_routes)


@app.post(MCP_PATH, include_in_schema=False)  # JSON-RPC, not a REST operation: the manual describes it
def post_mcp() -> Response[str]:
    """An MCP message (Streamable HTTP, stateless, JSON responses): `handlers.api_mcp`."""
    status, headers, body = api_mcp.respond(app.current_event.raw_event, principal(app), _base_url())
    return Response(status_code=status, content_type=headers.pop("content-type", None), body=body, headers=headers)


@app.get(MCP_PATH, include_in_schema=False)
def get_mcp() -> Response[str]:
    """The server-to-client stream of a stateful MCP server: none here (405)."""
    status, headers, body = api_mcp.not_streamed()
    return Response(status_code=status, content_type=headers.pop("Content-Type"), body=body, headers=headers)


@app.get(
    "/v1/me",
    summary="Whose key this is",
    description="The key's tenant and role (every role may ask).",
    operation_id="get_me",
    tags=[SERVICE],
    responses={
        **problems(401, "Missing or unknown API key"),
        **problems(413, f"Body over {limits.MAX_BODY_BYTES} bytes (LONGHAUL_MAX_BODY_BYTES)"),
    },
)
def get_me() -> Caller:
    caller = principal(app)
    return Caller(tenant_id=caller.tenant_id, role=caller.role, groups=caller.groups, subject=caller.subject)


# ---------------------------------------------------------------------- without a key


@app.get(
    "/v1/health",
    summary="Check version and readiness",
    description="The API's version and whether the platform is ready (503 when not); no key needed.",
    operation_id="get_health",
    tags=[SERVICE],
    security=[],
    responses={
        200: {"description": "Ready", "content": {"application/json": {"model": Health}}},
        503: {"description": "Not ready", "content": {"application/json": {"model": Health}}},
    },
)
def get_health() -> Response[str]:
    health = readiness(services, version=API_VERSION)
    return Response(
        status_code=200 if health.status == "ok" else 503,
        content_type="application/json",
        body=health.model_dump_json(),
        headers={"Cache-Control": "no-store"},
    )


@app.get("/v1/openapi.json", include_in_schema=False)
def get_openapi() -> Response[str]:
    return Response(status_code=200, content_type="application/json", body=openapi_json(server=_base_url()))


def _document() -> dict[str, Any]:
    """The API's security scheme and its tags (the sections of its reference, in the order a client meets them).
    Powertools' OpenAPI models (a large set of pydantic models) are imported here, when a document is asked for, not
    at a cold start: no other request needs them."""
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Tag

    return {
        "security_schemes": {"bearer": HTTPBearer(scheme="bearer", description="Tenant or operator API key")},
        "security": [{"bearer": []}],
        "tags": [Tag(name=name, description=description) for name, description in TAGS.items()],
    }


_SWAGGER_PATH = "/v1/docs"


@app.get(_SWAGGER_PATH, include_in_schema=False)
def get_swagger_ui() -> Response[str]:
    """Swagger UI over the very document `GET /v1/openapi.json` answers (its server the stage it is served from), with
    Powertools' Swagger UI assets inlined (no CDN); `?format=json` answers that document."""
    from pathlib import Path as FilePath

    from aws_lambda_powertools.event_handler.openapi.swagger_ui.html import generate_swagger_html

    document = openapi_json(server=_base_url())
    if (app.current_event.query_string_parameters or {}).get("format") == "json":
        return Response(status_code=200, content_type="application/json", body=document)
    assets = FilePath(generate_swagger_html.__code__.co_filename).parent
    page = generate_swagger_html(
        document.replace("</", "<\\/"),  # (the document sits in a script element)
        (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
        (assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
        "",
        None,
    )
    return Response(status_code=200, content_type="text/html", body=page)


def openapi_json(server: str = "http://127.0.0.1:8000") -> str:
    """The OpenAPI document; the committed one names the local runtime as its server."""
    from aws_lambda_powertools.event_handler.openapi.models import Server

    description = "local runtime" if server.startswith("http://127.0.0.1") else "this deployment"
    spec = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=API_VERSION,
            description=DESCRIPTION,
            servers=[Server(url=server, description=description)],
            **_document(),
        )
    )
    spec["paths"]["/v1/health"]["get"]["security"] = []  # Powertools drops an empty list: no key needed here
    for operation in (op for path in spec["paths"].values() for op in path.values()):
        # Powertools documents a 422 of its own shape on every operation; this API answers a problem instead, and
        # only where a parameter or the body can be refused (each route declares it).
        responses = operation["responses"]
        if _VALIDATION_ERROR in json.dumps(responses.get("422", {})):
            del responses["422"]
    for path, item in spec["paths"].items():  # a collection: creating in it comes before listing it (submit, then list)
        if "post" in item and "get" in item and not path.endswith("}"):
            spec["paths"][path] = {"post": item["post"], **{k: v for k, v in item.items() if k != "post"}}
    _keep_reachable_schemas(spec)
    return json.dumps(spec, indent=2)


_VALIDATION_ERROR = "#/components/schemas/HTTPValidationError"


def _keep_reachable_schemas(spec: dict[str, Any]) -> None:
    """Drop the component schemas no operation reaches (Powertools' own validation error models)."""
    schemas: dict[str, Any] = spec["components"]["schemas"]
    reached: set[str] = set()
    pending = [spec["paths"]]
    while pending:
        text = json.dumps(pending.pop())
        for name in set(_REF.findall(text)) - reached:
            reached.add(name)
            pending.append(schemas[name])
    spec["components"]["schemas"] = {name: schema for name, schema in schemas.items() if name in reached}


_REF = re.compile(r'"#/components/schemas/([^"]+)"')


def _raw_problem(problem: ApiProblem, event: dict[str, Any]) -> dict[str, Any]:
    """A problem answered before routing (the resolver's response helpers need a current event)."""
    headers = {"Content-Type": PROBLEM_JSON}
    if problem.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="longhaul"'
    if "retry_after_seconds" in problem.extra:
        headers["Retry-After"] = str(problem.extra["retry_after_seconds"])
    return {
        "statusCode": problem.status,
        "headers": headers,
        "body": json.dumps(problem.body(instance=event.get("path"))),
        "isBase64Encoded": False,
    }


def _authenticate(event: dict[str, Any]) -> Principal | None:
    """Who calls. An API key is looked up here on every path, through the function's key cache
    (`LOOKUP_CACHE_SECONDS`): API Gateway keeps the authorizer's answer for a key up to its cache TTL
    (`stacks/api.py`), and that cached context must not outlive a revocation, so for a key it is not trusted; a
    revoked key is refused within `LOOKUP_CACHE_SECONDS` whatever the gateway's cache says. A JWT carries no state to
    revoke: the principal the authorizer established from it (`handlers.authorizer`; only API Gateway writes
    `requestContext.authorizer`) stands until the token's `exp`, checked here again, since the gateway may keep the
    answer longer than the token lives."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    token = bearer_token(headers.get("authorization"))
    if not token:
        return None
    authorized = dict((event.get("requestContext") or {}).get("authorizer") or {})
    key_id = str(authorized.get("key_id") or "")
    if looks_like_jwt(token):
        if not (key_id.startswith(JWT_KEY_PREFIX) and authorized.get("tenant_id") and authorized.get("role") in ROLES):
            return None  # a JWT reaches the API only through the authorizer
        expires_at = int(str(authorized.get("expires_at") or 0))
        if not expires_later(expires_at, time.time()):
            return None
        groups = authorized.get("groups")
        return Principal(
            tenant_id=str(authorized["tenant_id"]),
            role=authorized["role"],
            key_id=key_id,
            subject=str(authorized.get("subject") or key_id.removeprefix(JWT_KEY_PREFIX)),
            groups=[g for g in str(groups).split(",") if g] if groups is not None else None,
            expires_at=expires_at,
        )
    return services().jobs.principal_for_key(token)


def _content_type(event: dict[str, Any]) -> str:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    return str(headers.get("content-type") or "")


def _body_size(event: dict[str, Any]) -> int:
    body = event.get("body") or ""
    if event.get("isBase64Encoded") and isinstance(body, str):
        return len(body) * 3 // 4 - body[-2:].count("=")
    return len(body.encode() if isinstance(body, str) else body)


def _text_body(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its body as text: a base64-encoded body (binary passthrough, or the local front door's for
    a body that is not text) is decoded here, and one that is not UTF-8 is a 400 naming the body."""
    body = event.get("body")
    if not event.get("isBase64Encoded") or not isinstance(body, str) or not body:
        return event
    return {**event, "body": jsonbody.text_of(body, base64_encoded=True), "isBase64Encoded": False}


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Every response carries the request's correlation id (`X-Request-Id`), which a submission stores on its job.
    An event that is no request is a schedule's or trigger's fire (`handlers.triggers`): it submits as the tenant."""
    if "httpMethod" not in event and ("longhaul_trigger" in event or event.get("source") == "aws.s3"):
        from handlers import triggers

        return triggers.fire(event, context)
    request_id = correlation.from_headers(event.get("headers"))
    logger.append_keys(correlation_id=request_id, route=f"{event.get('httpMethod')} {event.get('resource')}")
    with correlation.bound(request_id):
        response = _guarded(event, context)
    headers = response.setdefault("headers", None) or {}
    response["headers"] = {**headers, correlation.REQUEST_ID_HEADER: request_id}
    multi = response.get("multiValueHeaders")
    if isinstance(multi, dict):
        multi[correlation.REQUEST_ID_HEADER] = [request_id]
    return response


def _guarded(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Size limit, then authentication (before any validation feedback), the role, the media type, the routes; an
    error nobody foresaw, before routing or in it, is a 500 problem with the `error_id` of its log line."""
    try:
        return _handle(event, context)
    except ApiProblem as problem:
        return _raw_problem(problem, event)
    except Exception:
        return _raw_problem(_internal_problem(), event)


def _handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    public = str(event.get("path", "")).rstrip("/") in PUBLIC_PATHS or is_console_path(str(event.get("path", "")))
    if public and event.get("httpMethod") == "GET":
        return app.resolve(event, context)
    limit = services().settings.max_body_bytes
    if _body_size(event) > limit:
        return _raw_problem(PayloadTooLarge(limits.body_too_large(limit)), event)
    principal = _authenticate(event)
    if principal is None:
        return _raw_problem(Unauthorized(), event)
    path = str(event.get("path", ""))
    if path.startswith("/v1/ops/") and principal.role != "operator":
        return _raw_problem(Forbidden("operator routes need a key with the operator role"), event)
    reviewer_route = path == "/v1/reviews" or path.startswith("/v1/reviews/")
    if reviewer_route and not principal.is_reviewer:
        return _raw_problem(Forbidden("review routes need a key with the reviewer role"), event)
    if principal.is_reviewer and not reviewer_route and path not in EVERY_ROLE_PATHS:
        return _raw_problem(Forbidden("a reviewer key reaches only the review routes (/v1/reviews)"), event)
    # A body that is not JSON is refused before anything reads it (a missing Content-Type is read as JSON).
    content_type = _content_type(event)
    media_type = content_type.split(";")[0].strip().lower()
    if event.get("httpMethod") == "PATCH" and media_type == MERGE_PATCH:  # a JSON merge patch is JSON: read as such
        headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
        event = {**event, "headers": {**headers, "content-type": "application/json"}}
        event.pop("multiValueHeaders", None)
        media_type = "application/json"
    if event.get("httpMethod") in JSON_METHODS and event.get("body") and media_type not in ("", "application/json"):
        return _raw_problem(_not_json(content_type), event)
    logger.append_keys(tenant_id=principal.tenant_id)
    # (the function's own ARN: what the schedules and rules a request creates invoke when they fire)
    app.append_context(principal=principal, function_arn=getattr(context, "invoked_function_arn", ""))
    return app.resolve(_text_body(event), context)


init_complete()
