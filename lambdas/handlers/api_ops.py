"""The operator routes of the API function (`/v1/ops/...`): any tenant's jobs, dead letters, replay, dead webhooks,
tenants' policies and memory.

The handler has already refused non-operator keys; each route checks the role again, so a route never depends
on where it is mounted.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query

from handlers.api_shared import (
    ADMIN,
    BAD_CURSOR,
    INVALID_PARAMETERS,
    OPERATORS,
    SSE,
    SSE_EVENT_SCHEMA,
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
    principal,
    problems,
    with_json_body,
)
from longhaul.api.graph import WorkflowGraph
from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy, TenantPolicyPatch
from longhaul.core.bus import BusEventList, bus_event
from longhaul.core.contracts import (
    IDEMPOTENCY_KEY_PATTERN,
    BulkOutcome,
    BulkReplayRequest,
    BulkTerminateRequest,
    CancelOutcome,
    DeadLetterList,
    Escalation,
    EscalationCleared,
    EscalationRequest,
    EventPage,
    InputFixOutcome,
    InputFixRequest,
    JobInputView,
    JobList,
    JobStatus,
    JobView,
    KeptPrompt,
    KeptResponse,
    MemoryDeleted,
    MemoryList,
    MetricsReport,
    ModelCallList,
    ReplayOutcome,
    ReplayRequest,
    TenantPolicyView,
    TerminateOutcome,
    TerminateRequest,
)
from longhaul.core.erasure import StoreReport
from longhaul.core.problems import ApiProblem, Forbidden, NotFound, Unavailable
from longhaul.operations import calls, listings, memory, metrics, policies
from longhaul.review.contracts import ManualCompletionOutcome, ManualCompletionRequest
from longhaul.services import services
from longhaul.webhooks.views import WebhookList, WebhookView

router = Router()


class WebhookNotDead(ApiProblem):
    status, slug, title = 409, "webhook-not-dead", "Only a dead webhook is redelivered"


def _operator() -> Principal:
    caller = principal(router)
    if caller.role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return caller


NOT_OPERATOR = "Not an operator key"
OPS_PROBLEMS = keyed(NOT_OPERATOR)
# A tenant id in a path: what `longhaul.operations.policies` accepts (422 otherwise, as the schema says).
TenantId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,64}$", description="1-64 of A-Z a-z 0-9 . _ -")]
# A tenant exists once a key is made for it, its policy is set (PUT) or it has submitted a job.
NO_TENANT = problems(404, "No such tenant")


@router.get(
    "/v1/ops/dead-letters",
    summary="List dead letters",
    description="The failures that ended jobs (each names its step and item), newest first; filter by step, "
    "workflow or tenant.",
    operation_id="list_dead_letters",
    tags=[OPERATORS],
    responses={**OPS_PROBLEMS, **INVALID_PARAMETERS},
)
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
    summary="List every tenant's jobs",
    description="Every tenant's jobs, newest first, paged; filter by tenant, status, workflow, SLA class, creation "
    "time and escalation, and find one by a prefix of its id or words of its question (`q`). A filtered page may hold "
    "fewer than `limit` jobs and still have a `next_cursor`: follow it until it is null.",
    operation_id="ops_list_jobs",
    tags=[OPERATORS],
    responses={**OPS_PROBLEMS, **BAD_CURSOR, **INVALID_PARAMETERS},
)
def ops_list_jobs(
    tenant: Annotated[str | None, Query()] = None,
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_OPS_PAGE_SIZE)] = 100,
    cursor: Cursor = None,
    workflow: WorkflowFilter = None,
    sla_class: SlaClassFilter = None,
    created_since: CreatedSince = None,
    created_until: CreatedUntil = None,
    q: SearchFilter = None,
    escalated: EscalatedFilter = None,
) -> JobList:
    _operator()
    narrow = job_filter(
        workflow=workflow,
        sla_class=sla_class,
        created_since=created_since,
        created_until=created_until,
        q=q,
        escalated=escalated,
    )
    return listings.list_jobs(services(), tenant=tenant, status=status, limit=limit, cursor=cursor, narrow=narrow)


OPS_JOB_PROBLEMS = {**OPS_PROBLEMS, **problems(404, "No such job"), **erased()}


@router.get(
    "/v1/ops/jobs/<job_id>",
    summary="Get any tenant's job",
    description="Any tenant's job: its status and progress.",
    operation_id="ops_get_job",
    tags=[OPERATORS],
    responses=OPS_JOB_PROBLEMS,
)
def ops_get_job(job_id: Annotated[str, Path()]) -> JobView:
    return job_service().view(_operator(), job_id, any_tenant=True)


@router.get(
    "/v1/ops/jobs/<job_id>/graph",
    summary="Get any tenant's job's workflow as a graph",
    description="Any tenant's job's workflow as a graph, each state with the job's status.",
    operation_id="ops_get_graph",
    tags=[OPERATORS],
    responses={**OPS_JOB_PROBLEMS, **problems(503, "The workflow engine did not answer")},
)
def ops_get_graph(job_id: Annotated[str, Path()]) -> WorkflowGraph:
    return job_service().graph(_operator(), job_id, any_tenant=True)


@router.get(
    "/v1/ops/jobs/<job_id>/events",
    summary="Follow any tenant's job's events",
    description="Any tenant's job's event log (JSON pages, or Server-Sent Events); `wait` long-polls for the next "
    "event.",
    operation_id="ops_get_events",
    tags=[OPERATORS],
    responses={
        200: {
            "description": "A page of events",
            "content": {"application/json": {"model": EventPage}, SSE: {"schema": SSE_EVENT_SCHEMA}},
        },
        **OPS_JOB_PROBLEMS,
        **BAD_CURSOR,
        **INVALID_PARAMETERS,
    },
)
def ops_get_events(
    job_id: Annotated[str, Path()], cursor: Cursor = None, limit: EventsLimit = 100, wait: EventsWait = 0
) -> Response[str]:
    _operator()
    return events_response(router, job_id, cursor, limit, wait, any_tenant=True)


@router.get(
    "/v1/ops/jobs/<job_id>/calls",
    summary="List a job's model calls",
    description="Any tenant's job's model calls: route, model, prompt version and hash, tokens, cost, the code and "
    "workflow versions that made each, and links to the exact prompt and the raw response.",
    operation_id="ops_list_model_calls",
    tags=[OPERATORS],
    responses=OPS_JOB_PROBLEMS,
)
def ops_model_calls(job_id: Annotated[str, Path()]) -> ModelCallList:
    _operator()
    return calls.model_calls(services(), job_id, base_url=base_url(router))


@router.get(
    "/v1/ops/jobs/<job_id>/prompts/<prompt_hash>",
    summary="Get the exact prompt of a model call",
    description="Exactly what a model call of the job sent (kept under its hash until the job's artifacts expire).",
    operation_id="ops_get_kept_prompt",
    tags=[OPERATORS],
    responses={**OPS_PROBLEMS, **problems(404, "No such job, or no such kept prompt")},
)
def ops_kept_prompt(job_id: Annotated[str, Path()], prompt_hash: Annotated[str, Path()]) -> KeptPrompt:
    _operator()
    return calls.kept_prompt(services(), job_id, prompt_hash)


@router.get(
    "/v1/ops/jobs/<job_id>/responses/<response_hash>",
    summary="Get the raw response to a model call",
    description="Exactly what a model call of the job was answered (kept under its hash until the job's artifacts "
    "expire).",
    operation_id="ops_get_kept_response",
    tags=[OPERATORS],
    responses={**OPS_PROBLEMS, **problems(404, "No such job, or no such kept response")},
)
def ops_kept_response(job_id: Annotated[str, Path()], response_hash: Annotated[str, Path()]) -> KeptResponse:
    _operator()
    return calls.kept_response(services(), job_id, response_hash)


@router.post(
    "/v1/ops/jobs/<job_id>/cancel",
    summary="Cancel any tenant's job",
    description="Stop the job's execution; its completed steps are kept.",
    operation_id="ops_cancel_job",
    tags=[OPERATORS],
    responses={
        202: {"description": "Cancelled", "content": {"application/json": {"model": CancelOutcome}}},
        **OPS_JOB_PROBLEMS,
        **keyed(NOT_OPERATOR, takes_body=True),
        **problems(409, "The job already finished"),
        **problems(503, "The workflow engine did not stop the job now; retry"),
    },
)
def ops_cancel_job(job_id: Annotated[str, Path()]) -> Response[str]:
    outcome = job_service().cancel(_operator(), job_id, any_tenant=True)
    return Response(status_code=202, content_type="application/json", body=outcome.model_dump_json())


@router.post(
    "/v1/ops/jobs/<job_id>/replay",
    summary="Replay a failed job from a step",
    description="Run a failed, cancelled or expired job again from a step, reusing the checkpoints before it; with "
    "`dry_run`, only say what would run again.",
    operation_id="replay_job",
    tags=[OPERATORS],
    responses={
        200: {
            "description": "The plan of a dry run: nothing was changed or started",
            "content": {"application/json": {"model": ReplayOutcome}},
        },
        202: {"description": "Replay started", "content": {"application/json": {"model": ReplayOutcome}}},
        **keyed(NOT_OPERATOR, takes_body=True),
        **problems(404, "No such job"),
        **problems(
            409, "The job is not failed, cancelled or expired, its version was pruned, or redrive is unavailable"
        ),
        **with_json_body(
            "Invalid request, a step the job's workflow does not have (`allowed_steps`), or a redrive on "
            "another version"
        ),
        **problems(503, "The workflow engine did not start the replay now; replay again"),
    },
)
def replay_job(job_id: Annotated[str, Path()], request: Annotated[ReplayRequest, Body()]) -> Response[str]:
    caller = _operator()
    from longhaul.operations import replay  # an operator's action: not every cold start's import

    outcome = replay.replay(
        services(),
        caller,
        job_id,
        from_step=request.from_step,
        reason=request.reason,
        mode=request.mode,
        budget=request.budget,
        dry_run=request.dry_run,
        version=request.version,
    )
    status = 200 if outcome.dry_run else 202
    return Response(status_code=status, content_type="application/json", body=outcome.model_dump_json())


@router.post(
    "/v1/ops/jobs/<job_id>/manual-completion",
    summary="Hand a failed job to a person",
    description="Open a review of kind `complete` for a failed job: a reviewer of the job's tenant writes its "
    "result (`POST /v1/reviews/{review_id}/decision` with `complete` and `result`), which the workflow's result "
    "model and business rules check; the job then completes with `completed_by: person`. Asked again while it is "
    "pending: the same review (200).",
    operation_id="request_manual_completion",
    tags=[OPERATORS],
    responses={
        200: {
            "description": "Already handed to a person: the pending review",
            "content": {"application/json": {"model": ManualCompletionOutcome}},
        },
        201: {
            "description": "Handed to a person: the review is open",
            "content": {"application/json": {"model": ManualCompletionOutcome}},
        },
        **keyed(NOT_OPERATOR, takes_body=True),
        **problems(404, "No such job"),
        **problems(409, "The job is not failed, or its workflow cannot be completed by hand"),
        **with_json_body("Invalid request"),
    },
)
def request_manual_completion(
    job_id: Annotated[str, Path()], request: Annotated[ManualCompletionRequest, Body()]
) -> Response[str]:
    caller = _operator()
    from longhaul.operations import completion  # an operator's action: not every cold start's import

    outcome, created = completion.request(services(), caller, job_id, request)
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=outcome.model_dump_json(),
        headers={"Location": outcome.review_url},
    )


@router.get(
    "/v1/ops/jobs/<job_id>/input",
    summary="Get a job's input and its versions",
    description="The job's current input as a request gives it (its workflow's input model: what a fix patches) and "
    "every version of it: the submitted one, then each fix with who, why and what it changed.",
    operation_id="ops_get_job_input",
    tags=[OPERATORS],
    responses={**OPS_JOB_PROBLEMS, **problems(409, "The job's artifacts have expired")},
)
def ops_get_job_input(job_id: Annotated[str, Path()]) -> JobInputView:
    _operator()
    from longhaul.operations import repair  # an operator's action: not every cold start's import

    return repair.input_view(services(), job_id)


@router.patch(
    "/v1/ops/jobs/<job_id>/input",
    summary="Fix a failed job's input",
    description="Apply a JSON merge patch (RFC 7396) to the input of a failed, cancelled or dead-lettered job, with "
    'the reason: `{"patch": {…}, "reason": "…"}` (sent as `application/json` or '
    "`application/merge-patch+json`). The result is validated as a submission of the job's tenant (its workflow's "
    "input model, then its checks: document references must resolve for that tenant) and kept as a new version; the "
    "next replay reads it, reruns the steps that read a changed field and by default starts at the first of them.",
    operation_id="ops_fix_job_input",
    tags=[OPERATORS],
    responses={
        **keyed(NOT_OPERATOR, takes_body=True),
        **problems(404, "No such job"),
        **problems(409, "The job is not failed, cancelled or dead-lettered, or changed meanwhile"),
        **with_json_body("Invalid request, or the fixed input is not a valid input of the job's workflow (`errors`)"),
    },
)
def ops_fix_job_input(job_id: Annotated[str, Path()], request: Annotated[InputFixRequest, Body()]) -> InputFixOutcome:
    caller = _operator()
    from longhaul.operations import repair  # an operator's action: not every cold start's import

    return repair.fix_input(services(), caller, job_id, request)


@router.post(
    "/v1/ops/jobs/<job_id>/escalate",
    summary="Escalate a job to engineering",
    description="Flag the job for engineering: the job carries `escalation` (who, when, the note, a link), the alarm "
    "topic is told, and the tenant's callback gets `job.escalated` if its policy says `webhook_escalations`. Posting "
    "again updates the escalation.",
    operation_id="ops_escalate_job",
    tags=[OPERATORS],
    responses={
        **keyed(NOT_OPERATOR, takes_body=True),
        **problems(404, "No such job"),
        **problems(409, "The job kept changing meanwhile; try again"),
        **with_json_body("Invalid request"),
    },
)
def ops_escalate_job(job_id: Annotated[str, Path()], request: Annotated[EscalationRequest, Body()]) -> Escalation:
    caller = _operator()
    from longhaul.operations import repair  # an operator's action: not every cold start's import

    return repair.escalate(services(), caller, job_id, request)


@router.delete(
    "/v1/ops/jobs/<job_id>/escalate",
    summary="Clear a job's escalation",
    description="Clear the job's escalation (recorded with who on its log); a job without one is left as it is.",
    operation_id="ops_clear_escalation",
    tags=[OPERATORS],
    responses={
        **OPS_JOB_PROBLEMS,
        **problems(409, "The job kept changing meanwhile; try again"),
    },
)
def ops_clear_escalation(job_id: Annotated[str, Path()]) -> EscalationCleared:
    """Cleared (or there was none): the job carries no escalation."""
    caller = _operator()
    from longhaul.operations import repair  # an operator's action: not every cold start's import

    repair.clear_escalation(services(), caller, job_id)
    return EscalationCleared(job_id=job_id)


@router.post(
    "/v1/ops/jobs/<job_id>/terminate",
    summary="End a job with a message to its owner",
    description="Stop the job as a cancel does and end it `failed` (its `error.message` is `message`, kind "
    "`terminated`) or `cancelled` (its `cancellation.message` is `message`); `reason` goes into the `job_terminated` "
    "event with who ended it; the `job.failed` or `job.cancelled` webhook goes out as usual. A failed job terminated "
    "as failed takes the message. A job that completed, was cancelled or expired is a 409.",
    operation_id="terminate_job",
    tags=[OPERATORS],
    responses={
        **keyed(NOT_OPERATOR, takes_body=True),
        **problems(404, "No such job"),
        **problems(409, "The job already finished"),
        **with_json_body("Invalid request: a status other than failed or cancelled, a message over 1,000 characters"),
        **problems(503, "The workflow engine did not stop the job now; terminate again"),
    },
)
def terminate_job(job_id: Annotated[str, Path()], request: Annotated[TerminateRequest, Body()]) -> TerminateOutcome:
    caller = _operator()
    from longhaul.api.terminate import terminate  # an operator's action: not every cold start's import

    return terminate(
        job_service(), caller, job_id, status=request.status, reason=request.reason, message=request.message
    )


BULK_KEY = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Executing (`dry_run: false`): the same key with the same request answers the same and acts on "
        "no job twice (24 h, per operator); with another request it is a 422.",
    ),
]
BULK_RESPONSES: dict[int, Any] = {
    **keyed(NOT_OPERATOR, takes_body=True),
    **with_json_body("Invalid filter, or an Idempotency-Key used for another bulk action"),
}


@router.post(
    "/v1/ops/jobs:replay",
    summary="Replay every job a filter matches",
    description="A dry run (the default) lists the matching jobs (failed, cancelled or expired unless `status` says "
    "otherwise) and each one's replay plan; `dry_run: false` replays each through admission and answers what was "
    "done per job. Jobs an operator terminated are left out unless the filter asks for `error_kind: terminated`.",
    operation_id="bulk_replay_jobs",
    tags=[OPERATORS],
    responses={
        200: {
            "description": "What was done (or, in a dry run, would be done) per job",
            "content": {"application/json": {"model": BulkOutcome}},
        },
        **BULK_RESPONSES,
    },
)
def bulk_replay_jobs(request: Annotated[BulkReplayRequest, Body()], idempotency_key: BULK_KEY = None) -> BulkOutcome:
    caller = _operator()
    from longhaul.api import bulk  # an operator's action: not every cold start's import

    return bulk.bulk_replay(job_service(), caller, request, idempotency_key)


@router.post(
    "/v1/ops/jobs:terminate",
    summary="Terminate every job a filter matches",
    description="A dry run (the default) lists the matching jobs (every job not finished, and failed ones, unless "
    "`filter.status` says otherwise) and how each would end; `dry_run: false` ends each as `POST "
    "/v1/ops/jobs/{job_id}/terminate` does and answers what was done per job.",
    operation_id="bulk_terminate_jobs",
    tags=[OPERATORS],
    responses={
        200: {
            "description": "What was done (or, in a dry run, would be done) per job",
            "content": {"application/json": {"model": BulkOutcome}},
        },
        **BULK_RESPONSES,
    },
)
def bulk_terminate_jobs(
    request: Annotated[BulkTerminateRequest, Body()], idempotency_key: BULK_KEY = None
) -> BulkOutcome:
    caller = _operator()
    from longhaul.api import bulk  # an operator's action: not every cold start's import

    return bulk.bulk_terminate(job_service(), caller, request, idempotency_key)


@router.delete(
    "/v1/ops/tenants/<tenant_id>/data",
    summary="Erase a tenant's data",
    description="Erase every job of the tenant as `DELETE /v1/jobs/{job_id}` does (running ones are cancelled "
    "first), then its memory and its uploads; tombstones stay (usage and cost, for billing). Answers what each "
    "store deleted; asked again, it goes on where an erasure cut short stopped (and deletes nothing more once done).",
    operation_id="erase_tenant_data",
    tags=[ADMIN],
    responses={
        200: {
            "description": "What each store deleted",
            "content": {"application/json": {"model": list[StoreReport]}},
        },
        **OPS_PROBLEMS,
        **problems(422, "Not a tenant id"),
        **problems(503, "A running job of the tenant could not be stopped now; erase again (it goes on)"),
    },
)
def erase_tenant_data(tenant_id: TenantId) -> Response[str]:
    from longhaul.api.erasure import erase_tenant_data as erase  # not every cold start's import

    report = erase(services(), _operator(), tenant_id)
    body = "[" + ",".join(line.model_dump_json() for line in report) + "]"
    return Response(status_code=200, content_type="application/json", body=body)


@router.get(
    "/v1/ops/tenants/<tenant_id>/policy",
    summary="Get a tenant's policy",
    description="A tenant's budget policy (ceilings per job, daily allowance, routes) and today's spending.",
    operation_id="get_tenant_policy",
    tags=[ADMIN],
    responses={**OPS_PROBLEMS, **NO_TENANT, **problems(422, "Not a tenant id")},
)
def get_tenant_policy(tenant_id: TenantId) -> TenantPolicyView:
    _operator()
    return policies.tenant_policy(services(), tenant_id)


@router.put(
    "/v1/ops/tenants/<tenant_id>/policy",
    summary="Replace a tenant's policy",
    description="Every field the body omits takes its default (listed in `reset`, with the policy before in "
    "`previous`); PATCH changes only the fields it names. A tenant new to the platform exists from then on.",
    operation_id="put_tenant_policy",
    tags=[ADMIN],
    responses={**keyed(NOT_OPERATOR, takes_body=True), **with_json_body("Not a tenant id, or an invalid policy")},
)
def put_tenant_policy(tenant_id: TenantId, policy: Annotated[TenantPolicy, Body()]) -> TenantPolicyView:
    _operator()
    return policies.set_tenant_policy(services(), tenant_id, policy)


@router.patch(
    "/v1/ops/tenants/<tenant_id>/policy",
    summary="Change some fields of a tenant's policy",
    description="The fields given replace the stored ones, a field given as null takes its default, the others are "
    "kept.",
    operation_id="patch_tenant_policy",
    tags=[ADMIN],
    responses={
        **keyed(NOT_OPERATOR, takes_body=True),
        **NO_TENANT,
        **with_json_body("Not a tenant id, or an invalid policy"),
        **problems(503, "The policy kept changing meanwhile; patch again"),
    },
)
def patch_tenant_policy(tenant_id: TenantId, change: Annotated[TenantPolicyPatch, Body()]) -> TenantPolicyView:
    _operator()
    return policies.patch_tenant_policy(services(), tenant_id, change)


@router.get(
    "/v1/ops/tenants/<tenant_id>/memory",
    summary="List a tenant's memory",
    description="A tenant's memory: episodes (what past jobs did) and long-term facts (with provenance), paged.",
    operation_id="ops_list_tenant_memory",
    tags=[ADMIN],
    responses={
        **OPS_PROBLEMS,
        **problems(400, "Not a cursor of this listing"),
        **NO_TENANT,
        **problems(422, "Not a tenant id"),
    },
)
def get_tenant_memory(
    tenant_id: TenantId,
    kind: Annotated[Literal["episode", "fact"] | None, Query()] = None,
    subject: Annotated[str | None, Query(max_length=200, description="Only memories about this subject")] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_OPS_PAGE_SIZE)] = 100,
    cursor: Cursor = None,
) -> MemoryList:
    _operator()
    return memory.list_memory(services(), tenant_id, kind=kind, subject=subject, limit=limit, cursor=cursor)


@router.delete(
    "/v1/ops/tenants/<tenant_id>/memory",
    summary="Delete a tenant's memory",
    description="All of the tenant's memory, or one subject's.",
    operation_id="ops_delete_tenant_memory",
    tags=[ADMIN],
    responses={**OPS_PROBLEMS, **NO_TENANT, **problems(422, "Not a tenant id")},
)
def delete_tenant_memory(
    tenant_id: TenantId,
    subject: Annotated[str | None, Query(max_length=200, description="Only memories about this subject")] = None,
) -> MemoryDeleted:
    _operator()
    return memory.delete_memory(services(), tenant_id, subject=subject)


@router.delete(
    "/v1/ops/tenants/<tenant_id>/memory/<memory_id>",
    summary="Delete one memory of a tenant",
    operation_id="ops_delete_tenant_memory_item",
    tags=[ADMIN],
    responses={
        **OPS_PROBLEMS,
        **problems(404, "No such tenant, or no such memory of this tenant"),
        **problems(422, "Not a tenant id"),
    },
)
def delete_tenant_memory_item(tenant_id: TenantId, memory_id: Annotated[str, Path()]) -> MemoryDeleted:
    _operator()
    return memory.delete_one(services(), tenant_id, memory_id)


@router.get(
    "/v1/ops/webhooks/dead-letters",
    summary="List dead webhooks",
    description="Webhooks whose delivery gave up, newest first (their dead-letter queue holds the same).",
    operation_id="list_dead_webhooks",
    tags=[OPERATORS],
    responses={**OPS_PROBLEMS, **INVALID_PARAMETERS},
)
def list_dead_webhooks(limit: Annotated[int, Query(ge=1, le=500)] = 100) -> WebhookList:
    _operator()
    from longhaul.webhooks import dispatcher  # an operator's action: not every cold start's import

    return WebhookList(webhooks=[WebhookView.of(r) for r in dispatcher.dead_webhooks(services(), limit=limit)])


@router.post(
    "/v1/ops/webhooks/<webhook_id>/redeliver",
    summary="Redeliver a dead webhook",
    description="Deliver a dead webhook again: the same webhook-id and body, a new series of retries.",
    operation_id="redeliver_webhook",
    tags=[OPERATORS],
    responses={
        202: {"description": "Redelivery started", "content": {"application/json": {"model": WebhookView}}},
        **keyed(NOT_OPERATOR, takes_body=True),
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
    from longhaul.webhooks import dispatcher  # an operator's action: not every cold start's import

    fresh = dispatcher.redeliver(s, webhook_id) or record
    return Response(status_code=202, content_type="application/json", body=WebhookView.of(fresh).model_dump_json())


@router.get(
    "/v1/ops/metrics",
    summary="Get the platform's metrics",
    description="The platform's metrics over the last hours: tokens and cost per workflow and tenant, retries per "
    "step, queue wait per SLA class, review waiting time, webhook failures.",
    operation_id="get_metrics",
    tags=[OPERATORS],
    responses={**OPS_PROBLEMS, **problems(422, "Invalid hours or name")},
)
def get_metrics(
    hours: Annotated[int, Query(ge=1, le=metrics.MAX_WINDOW_HOURS)] = 24,
    name: Annotated[str | None, Query(max_length=256, description="Only this metric")] = None,
) -> MetricsReport:
    _operator()
    return metrics.report(services(), hours=hours, name=name)


#: The most events one read of the tap answers.
MAX_TAP_EVENTS = 100


@router.get(
    "/v1/ops/events",
    summary="Read the bus's events",
    description="The events the platform put on its EventBridge bus (`Job Status Changed`, `Review Requested`, "
    "`Review Decided`), from the operators' tap: a queue a rule on the bus sends every Longhaul event to. Waits up to "
    "`wait` seconds for the first and answers what the tap holds, in the order it received them, up to `limit`. Each "
    "event is answered once (what one read answers is gone from the tap); order a job's events by `detail.seq`. Your "
    "own consumers put their own rules on the bus (`docs/how-to/consume-job-events.md`).",
    operation_id="ops_read_bus_events",
    tags=[OPERATORS],
    responses={
        **OPS_PROBLEMS,
        **INVALID_PARAMETERS,
        **problems(503, "The deployment has no tap of its bus (LONGHAUL_EVENTS_TAP unset)"),
    },
)
def ops_read_bus_events(
    wait: Annotated[
        int,
        Query(ge=0, le=limits.MAX_EVENTS_WAIT_SECONDS, description="Seconds to wait for the first event (long poll)."),
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_TAP_EVENTS)] = 10,
) -> BusEventList:
    _operator()
    tap = services().events_tap
    if tap is None:
        raise Unavailable("this deployment has no tap of its event bus (LONGHAUL_EVENTS_TAP is unset)")
    return BusEventList(events=[bus_event(e) for e in tap.take(limit=limit, wait_seconds=wait)])
