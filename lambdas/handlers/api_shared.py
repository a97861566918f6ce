"""What the API function's route modules share: the job service, the caller, the responses routes declare, event pages.

Every operation documents every answer it can give: its success (merged in by the resolver when a route declares
only problems), each problem as `application/problem+json` with the RFC 9457 schema (`Problem`), and the 500
problem every operation may answer (declared once, on the resolver).
"""

from __future__ import annotations

import json
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader

from longhaul.api.jobs import JobService
from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.contracts import TERMINAL_STATUSES, Problem
from longhaul.services import services

PROBLEM_JSON = "application/problem+json"
SSE = "text/event-stream"
SSE_RETRY_MS = 2000
EventsLimit = Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)]
Cursor = Annotated[str | None, Query(description="`next_cursor` of the previous page (400 for any other value).")]
Responses = dict[int, OpenAPIResponse]

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


INVALID_PARAMETERS = problems(422, "A parameter outside its schema; `errors` name it")
BAD_CURSOR = problems(400, "Not a cursor of this listing")


def job_service() -> JobService:
    return JobService(services())


def principal(router: BaseRouter) -> Principal:
    """The caller, authenticated by the handler before routing."""
    found = router.context.get("principal")
    assert isinstance(found, Principal)
    return found


def events_response(
    router: BaseRouter, job_id: str, cursor: str | None, limit: int, *, any_tenant: bool
) -> Response[str]:
    """A page of the job's events as JSON, or as Server-Sent Events with `Accept: text/event-stream`."""
    service, caller, event = job_service(), principal(router), router.current_event
    if SSE not in (event.get_header_value("Accept") or ""):
        page = service.events(caller, job_id, cursor, limit, any_tenant=any_tenant)
        return Response(status_code=200, content_type="application/json", body=page.model_dump_json())
    # Server-Sent Events: what is new since Last-Event-ID, then the client reconnects (EventSource does).
    after = event.get_header_value("Last-Event-ID") or cursor
    # the status before the events: no missed last event
    job = service.view(caller, job_id, any_tenant=any_tenant)
    page = service.events(caller, job_id, after, limit, any_tenant=any_tenant)
    frames = [f"id: {e.seq}\nevent: {e.type}\ndata: {e.model_dump_json()}\n\n" for e in page.events]
    if job.status in TERMINAL_STATUSES and page.next_cursor is None:
        frames.append(f"event: end\ndata: {json.dumps({'status': job.status.value})}\n\n")
    body = f"retry: {SSE_RETRY_MS}\n\n" + "".join(frames)
    return Response(status_code=200, content_type=SSE, body=body, headers={"Cache-Control": "no-cache"})
