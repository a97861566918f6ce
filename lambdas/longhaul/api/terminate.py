"""An operator ends a job for good with a message its owner reads: `failed` (the message is its `error.message`, kind
`terminated`) or `cancelled` (its `cancellation.message`).

A job still moving stops as a cancel stops it (the cancel's request, the execution stopped, its open review closed,
its container tasks stopped), then ends in the status asked for, with the `job.failed` or `job.cancelled` webhook its
status change writes to the outbox. A job that already failed keeps its status and takes the message (its webhook
`job.failed` says so again); a job that completed, was cancelled or expired is a 409.
"""

from __future__ import annotations

from typing import Any, Literal

from longhaul.api.jobs import JobService
from longhaul.api.updates import AlreadyFinished
from longhaul.core.auth import Principal
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINATED_KIND, JobStatus, TerminateOutcome
from longhaul.core.observability import logger
from longhaul.core.ports import EngineUnavailable
from longhaul.core.problems import Unavailable
from longhaul.core.records import Job
from longhaul.storage.dynamo import Cancelled
from longhaul.storage.jobs import ACTIVE, NewEvent, TransitionRejected

TERMINATED_ERROR = "JobTerminated"  # the error name of a job an operator ended as failed
# Where a job is stopped from: anything not yet finished.
STOPPABLE = frozenset(
    {
        JobStatus.QUEUED,
        *ACTIVE,
        JobStatus.WAITING_FOR_REVIEW,
        JobStatus.PAUSED,
        JobStatus.CANCEL_REQUESTED,
    }
)
TRIES = 4


def terminate(
    service: JobService,
    principal: Principal,
    job_id: str,
    *,
    status: Literal["failed", "cancelled"],
    reason: str,
    message: str,
) -> TerminateOutcome:
    """End the job (any tenant's: an operator's action) as `status`, its owner reading `message`; `reason` goes into
    the `job_terminated` event with who ended it."""
    s = service.services
    to = JobStatus(status)
    for _ in range(TRIES):
        job = service.job(principal, job_id, any_tenant=True)
        previous = job.status
        if previous == JobStatus.FAILED and to == JobStatus.FAILED:
            return _remark_failed(service, principal, job, reason=reason, message=message)
        if previous not in STOPPABLE:
            raise AlreadyFinished(
                f"job {job_id} is already {previous.value}; only a job that has not finished (or a failed job, "
                "terminated as failed) is terminated",
                job_status=previous.value,
            )
        audit = {"by": principal.tenant_id, "role": principal.role, "reason": reason}
        if previous != JobStatus.CANCEL_REQUESTED:
            try:
                s.jobs.transition(
                    job_id,
                    JobStatus.CANCEL_REQUESTED,
                    event="cancel_requested",
                    detail={**audit, "terminate_as": status},
                    allowed_from=STOPPABLE - {JobStatus.CANCEL_REQUESTED},
                )
            except TransitionRejected:  # it moved meanwhile: look again
                continue
        try:
            s.engine.stop(job.workflow, job.execution_name, error="JobCancelled", cause=f"terminated: {reason}")
        except EngineUnavailable:
            raise Unavailable(
                "the termination is recorded as a cancellation but the execution could not be stopped yet; "
                "terminate again"
            ) from None
        # (not every cold start's import)
        from longhaul.operations.sweep import stop_container_tasks
        from longhaul.review.lane import close_for_stopped_job

        review = close_for_stopped_job(s, s.jobs.get_job(job_id) or job, "cancelled")
        stop_container_tasks(s, job_id, reason=f"job terminated by {principal.tenant_id}")
        stopped = service._cancel_outcome(s.jobs.get_job(job_id) or job, message)
        now = s.now()
        fields: dict[str, Any] = {"current_step": None, **({"review": review} if review else {})}
        if to == JobStatus.FAILED:
            fields["error"] = _error(job, message)
        else:
            fields["cancellation"] = {"at": iso(now), "message": message, "terminated": True}
        try:
            ended = s.jobs.transition(
                job_id,
                to,
                event="job_terminated",
                detail={
                    **audit,
                    "status": status,
                    "message": message,
                    "previous_status": previous.value,
                    "completed_steps": stopped.completed_steps,
                },
                set_fields=fields,
                allowed_from=[JobStatus.CANCEL_REQUESTED],
            )
        except TransitionRejected:
            latest = s.jobs.get_job(job_id) or job
            if latest.status == JobStatus.FAILED and to == JobStatus.FAILED:  # it failed meanwhile: take the message
                return _remark_failed(service, principal, latest, reason=reason, message=message)
            raise AlreadyFinished(
                f"job {job_id} ended {latest.status.value} before the termination took hold",
                job_status=latest.status.value,
            ) from None
        logger.info("job terminated", extra={"job_id": job_id, **audit, "status": status})
        return TerminateOutcome(
            job_id=job_id,
            status=ended.status,
            previous_status=previous,
            message=message,
            completed_steps=stopped.completed_steps,
            side_effects=stopped.side_effects,
        )
    raise Unavailable(f"job {job_id} kept changing; terminate again")


def _error(job: Job, message: str) -> dict[str, Any]:
    step = job.error.step if job.error is not None else job.current_step
    return {"kind": TERMINATED_KIND, "error": TERMINATED_ERROR, "message": message, **({"step": step} if step else {})}


def _remark_failed(
    service: JobService, principal: Principal, job: Job, *, reason: str, message: str
) -> TerminateOutcome:
    """A failed job terminated as failed: its error becomes the operator's message (kind `terminated`; what it was
    is kept in the event), and its `job.failed` webhook is sent again to say so."""
    s = service.services
    detail = {
        "by": principal.tenant_id,
        "role": principal.role,
        "reason": reason,
        "status": "failed",
        "message": message,
        "previous_status": job.status.value,
        "previous_error": job.error.model_dump(exclude_none=True) if job.error else None,
    }
    try:
        s.jobs.write(
            job,
            [NewEvent("job_terminated", detail=detail)],
            fields={"error": _error(job, message)},
            only_if=[JobStatus.FAILED],
            announce="job.failed",
        )
    except Cancelled:
        latest = s.jobs.get_job(job.job_id) or job
        raise AlreadyFinished(
            f"job {job.job_id} changed meanwhile (it is {latest.status.value}); terminate again",
            job_status=latest.status.value,
        ) from None
    stopped = service._cancel_outcome(job, message)
    return TerminateOutcome(
        job_id=job.job_id,
        status=JobStatus.FAILED,
        previous_status=JobStatus.FAILED,
        message=message,
        completed_steps=stopped.completed_steps,
        side_effects=stopped.side_effects,
    )
