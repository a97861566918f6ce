"""The steering routes of the API function: pause and resume a job, send it a signal (`/v1/jobs/{job_id}/…` for its
tenant, `/v1/ops/jobs/{job_id}/…` for operators). Thin: each calls `longhaul.api.steer.SteerService`."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from handlers.api_shared import JOBS, OPERATORS, Responses, erased, keyed, principal, problems, with_json_body
from longhaul.api.steer import SteerService
from longhaul.core.auth import Principal
from longhaul.core.contracts import SignalAccepted, SteerOutcome
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
        **erased(),
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


SIGNAL_DESCRIPTION = (
    "Send signal `name` to the job: a JSON object validated by the model of the workflow's signal step of that name "
    "(invoice reconciliation: `price_list`). A step waiting for it resumes at once (event `signal_received`); sent "
    "before the step is reached, it is kept and the step consumes it when it gets there, without waiting. A signal is "
    "taken once: a second one, one after its wait ended (`signal_timed_out`) or after its step, or one to a finished "
    "job answers 409 (`signal_status` or `job_status` says why)."
)
SIGNAL_CONFLICT = (
    "Taken already (`signal_status`: `received`, `consumed`), its wait over (`timed_out`), its step past (`passed`), "
    "or the job finished or being cancelled (`job_status`)"
)


def _signal_responses(forbidden: str) -> Responses:
    return {
        202: {"description": "Signal accepted", "content": {"application/json": {"model": SignalAccepted}}},
        **keyed(forbidden, takes_body=True),
        **problems(404, "No such job for this tenant, or no signal of that name in its workflow"),
        **erased(),
        **with_json_body("The body is not a JSON object, or not what the signal's model accepts; `errors` say where"),
        **problems(409, SIGNAL_CONFLICT),
    }


def _accepted(accepted: SignalAccepted) -> Response[str]:
    return Response(status_code=202, content_type="application/json", body=accepted.model_dump_json())


@router.post(
    "/v1/jobs/<job_id>/signals/<name>",
    summary="Send a signal to a job",
    description=SIGNAL_DESCRIPTION,
    operation_id="signal_job",
    tags=[JOBS],
    responses=_signal_responses(TENANT_KEY),
)
def signal_job(
    job_id: Annotated[str, Path()], name: Annotated[str, Path()], body: Annotated[dict[str, Any], Body()]
) -> Response[str]:
    return _accepted(_service().signal(principal(router), job_id, name, body))


@router.post(
    "/v1/ops/jobs/<job_id>/signals/<name>",
    summary="Send a signal to any tenant's job",
    description=SIGNAL_DESCRIPTION,
    operation_id="ops_signal_job",
    tags=[OPERATORS],
    responses=_signal_responses(NOT_OPERATOR),
)
def ops_signal_job(
    job_id: Annotated[str, Path()], name: Annotated[str, Path()], body: Annotated[dict[str, Any], Body()]
) -> Response[str]:
    return _accepted(_service().signal(_operator(), job_id, name, body, any_tenant=True))
