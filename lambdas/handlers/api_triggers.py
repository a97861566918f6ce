"""Schedules and triggers: `/v1/schedules` (EventBridge Scheduler, a job at every time a cron or rate names) and
`/v1/triggers` (an S3 inbox, or a rule on an EventBridge bus, each starting a job per object or matching event). The
use cases are `longhaul.api.triggers`; a fire reaches the function as an event of its own (`handlers.triggers`)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from handlers.api_shared import TRIGGERS, base_url, keyed, principal, problems, with_json_body
from longhaul.api.triggers import TriggerService
from longhaul.core.triggers import (
    ScheduleList,
    SchedulePatch,
    ScheduleRequest,
    ScheduleView,
    TriggerList,
    TriggerPatch,
    TriggerRequest,
    TriggerView,
)
from longhaul.services import services

router = Router()

TENANT_KEY = "A reviewer key (it reaches only the review routes)"
SCHEDULE_PROBLEMS = {**keyed(TENANT_KEY), **problems(404, "No such schedule for this tenant")}
TRIGGER_PROBLEMS = {**keyed(TENANT_KEY), **problems(404, "No such trigger for this tenant")}
NOT_CONFIGURED = problems(503, "Schedules (or batch windows) are not configured on this deployment, or AWS refused")


def _service() -> TriggerService:
    return TriggerService(services())


def _target() -> str:
    """The function fires invoke: this one (the handler puts its ARN in the routing context)."""
    return str(router.context.get("function_arn") or "")


@router.post(
    "/v1/schedules",
    summary="Create a schedule",
    description="A job of `workflow` on `input` at every time `schedule` names (`cron(…)` or `rate(…)`, as EventBridge "
    "Scheduler reads them, in `timezone`). Each fire submits as `POST /v1/jobs` would, with the Idempotency-Key "
    "`<schedule_id>:<scheduled minute>`: a fire delivered twice starts one job, whose view names it in `trigger`. The "
    "tenant's policy bounds how many schedules it keeps (`max_schedules`) and how often one fires "
    "(`min_schedule_interval_seconds`).",
    operation_id="create_schedule",
    tags=[TRIGGERS],
    responses={
        201: {"description": "The schedule", "content": {"application/json": {"model": ScheduleView}}},
        **keyed(TENANT_KEY, takes_body=True),
        **with_json_body(
            "An expression EventBridge Scheduler would refuse (or that never fires, or fires more often than the "
            "tenant's policy allows), an unknown time zone, an input the workflow refuses, an SLA class or budget "
            "outside the policy, or the tenant's max_schedules reached; `errors` name each"
        ),
        **NOT_CONFIGURED,
    },
)
def create_schedule(request: Annotated[ScheduleRequest, Body()]) -> Response[str]:
    view = _service().create_schedule(principal(router), request, target=_target(), base_url=base_url(router))
    return Response(
        status_code=201,
        content_type="application/json",
        body=view.model_dump_json(),
        headers={"Location": f"{base_url(router)}/v1/schedules/{view.schedule_id}"},
    )


@router.get(
    "/v1/schedules",
    summary="List your schedules",
    operation_id="list_schedules",
    tags=[TRIGGERS],
    responses=keyed(TENANT_KEY),
)
def list_schedules() -> ScheduleList:
    return _service().list_schedules(principal(router))


@router.get(
    "/v1/schedules/<schedule_id>",
    summary="Get a schedule",
    description="The schedule, when it fires next, and its last fire (its job, or why it started none).",
    operation_id="get_schedule",
    tags=[TRIGGERS],
    responses=SCHEDULE_PROBLEMS,
)
def get_schedule(schedule_id: Annotated[str, Path()]) -> ScheduleView:
    return _service().get_schedule(principal(router), schedule_id)


@router.patch(
    "/v1/schedules/<schedule_id>",
    summary="Change, pause or resume a schedule",
    description='Merge semantics: a field given replaces it. `{"enabled": false}` pauses it, `true` resumes it.',
    operation_id="update_schedule",
    tags=[TRIGGERS],
    responses={
        200: {"description": "The schedule, changed", "content": {"application/json": {"model": ScheduleView}}},
        **keyed(TENANT_KEY, takes_body=True),
        **problems(404, "No such schedule for this tenant"),
        **with_json_body("As for creating one; `errors` name each field"),
        **NOT_CONFIGURED,
    },
)
def update_schedule(schedule_id: Annotated[str, Path()], change: Annotated[SchedulePatch, Body()]) -> ScheduleView:
    return _service().update_schedule(principal(router), schedule_id, change)


@router.delete(
    "/v1/schedules/<schedule_id>",
    summary="Delete a schedule",
    description="It fires no more; the jobs it started are kept.",
    operation_id="delete_schedule",
    tags=[TRIGGERS],
    responses={204: {"description": "Deleted"}, **SCHEDULE_PROBLEMS, **NOT_CONFIGURED},
)
def delete_schedule(schedule_id: Annotated[str, Path()]) -> Response[str]:
    _service().delete_schedule(principal(router), schedule_id)
    return Response(status_code=204, body="")


@router.post(
    "/v1/triggers",
    summary="Create a trigger",
    description="`s3`: each object created under its inbox (`inbox/<tenant>/<trigger_id>/`, or an upload ticket of "
    "`POST /v1/uploads` with `trigger_id`) starts a job with the object as a document (once per bucket, key and "
    "ETag); with `batch_seconds`, one job for the objects of each window. `eventbridge`: a rule on the platform's "
    "bus (or `event_bus`) whose matching events each start a job. `input_template` is the job's input, where "
    '`{"$event": "path"}` takes the event\'s field at that dotted path. The pattern and the template are checked '
    "against EventBridge's grammar and the workflow's input model now.",
    operation_id="create_trigger",
    tags=[TRIGGERS],
    responses={
        201: {"description": "The trigger", "content": {"application/json": {"model": TriggerView}}},
        **keyed(TENANT_KEY, takes_body=True),
        **with_json_body(
            "An event pattern EventBridge would refuse, a template the workflow's input model refuses, an SLA class "
            "or budget outside the tenant's policy, or its max_triggers reached; `errors` name each"
        ),
        **NOT_CONFIGURED,
    },
)
def create_trigger(request: Annotated[TriggerRequest, Body()]) -> Response[str]:
    view = _service().create_trigger(principal(router), request, target=_target())
    return Response(
        status_code=201,
        content_type="application/json",
        body=view.model_dump_json(),
        headers={"Location": f"{base_url(router)}/v1/triggers/{view.trigger_id}"},
    )


@router.get(
    "/v1/triggers",
    summary="List your triggers",
    operation_id="list_triggers",
    tags=[TRIGGERS],
    responses=keyed(TENANT_KEY),
)
def list_triggers() -> TriggerList:
    return _service().list_triggers(principal(router))


@router.get(
    "/v1/triggers/<trigger_id>",
    summary="Get a trigger",
    description="The trigger (an S3 trigger's `inbox` and `bucket`) and its last fire.",
    operation_id="get_trigger",
    tags=[TRIGGERS],
    responses=TRIGGER_PROBLEMS,
)
def get_trigger(trigger_id: Annotated[str, Path()]) -> TriggerView:
    return _service().get_trigger(principal(router), trigger_id)


@router.patch(
    "/v1/triggers/<trigger_id>",
    summary="Change, pause or resume a trigger",
    description='Merge semantics: a field given replaces it. `{"enabled": false}` pauses it, `true` resumes it.',
    operation_id="update_trigger",
    tags=[TRIGGERS],
    responses={
        200: {"description": "The trigger, changed", "content": {"application/json": {"model": TriggerView}}},
        **keyed(TENANT_KEY, takes_body=True),
        **problems(404, "No such trigger for this tenant"),
        **with_json_body("As for creating one; `errors` name each field"),
        **NOT_CONFIGURED,
    },
)
def update_trigger(trigger_id: Annotated[str, Path()], change: Annotated[TriggerPatch, Body()]) -> TriggerView:
    return _service().update_trigger(principal(router), trigger_id, change)


@router.delete(
    "/v1/triggers/<trigger_id>",
    summary="Delete a trigger",
    description="It starts no more jobs (an EventBridge trigger's rule is deleted); the jobs it started are kept.",
    operation_id="delete_trigger",
    tags=[TRIGGERS],
    responses={204: {"description": "Deleted"}, **TRIGGER_PROBLEMS, **NOT_CONFIGURED},
)
def delete_trigger(trigger_id: Annotated[str, Path()]) -> Response[str]:
    _service().delete_trigger(principal(router), trigger_id)
    return Response(status_code=204, body="")
