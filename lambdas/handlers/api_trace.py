"""The trace routes of the API function: a job's spans, for its tenant (without operator-only attributes) and for
operators. Thin: each calls `longhaul.api.traces.job_trace`."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from handlers.api_shared import JOBS, OPERATORS, erased, keyed, principal, problems
from longhaul.api.traces import job_trace
from longhaul.core.contracts import JobTrace
from longhaul.core.problems import Forbidden
from longhaul.services import services

router = Router()
TENANT_KEY = "A reviewer key (it reaches only the review routes)"
DESCRIPTION = (
    "The job's trace: every span of its submission, queue wait, steps and items, model and AWS calls, review waits "
    "and webhook deliveries, all under the trace id derived from its correlation id; `parent_id` is null for the "
    "root (the submission)."
)


@router.get(
    "/v1/jobs/<job_id>/trace",
    summary="Get a job's trace",
    description=DESCRIPTION + " Without the platform's operator-only attributes (code version, cloud resources).",
    operation_id="get_trace",
    tags=[JOBS],
    responses={**keyed(TENANT_KEY), **problems(404, "No such job for this tenant"), **erased()},
)
def get_trace(job_id: Annotated[str, Path()]) -> JobTrace:
    return job_trace(services(), principal(router), job_id, operator=False)


@router.get(
    "/v1/ops/jobs/<job_id>/trace",
    summary="Get any job's trace",
    description=DESCRIPTION,
    operation_id="ops_get_trace",
    tags=[OPERATORS],
    responses={**keyed("Not an operator key"), **problems(404, "No such job"), **erased()},
)
def ops_get_trace(job_id: Annotated[str, Path()]) -> JobTrace:
    caller = principal(router)
    if caller.role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return job_trace(services(), caller, job_id, operator=True)
