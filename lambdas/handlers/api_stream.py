"""A job's live output over HTTP: `GET /v1/jobs/{job_id}/stream` (tenant) and `GET /v1/ops/jobs/{job_id}/stream`
(operator), as Server-Sent Events or as a JSON long-poll.

SSE (the default, and whenever `Accept` names `text/event-stream`): `event: output_delta` (data `step`, `item`,
`call_id`, `index`, `text`), `event: call_finished` (data `step`, `item`, `call_id`, `output_tokens`) and, once the
job is terminal and every record was sent, `event: end`; every event has an `id`. One response is one window: the
records after `Last-Event-ID` (header, or the `last_event_id` / `after` query parameter), answered as soon as there
are some (waiting up to `wait` seconds, 20 by default). The integration streams (API Gateway's
`responseTransferMode: STREAM`; locally the front door holds the connection and asks again after each window, so a
client reads one HTTP stream); a client that reconnects with the last id it has misses nothing and repeats nothing.

JSON (`Accept: application/json`, or a `wait`/`after` query without `text/event-stream` or `Last-Event-ID`): a
`StreamPage`, for clients that cannot hold a stream.
"""

from __future__ import annotations

import json
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter, Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from handlers.api_shared import (
    INVALID_PARAMETERS,
    JOBS,
    OPERATORS,
    SSE,
    SSE_EVENT_SCHEMA,
    Responses,
    erased,
    keyed,
    principal,
    problems,
)
from longhaul.api.streams import StreamService, parse_after
from longhaul.core import limits
from longhaul.core.problems import Forbidden
from longhaul.core.streams import END_EVENT, StreamPage, sse_frame
from longhaul.services import services

router = Router()

#: How long an SSE window waits for a record when the request names no `wait` (seconds).
SSE_WAIT_SECONDS = 20
#: What the SSE answer tells EventSource to wait before it reconnects (milliseconds).
STREAM_RETRY_MS = 500
# Time the function keeps for itself after a window's wait: the reads around it and the answer.
ANSWER_MARGIN_SECONDS = 3.0

StreamWait = Annotated[
    int | None,
    Query(
        ge=0,
        le=limits.MAX_EVENTS_WAIT_SECONDS,
        description=f"Wait up to this many seconds (0-{limits.MAX_EVENTS_WAIT_SECONDS}) for a record after the last "
        f"id and answer as soon as there is one (SSE: {SSE_WAIT_SECONDS} s unless given; JSON: 0). A finished job "
        "is answered at once.",
    ),
]
After = Annotated[
    int | None,
    Query(ge=0, le=9_999_999_999, description="The `id` of the last record you have (JSON form; 0 or none: all)."),
]
LastEventId = Annotated[
    int | None,
    Query(
        ge=0,
        le=9_999_999_999,
        description="The `id` of the last event you have, for clients that cannot set the `Last-Event-ID` header.",
    ),
]
_SUCCESS: Responses = {
    200: {
        "description": "The job's stream records after the last id: Server-Sent Events (`output_delta`, "
        "`call_finished`, `end`), or a JSON page",
        "content": {SSE: {"schema": SSE_EVENT_SCHEMA}, "application/json": {"model": StreamPage}},
        "headers": {
            "Cache-Control": {"description": "`no-cache`", "schema": {"type": "string"}},
        },
    },
    **problems(400, "`Last-Event-ID` is not an id of this stream"),
    **INVALID_PARAMETERS,
}


def _wait_budget(router: BaseRouter, wait: float) -> float:
    remaining_ms = getattr(router.lambda_context, "get_remaining_time_in_millis", None)
    if remaining_ms is None:
        return wait
    return max(0.0, min(wait, float(remaining_ms()) / 1000 - ANSWER_MARGIN_SECONDS))


def stream_response(
    router: BaseRouter, job_id: str, wait: int | None, after: int | None, last_event_id: int | None, *, any_tenant: bool
) -> Response[str]:
    event = router.current_event
    accept = (event.get_header_value("Accept") or "").lower()
    header_id = event.get_header_value("Last-Event-ID")
    as_sse = SSE in accept or bool(header_id) or ("application/json" not in accept and wait is None and after is None)
    position = parse_after(header_id) if header_id else (last_event_id if last_event_id is not None else after) or 0
    default_wait = SSE_WAIT_SECONDS if as_sse else 0
    wait_seconds = _wait_budget(router, float(default_wait if wait is None else wait))
    service = StreamService(services())
    page = service.page(principal(router), job_id, position, wait_seconds=wait_seconds, any_tenant=any_tenant)
    if not as_sse:
        return Response(status_code=200, content_type="application/json", body=page.model_dump_json())
    frames = [sse_frame(r.event, r.data.model_dump_json(), r.id) for r in page.records]
    if page.ended:
        frames.append(sse_frame(END_EVENT, json.dumps({"status": page.status}), page.last_event_id))
    body = f"retry: {STREAM_RETRY_MS}\n\n" + "".join(frames)
    # SSE is UTF-8 by definition; saying so keeps clients that default text/* to Latin-1 (requests) right
    headers = {"Cache-Control": "no-cache"}
    return Response(status_code=200, content_type=f"{SSE}; charset=utf-8", body=body, headers=headers)


@router.get(
    "/v1/jobs/<job_id>/stream",
    summary="Follow a job's output as it is written",
    description="The model's text as it is written (coalesced deltas of each call), as Server-Sent Events "
    "(`output_delta`, `call_finished`, then `end` when the job is terminal), resumed after `Last-Event-ID`; or a JSON "
    "long-poll (`wait`, `after`). Short-lived: records expire after hours; a delta is never a result.",
    operation_id="get_stream",
    tags=[JOBS],
    responses={
        **_SUCCESS,
        **keyed("A reviewer key (it reaches only the review routes)"),
        **problems(404, "No such job for this tenant"),
        **erased(),
    },
)
def get_stream(
    job_id: Annotated[str, Path()],
    wait: StreamWait = None,
    after: After = None,
    last_event_id: LastEventId = None,
) -> Response[str]:
    return stream_response(router, job_id, wait, after, last_event_id, any_tenant=False)


@router.get(
    "/v1/ops/jobs/<job_id>/stream",
    summary="Follow any tenant's job's output as it is written",
    description="As `GET /v1/jobs/{job_id}/stream`, for any tenant's job.",
    operation_id="ops_get_stream",
    tags=[OPERATORS],
    responses={**_SUCCESS, **keyed("Not an operator key"), **problems(404, "No such job"), **erased()},
)
def ops_get_stream(
    job_id: Annotated[str, Path()],
    wait: StreamWait = None,
    after: After = None,
    last_event_id: LastEventId = None,
) -> Response[str]:
    if principal(router).role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return stream_response(router, job_id, wait, after, last_event_id, any_tenant=True)
