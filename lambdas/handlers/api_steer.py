"""The steering routes of the API function: pause and resume a job (`/v1/jobs/{job_id}/…` for its tenant,
`/v1/ops/jobs/{job_id}/…` for operators). Thin: each calls `longhaul.api.steer.SteerService`."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from handlers.api_shared import JOBS, OPERATORS, Responses, keyed, principal, problems
from longhaul.api.steer import SteerService
from longhaul.core.auth import Principal
from longhaul.core.contracts import SteerOutcome
from longhaul.core.problems import Forbidden
from longhaul.services import services

router = Router()
TENANT_KEY = "A reviewer key (it reaches only the review routes)"
NOT_OPERATOR = "Not an operator key"
PAUSE_DESCRIPTION = (
    "Stop the job at its next step boundary: a fan-out starts no new item (items already running finish and are "
    "kept), then the job is `paused` (event `job_paused`) and its execution waits with no compute held. Asking again "
    "answers the pause already asked for. 409 when the job is paused already, finished or being cancelled."
)
RESUME_DESCRIPTION = (
    "Resume a paused job (event `job_resumed`): it enters the step it paused before, skipping what committed. A pause "
    "asked for and not reached yet is withdrawn; a job neither paused nor asked to pause is answered as it is. 409 "
    "when the job finished."
)


def _service() -> SteerService:
    return SteerService(services())


def _answer(outcome: SteerOutcome, status: int) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=outcome.model_dump_json())


def _operator() -> Principal:
    caller = principal(router)
    if caller.role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return caller


def _responses(forbidden: str, accepted: int, what: str, conflict: str) -> Responses:
    return {
        accepted: {"description": what, "content": {"application/json": {"model": SteerOutcome}}},
        **keyed(forbidden, takes_body=True),
        **problems(404, "No such job for this tenant" if forbidden == TENANT_KEY else "No such job"),
        **problems(409, conflict + " (`job_status` says its status)"),
    }


PAUSE_CONFLICT = "The job is paused already, finished or being cancelled"
RESUME_CONFLICT = "The job finished"


@router.post(
    "/v1/jobs/<job_id>/pause",
    summary="Pause a job",
    description=PAUSE_DESCRIPTION,
    operation_id="pause_job",
    tags=[JOBS],
    responses=_responses(TENANT_KEY, 202, "Pause requested (or already requested)", PAUSE_CONFLICT),
)
def pause_job(job_id: Annotated[str, Path()]) -> Response[str]:
    return _answer(_service().pause(principal(router), job_id), 202)


@router.post(
    "/v1/jobs/<job_id>/resume",
    summary="Resume a paused job",
    description=RESUME_DESCRIPTION,
    operation_id="resume_job",
    tags=[JOBS],
    responses=_responses(TENANT_KEY, 200, "Resumed, the pause withdrawn, or nothing to resume", RESUME_CONFLICT),
)
def resume_job(job_id: Annotated[str, Path()]) -> Response[str]:
    return _answer(_service().resume(principal(router), job_id), 200)


@router.post(
    "/v1/ops/jobs/<job_id>/pause",
    summary="Pause any tenant's job",
    description=PAUSE_DESCRIPTION,
    operation_id="ops_pause_job",
    tags=[OPERATORS],
    responses=_responses(NOT_OPERATOR, 202, "Pause requested (or already requested)", PAUSE_CONFLICT),
)
def ops_pause_job(job_id: Annotated[str, Path()]) -> Response[str]:
    return _answer(_service().pause(_operator(), job_id, any_tenant=True), 202)


@router.post(
    "/v1/ops/jobs/<job_id>/resume",
    summary="Resume any tenant's paused job",
    description=RESUME_DESCRIPTION,
    operation_id="ops_resume_job",
    tags=[OPERATORS],
    responses=_responses(NOT_OPERATOR, 200, "Resumed, the pause withdrawn, or nothing to resume", RESUME_CONFLICT),
)
def ops_resume_job(job_id: Annotated[str, Path()]) -> Response[str]:
    return _answer(_service().resume(_operator(), job_id, any_tenant=True), 200)
