"""The routes that steer a job that has not finished: `PATCH /v1/jobs/{job_id}` (its tenant) and
`PATCH /v1/ops/jobs/{job_id}` (an operator, any tenant's job, within that tenant's policy). The use case is
`longhaul.api.updates`."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from handlers.api_shared import (
    JOBS,
    OPERATORS,
    Responses,
    erased,
    job_service,
    keyed,
    principal,
    problems,
    with_json_body,
)
from longhaul.core.contracts import JobUpdate, JobView
from longhaul.core.problems import Forbidden

router = Router()

_UPDATE_DESCRIPTION = (
    "Change a job that has not finished: its deadline (from now), budget (up to the tenant's ceilings, not below what "
    "it has spent and holds), SLA class, review, instructions for the model calls of the steps that start after the "
    "update, or agent limits; each within the tenant's policy as a submission would be. At least one field; the "
    "answer is the job as updated, and its log records `job_updated` (the fields, who asked). The same update sent "
    "again changes nothing more (a deadline is set again from now)."
)


def _responses(forbidden: str, not_found: str) -> Responses:
    return {
        200: {"description": "The job, updated", "content": {"application/json": {"model": JobView}}},
        **keyed(forbidden, takes_body=True),
        **problems(404, not_found),
        **erased(),
        **problems(409, "The job has finished (or is being cancelled): `job_status` says how it ended"),
        **with_json_body(
            "An unknown field, no field, a value outside its bounds, a budget above the tenant's ceilings or below "
            "what the job has spent, an SLA class or agent limits outside the tenant's policy; `errors` name each"
        ),
        **problems(503, "The job kept changing while it was being updated; send the update again"),
    }


@router.patch(
    "/v1/jobs/<job_id>",
    summary="Update a running job",
    description=_UPDATE_DESCRIPTION,
    operation_id="update_job",
    tags=[JOBS],
    responses=_responses("A reviewer key (it reaches only the review routes)", "No such job for this tenant"),
)
def update_job(job_id: Annotated[str, Path()], change: Annotated[JobUpdate, Body()]) -> JobView:
    return job_service().update(principal(router), job_id, change)


@router.patch(
    "/v1/ops/jobs/<job_id>",
    summary="Update any tenant's running job",
    description=_UPDATE_DESCRIPTION + " An operator's update is judged against the job's tenant's policy.",
    operation_id="ops_update_job",
    tags=[OPERATORS],
    responses=_responses("Not an operator key", "No such job"),
)
def ops_update_job(job_id: Annotated[str, Path()], change: Annotated[JobUpdate, Body()]) -> JobView:
    caller = principal(router)
    if caller.role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return job_service().update(caller, job_id, change, any_tenant=True)
