"""The operator routes of the API function (`/v1/ops/...`): any tenant's jobs, dead letters, replay, dead webhooks.

The handler has already refused non-operator keys; each route checks the role again, so a route never depends
on where it is mounted.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from handlers.api_shared import EventsLimit, events_response, job_service, principal, problems
from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy, TenantPolicyPatch
from longhaul.core.contracts import (
    CancelOutcome,
    DeadLetterList,
    EventPage,
    JobList,
    JobStatus,
    JobView,
    ReplayOutcome,
    ReplayRequest,
    TenantPolicyView,
)
from longhaul.core.problems import ApiProblem, Forbidden, NotFound
from longhaul.operations import listings, policies, replay
from longhaul.services import services
from longhaul.webhooks import dispatcher
from longhaul.webhooks.views import WebhookList, WebhookView

router = Router()


class WebhookNotDead(ApiProblem):
    status, slug, title = 409, "webhook-not-dead", "Only a dead webhook is redelivered"


def _operator() -> Principal:
    caller = principal(router)
    if caller.role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return caller


OPS_PROBLEMS = {**problems(401, "Missing or unknown API key"), **problems(403, "Not an operator key")}


@router.get("/v1/ops/dead-letters", summary="Dead letters, newest first", responses=OPS_PROBLEMS)
def list_dead_letters(
    step: Annotated[str | None, Query()] = None,
    workflow: Annotated[str | None, Query()] = None,
    tenant: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DeadLetterList:
    _operator()
    found = listings.list_dead_letters(services(), step=step, workflow=workflow, tenant=tenant, limit=limit)
    return DeadLetterList(dead_letters=found)


@router.get(
    "/v1/ops/jobs",
    summary="Every tenant's jobs, newest first, paged; filter by tenant and/or status",
    responses={**OPS_PROBLEMS, **problems(400, "Not a cursor of this listing")},
)
def ops_list_jobs(
    tenant: Annotated[str | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_OPS_PAGE_SIZE)] = 100,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page")] = None,
) -> JobList:
    _operator()
    return listings.list_jobs(services(), tenant=tenant, status=status, limit=limit, cursor=cursor)


OPS_JOB_PROBLEMS = {**OPS_PROBLEMS, **problems(404, "No such job")}


@router.get("/v1/ops/jobs/<job_id>", summary="Any tenant's job: status and progress", responses=OPS_JOB_PROBLEMS)
def ops_get_job(job_id: Annotated[str, Path()]) -> JobView:
    return job_service().view(_operator(), job_id, any_tenant=True)


@router.get(
    "/v1/ops/jobs/<job_id>/events",
    summary="Any tenant's job's event log (JSON pages, or Server-Sent Events)",
    responses={
        200: {"description": "A page of events", "content": {"application/json": {"model": EventPage}}},
        **OPS_JOB_PROBLEMS,
    },
)
def ops_get_events(
    job_id: Annotated[str, Path()], cursor: Annotated[str | None, Query()] = None, limit: EventsLimit = 100
) -> Response[str]:
    _operator()
    return events_response(router, job_id, cursor, limit, any_tenant=True)


@router.post(
    "/v1/ops/jobs/<job_id>/cancel",
    summary="Cancel any tenant's job",
    responses={
        202: {"description": "Cancelled", "content": {"application/json": {"model": CancelOutcome}}},
        **OPS_JOB_PROBLEMS,
        **problems(409, "The job already finished"),
    },
)
def ops_cancel_job(job_id: Annotated[str, Path()]) -> Response[str]:
    outcome = job_service().cancel(_operator(), job_id, any_tenant=True)
    return Response(status_code=202, content_type="application/json", body=outcome.model_dump_json())


@router.post(
    "/v1/ops/jobs/<job_id>/replay",
    summary="Replay a failed job from a step, reusing the checkpoints before it",
    responses={
        202: {"description": "Replay started", "content": {"application/json": {"model": ReplayOutcome}}},
        **OPS_PROBLEMS,
        **problems(404, "No such job"),
        **problems(409, "The job is not failed, cancelled or expired (or redrive is unavailable)"),
        **problems(415, f"Body not {limits.ACCEPTED_MEDIA_TYPE}"),
        **problems(422, "Unknown step"),
    },
)
def replay_job(job_id: Annotated[str, Path()], request: Annotated[ReplayRequest, Body()]) -> Response[str]:
    caller = _operator()
    outcome = replay.replay(
        services(),
        caller,
        job_id,
        from_step=request.from_step,
        reason=request.reason,
        mode=request.mode,
        budget=request.budget,
    )
    return Response(status_code=202, content_type="application/json", body=outcome.model_dump_json())


@router.get(
    "/v1/ops/tenants/<tenant_id>/policy",
    summary="A tenant's budget policy (ceilings per job, daily allowance, routes) and today's spending",
    responses={**OPS_PROBLEMS, **problems(422, "Not a tenant id")},
)
def get_tenant_policy(tenant_id: Annotated[str, Path()]) -> TenantPolicyView:
    _operator()
    return policies.tenant_policy(services(), tenant_id)


@router.put(
    "/v1/ops/tenants/<tenant_id>/policy",
    summary="Replace a tenant's policy: every field the body omits takes its default (listed in `reset`, with the "
    "policy before in `previous`); PATCH changes only the fields it names",
    responses={
        **OPS_PROBLEMS,
        **problems(415, f"Body not {limits.ACCEPTED_MEDIA_TYPE}"),
        **problems(422, "Invalid policy"),
    },
)
def put_tenant_policy(tenant_id: Annotated[str, Path()], policy: Annotated[TenantPolicy, Body()]) -> TenantPolicyView:
    _operator()
    return policies.set_tenant_policy(services(), tenant_id, policy)


@router.patch(
    "/v1/ops/tenants/<tenant_id>/policy",
    summary="Change some fields of a tenant's policy: the fields given replace the stored ones, a field given as "
    "null takes its default, the others are kept",
    responses={
        **OPS_PROBLEMS,
        **problems(415, f"Body not {limits.ACCEPTED_MEDIA_TYPE}"),
        **problems(422, "Invalid policy"),
        **problems(503, "The policy kept changing meanwhile; patch again"),
    },
)
def patch_tenant_policy(
    tenant_id: Annotated[str, Path()], change: Annotated[TenantPolicyPatch, Body()]
) -> TenantPolicyView:
    _operator()
    return policies.patch_tenant_policy(services(), tenant_id, change)


@router.get(
    "/v1/ops/webhooks/dead-letters",
    summary="Webhooks whose delivery gave up, newest first (their dead-letter queue holds the same)",
    responses=OPS_PROBLEMS,
)
def list_dead_webhooks(limit: Annotated[int, Query(ge=1, le=500)] = 100) -> WebhookList:
    _operator()
    return WebhookList(webhooks=[WebhookView.of(r) for r in dispatcher.dead_webhooks(services(), limit=limit)])


@router.post(
    "/v1/ops/webhooks/<webhook_id>/redeliver",
    summary="Deliver a dead webhook again: the same webhook-id and body, a new series of retries",
    responses={
        202: {"description": "Redelivery started", "content": {"application/json": {"model": WebhookView}}},
        **OPS_PROBLEMS,
        **problems(404, "No such webhook"),
        **problems(409, "The webhook is not dead"),
    },
)
def redeliver_webhook(webhook_id: Annotated[str, Path()]) -> Response[str]:
    _operator()
    s = services()
    record = s.outbox.get(webhook_id) if webhook_id.startswith("msg_") else None
    if record is None:
        raise NotFound(f"no webhook {webhook_id!r}")
    if record.status != "dead":
        raise WebhookNotDead(f"webhook {webhook_id} is {record.status}; only dead webhooks are redelivered")
    fresh = dispatcher.redeliver(s, webhook_id) or record
    return Response(status_code=202, content_type="application/json", body=WebhookView.of(fresh).model_dump_json())
