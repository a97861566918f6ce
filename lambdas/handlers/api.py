"""The API function: Powertools REST resolver, validated by the pydantic contracts, RFC 9457 errors."""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from longhaul import operations
from longhaul.auth import Principal, bearer_token
from longhaul.contracts import (
    TERMINAL_STATUSES,
    WORKFLOWS,
    CancelOutcome,
    DeadLetter,
    DeadLetterList,
    EventPage,
    JobAccepted,
    JobList,
    JobRequest,
    JobResult,
    JobStatus,
    JobView,
    Problem,
    ReplayOutcome,
    ReplayRequest,
    UploadRequest,
    UploadTicket,
)
from longhaul.jobs import JobService
from longhaul.observability import logger
from longhaul.problems import (
    ApiProblem,
    Forbidden,
    InternalProblem,
    InvalidRequest,
    MalformedJson,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
)
from longhaul.wiring import services

PROBLEM_JSON = "application/problem+json"
SSE = "text/event-stream"
MARKDOWN = "text/markdown"
SSE_RETRY_MS = 2000
app = APIGatewayRestResolver(enable_validation=True)


def _problem_response(problem: ApiProblem) -> Response[str]:
    headers = {"WWW-Authenticate": 'Bearer realm="longhaul"'} if problem.status == 401 else None
    return Response(
        status_code=problem.status,
        content_type=PROBLEM_JSON,
        body=json.dumps(problem.body(instance=app.current_event.path)),
        headers=headers,
    )


def _problems(status: int, description: str) -> dict[int, dict[str, Any]]:
    return {status: {"description": description, "content": {PROBLEM_JSON: {"model": Problem}}}}


COMMON_PROBLEMS = {
    **_problems(401, "Missing or unknown API key"),
    **_problems(404, "No such job for this tenant"),
}


def _service() -> JobService:
    s = services()
    return JobService(store=s.store, artifacts=s.artifacts, stepfunctions=s.stepfunctions, settings=s.settings)


def _principal() -> Principal:
    principal = app.context.get("principal")
    assert isinstance(principal, Principal)
    return principal


def _base_url() -> str:
    event = app.current_event
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    proto = headers.get("x-forwarded-proto", "https")
    host = headers.get("host", "localhost")
    full_path = event.request_context.path or event.path
    prefix = full_path[: -len(event.path)] if full_path.endswith(event.path) else ""
    return f"{proto}://{host}{prefix}"


# ---------------------------------------------------------------------- middleware and errors


@app.exception_handler(ApiProblem)
def _api_problem(problem: ApiProblem) -> Response[str]:
    return _problem_response(problem)


@app.exception_handler(Exception)
def _unexpected(error: Exception) -> Response[str]:
    """Anything unforeseen is a 500 problem (logged with its trace), never a bare gateway error."""
    logger.exception("unhandled error in the API")
    return _problem_response(InternalProblem("an unexpected error occurred; it has been logged"))


@app.exception_handler(RequestValidationError)
def _validation_problem(error: RequestValidationError) -> Response[str]:
    errors = error.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return _problem_response(MalformedJson("the body could not be parsed as JSON"))
    details = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors]
    extra: dict[str, Any] = {}
    if any(tuple(e["loc"][:2]) == ("body", "workflow") for e in details):
        extra["allowed_workflows"] = list(WORKFLOWS)
    return _problem_response(InvalidRequest("see `errors` for what is not allowed", errors=details, **extra))


@app.not_found
def _not_found(_: Exception) -> Response[str]:
    return _problem_response(NotFound(f"no route {app.current_event.http_method} {app.current_event.path}"))


# ---------------------------------------------------------------------- routes


@app.post(
    "/v1/jobs",
    summary="Submit a job",
    responses={
        202: {"description": "Accepted", "content": {"application/json": {"model": JobAccepted}}},
        **_problems(400, "Malformed JSON or Idempotency-Key"),
        **_problems(413, "Body too large"),
        **_problems(422, "Invalid input, unknown workflow, or Idempotency-Key reused with another payload"),
    },
)
def submit_job(
    request: Annotated[JobRequest, Body()],
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response[str]:
    accepted, _ = _service().submit(_principal(), request, idempotency_key, _base_url())
    return Response(
        status_code=202,
        content_type="application/json",
        body=accepted.model_dump_json(),
        headers={"Location": accepted.status_url},
    )


@app.get("/v1/jobs/<job_id>", summary="Job status and progress", responses=COMMON_PROBLEMS)
def get_job(job_id: Annotated[str, Path()]) -> JobView:
    return _service().view(_principal(), job_id, services().store.clock.now())


@app.get(
    "/v1/jobs/<job_id>/events",
    summary="The job's append-only event log (JSON pages, or Server-Sent Events with Accept: text/event-stream)",
    responses={
        200: {
            "description": "A page of events",
            "content": {"application/json": {"model": EventPage}, SSE: {"schema": {"type": "string"}}},
        },
        **COMMON_PROBLEMS,
    },
)
def get_events(
    job_id: Annotated[str, Path()],
    cursor: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 100,
) -> Response[str]:
    service, principal = _service(), _principal()
    if SSE not in (app.current_event.get_header_value("Accept") or ""):
        page = service.events(principal, job_id, cursor, limit)
        return Response(status_code=200, content_type="application/json", body=page.model_dump_json())
    # Server-Sent Events: what is new since Last-Event-ID, then the client reconnects (EventSource does).
    after = app.current_event.get_header_value("Last-Event-ID") or cursor
    job = service.view(principal, job_id, services().store.clock.now())  # before the events: no missed last event
    page = service.events(principal, job_id, after, limit)
    frames = [f"id: {e.seq}\nevent: {e.type}\ndata: {e.model_dump_json()}\n\n" for e in page.events]
    if job.status in TERMINAL_STATUSES and page.next_cursor is None:
        frames.append(f"event: end\ndata: {json.dumps({'status': job.status.value})}\n\n")
    body = f"retry: {SSE_RETRY_MS}\n\n" + "".join(frames)
    return Response(status_code=200, content_type=SSE, body=body, headers={"Cache-Control": "no-cache"})


@app.get(
    "/v1/jobs/<job_id>/result",
    summary="The job's result (JSON, or its Markdown rendering with Accept: text/markdown)",
    responses={
        200: {
            "description": "The result",
            "content": {"application/json": {"model": JobResult}, MARKDOWN: {"schema": {"type": "string"}}},
        },
        **COMMON_PROBLEMS,
        **_problems(409, "Not completed yet"),
    },
)
def get_result(job_id: Annotated[str, Path()]) -> Response[str]:
    result = _service().result(_principal(), job_id)
    if MARKDOWN in (app.current_event.get_header_value("Accept") or "") and result.markdown_key:
        markdown = services().artifacts.get_bytes(result.markdown_key).decode()
        return Response(status_code=200, content_type=f"{MARKDOWN}; charset=utf-8", body=markdown)
    return Response(status_code=200, content_type="application/json", body=result.model_dump_json())


@app.post("/v1/uploads", summary="Get a presigned URL to upload a document", responses=_problems(422, "Invalid"))
def create_upload(request: Annotated[UploadRequest, Body()]) -> Response[str]:
    ticket: UploadTicket = _service().create_upload(_principal(), request)
    return Response(status_code=201, content_type="application/json", body=ticket.model_dump_json())


@app.get("/v1/jobs", summary="The tenant's jobs, newest first", responses=_problems(401, "Missing or unknown API key"))
def list_jobs(
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JobList:
    return _service().list(_principal(), status, limit, services().store.clock.now())


@app.post(
    "/v1/jobs/<job_id>/cancel",
    summary="Cancel a job: stop its execution, keep its completed steps",
    responses={
        202: {
            "description": "Cancelled (or already cancelled)",
            "content": {"application/json": {"model": CancelOutcome}},
        },
        **COMMON_PROBLEMS,
        **_problems(409, "The job already finished"),
    },
)
def cancel_job(job_id: Annotated[str, Path()]) -> Response[str]:
    outcome = _service().cancel(_principal(), job_id)
    return Response(status_code=202, content_type="application/json", body=outcome.model_dump_json())


# ---------------------------------------------------------------------- operator routes


def _operator() -> Principal:
    principal = _principal()
    if principal.role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return principal


OPS_PROBLEMS = {**_problems(401, "Missing or unknown API key"), **_problems(403, "Not an operator key")}


@app.get("/v1/ops/dead-letters", summary="Dead letters, newest first", responses=OPS_PROBLEMS)
def list_dead_letters(
    step: Annotated[str | None, Query()] = None,
    workflow: Annotated[str | None, Query()] = None,
    tenant: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DeadLetterList:
    _operator()
    found = operations.list_dead_letters(services(), step=step, workflow=workflow, tenant=tenant, limit=limit)
    return DeadLetterList(dead_letters=[DeadLetter.model_validate(d) for d in found])


@app.get("/v1/ops/jobs", summary="Jobs of a tenant and/or in a status", responses=OPS_PROBLEMS)
def ops_list_jobs(
    tenant: Annotated[str | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> JobList:
    _operator()
    return operations.list_jobs(services(), tenant=tenant, status=status, limit=limit)


@app.post(
    "/v1/ops/jobs/<job_id>/replay",
    summary="Replay a failed job from a step, reusing the checkpoints before it",
    responses={
        202: {"description": "Replay started", "content": {"application/json": {"model": ReplayOutcome}}},
        **OPS_PROBLEMS,
        **_problems(404, "No such job"),
        **_problems(409, "The job is not failed, cancelled or expired (or redrive is unavailable)"),
        **_problems(422, "Unknown step"),
    },
)
def replay_job(job_id: Annotated[str, Path()], request: Annotated[ReplayRequest, Body()]) -> Response[str]:
    principal = _operator()
    outcome = operations.replay(
        services(), principal, job_id, from_step=request.from_step, reason=request.reason, mode=request.mode
    )
    body = ReplayOutcome.model_validate(outcome)
    return Response(status_code=202, content_type="application/json", body=body.model_dump_json())


def openapi_json() -> str:
    # Powertools' OpenAPI models take a third of this module's import time: loaded only for the spec route.
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Server

    return app.get_openapi_json_schema(
        title="Longhaul API",
        version="1.0.0",
        description="Durable, observable, budget-aware execution of long-running LLM jobs.",
        servers=[Server(url="http://127.0.0.1:8000", description="local runtime")],
        security_schemes={"bearer": HTTPBearer(scheme="bearer", description="Tenant API key")},
        security=[{"bearer": []}],
    )


def _raw_problem(problem: ApiProblem, event: dict[str, Any]) -> dict[str, Any]:
    """A problem answered before routing (the resolver's response helpers need a current event)."""
    headers = {"Content-Type": PROBLEM_JSON}
    if problem.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="longhaul"'
    return {
        "statusCode": problem.status,
        "headers": headers,
        "body": json.dumps(problem.body(instance=event.get("path"))),
        "isBase64Encoded": False,
    }


def _authenticate(event: dict[str, Any]) -> Principal | None:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    token = bearer_token(headers.get("authorization"))
    return services().store.principal_for_key(token) if token else None


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Size limit, then authentication (before any validation feedback), then the routes."""
    limit = services().settings.max_body_bytes
    body = event.get("body") or ""
    if len(body.encode() if isinstance(body, str) else body) > limit:
        return _raw_problem(PayloadTooLarge(f"the limit is {limit} bytes; upload large documents instead"), event)
    principal = _authenticate(event)
    if principal is None:
        return _raw_problem(Unauthorized(), event)
    if str(event.get("path", "")).startswith("/v1/ops/") and principal.role != "operator":
        return _raw_problem(Forbidden("operator routes need a key with the operator role"), event)
    logger.append_keys(tenant_id=principal.tenant_id)
    app.append_context(principal=principal)
    return app.resolve(event, context)
