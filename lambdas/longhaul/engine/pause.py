"""Pause and resume: one mechanism with the review's wait (a task token, no compute held).

A pause is a request on the job (`Job.pause`, event `pause_requested`). The step runner reaches it at the next step
boundary (the start of a step, a fan-out's item or an agent's turn): the job moves to `paused` (`job_paused`, once)
and the step raises `JobPaused`. The state machine catches it into the step's pause wait, a `.waitForTaskToken` Task
of the workflow's steer lane (`wait` here): it stores the token with the job and returns. A resume moves the job back
to `running` (`job_resumed`) and resumes the token: the execution enters the same step again (a fan-out's committed
items are skipped by their checkpoints). A resume before the pause was reached withdraws the request
(`pause_withdrawn`). Each change is a conditional write on the job's event counter and version: a request and the
runner's pause never cross unseen, and a duplicate request changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus, PauseState, SteerOutcome
from longhaul.core.errors import CancelledError, InternalError
from longhaul.core.observability import logger
from longhaul.core.records import Job
from longhaul.core.step_events import SteerEvent
from longhaul.services import Services
from longhaul.storage.dynamo import Cancelled, backoff
from longhaul.storage.jobs import ACTIVE, NewEvent

S = JobStatus
# Where a pause may be asked for: the job has not finished and is not being cancelled (a queued job pauses at its
# first step, a job in review at the step after the review).
PAUSABLE = frozenset({S.QUEUED, *ACTIVE, S.WAITING_FOR_REVIEW})
TRIES = 8


class NotPausable(Exception):
    """The job is paused already or finished (409 with its status)."""

    def __init__(self, job: Job, message: str) -> None:
        super().__init__(message)
        self.job = job


def _outcome(job: Job, message: str) -> SteerOutcome:
    return SteerOutcome(job_id=job.job_id, status=job.status, pause=job.pause, message=message)


def request_pause(services: Services, job: Job, *, requested_by: str) -> SteerOutcome:
    """Ask the job to pause at its next step boundary; a request already made is answered as it is."""
    for tries in range(TRIES):
        if job.status not in PAUSABLE:  # paused already, being cancelled, or finished
            raise NotPausable(job, f"job {job.job_id} is {job.status.value}")
        if job.pause is not None:
            return _outcome(job, "a pause was already requested: the job stops at its next step boundary")
        pause = PauseState(requested_by=requested_by, requested_at=services.now())
        try:
            job = services.jobs.write(
                job,
                [NewEvent("pause_requested", step=job.current_step, detail={"requested_by": requested_by})],
                fields={"pause": pause.model_dump(mode="json")},
                only_if=PAUSABLE,
            )
            return _outcome(job, "pause requested: the job stops at its next step boundary")
        except Cancelled:  # it moved meanwhile: read again
            backoff(tries)
            job = services.jobs.get_job(job.job_id) or job
    raise InternalError(f"job {job.job_id} kept changing; pause not requested")


def resume(services: Services, job: Job, *, requested_by: str, stops_deadline: bool) -> SteerOutcome:
    """Resume a paused job (its pause wait ends at once), or withdraw a pause not reached yet; a job neither paused
    nor asked to pause is answered as it is. With `stops_deadline` (the tenant's policy), the deadline moves by the
    time the job was paused."""
    for tries in range(TRIES):
        if job.status in TERMINAL_STATUSES:
            raise NotPausable(job, f"job {job.job_id} is {job.status.value}")
        try:
            if job.status == S.PAUSED:
                job = _resume_paused(services, job, requested_by=requested_by, stops_deadline=stops_deadline)
                _wake(services, job.job_id)
                return _outcome(job, "resumed: the job enters the step it paused before")
            if job.pause is not None:
                job = services.jobs.write(
                    job,
                    [NewEvent("pause_withdrawn", step=job.current_step, detail={"requested_by": requested_by})],
                    fields={"pause": None},
                    only_if=PAUSABLE,
                )
                return _outcome(job, "the pause had not been reached yet: the request is withdrawn")
            return _outcome(job, f"the job is {job.status.value}, not paused: nothing to resume")
        except Cancelled:  # it moved meanwhile: read again
            backoff(tries)
            job = services.jobs.get_job(job.job_id) or job
    raise InternalError(f"job {job.job_id} kept changing; not resumed")


def _resume_paused(services: Services, job: Job, *, requested_by: str, stops_deadline: bool) -> Job:
    now = services.now()
    pause = job.pause
    paused_at = pause.paused_at if pause and pause.paused_at else now
    paused_seconds = max(0, int((now - paused_at).total_seconds()))
    fields: dict[str, Any] = {"pause": None, "wait_state": None}  # it waits on nothing now
    detail: dict[str, Any] = {"requested_by": requested_by, "paused_seconds": paused_seconds}
    if pause is not None and pause.step:
        detail["step"] = pause.step
    if stops_deadline and job.deadline_at is not None:
        deadline = job.deadline_at + timedelta(seconds=paused_seconds)
        fields["deadline_at"] = iso(deadline)
        detail["deadline_at"] = iso(deadline)
    return services.jobs.write(
        job, [NewEvent("job_resumed", step=pause.step if pause else None, detail=detail)], to=S.RUNNING, fields=fields
    )


def _wake(services: Services, job_id: str) -> None:
    """Resume the pause wait's token, if the wait stored one yet (if not, the wait finds the job running and resumes
    itself). A token gone (its wait timed out and the step was entered again) is no error."""
    token = services.jobs.pause_token(job_id)
    if token is None or services.tokens is None:
        return
    services.tokens.succeed(token, {"resumed": True})
    services.jobs.drop_pause_token(job_id)


def wait(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The pause wait: store the token with the job; resume at once if the job is no longer paused (resumed, or
    stopped: entering the step again ends the execution as a stopped job's step does)."""
    event = SteerEvent.model_validate(raw_event)
    if event.token is None:
        raise InternalError("the pause wait passed no task token", step=event.step)
    tokens = services.tokens
    assert tokens is not None
    job = services.jobs.get_job(event.job_id)
    if job is None or job.status in TERMINAL_STATUSES or job.status == S.CANCEL_REQUESTED:
        status = job.status.value if job else "gone"
        raise CancelledError(f"job {event.job_id} is {status}", step=event.step)
    services.jobs.set_pause_token(event.job_id, event.token)
    again = services.jobs.get_job(event.job_id)
    if again is None or again.status != S.PAUSED:  # resumed while the token was being stored
        tokens.succeed(event.token, {"resumed": True})
        return {"waiting": False}
    logger.info("paused: waiting for the resume", extra={"job_id": event.job_id, "step": event.step})
    return {"waiting": True}
