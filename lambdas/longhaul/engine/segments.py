"""Per-segment timeouts: a bound on a group of consecutive steps together (`WorkflowSpec.segments`).

The state machine runs a segment's steps as the first branch of a Parallel state whose second branch is the
segment's timer: a `.waitForTaskToken` Task of the steer lane (`timer`) bounded by the segment's seconds. The
first branch ends with `end`, which resumes the timer (the Parallel then goes on as the steps' own branch left the
state). When the timer's bound passes first, the timer branch fails `SegmentTimedOut`, which stops the steps'
branch (a Lambda or container task still running is cut off: its answer is no longer taken), and the Parallel's
catch calls `timed_out`: event `segment_timed_out`, then the job fails (error kind `timeout`, `detail.segment`) or
goes to the workflow's review step with the reason.

The end and the timer's token cross like the pause's: each side writes its own part, then reads the other's
(`JobStore.end_wait`, `JobStore.set_wait_token`), so the timer is resumed whichever comes first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from longhaul.core.contracts import TERMINAL_STATUSES, JobError, JobStatus
from longhaul.core.errors import CancelledError, InternalError, SegmentTimedOut
from longhaul.core.observability import emit, logger
from longhaul.core.step_events import SteerEvent
from longhaul.engine.failures import FAILABLE
from longhaul.engine.spec import SegmentSpec, registry
from longhaul.services import Services
from longhaul.storage.jobs import TransitionRejected


def wait_name(segment: str) -> str:
    return f"segment:{segment}"


def _segment(workflow: str, name: str) -> SegmentSpec:
    found = next((g for g in registry()[workflow].segments if g.name == name), None)
    if found is None:
        raise InternalError(f"workflow {workflow} has no segment {name!r}")
    return found


def timer(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The segment's timer: keep its token; resume at once if the segment ended meanwhile."""
    event = SteerEvent.model_validate(raw_event)
    if event.token is None:
        raise InternalError("the segment timer passed no task token", step=event.step)
    tokens = services.tokens
    assert tokens is not None
    services.jobs.set_wait_token(event.job_id, wait_name(event.step), event.token)
    if services.jobs.wait_ended(event.job_id, wait_name(event.step)):
        tokens.succeed(event.token, {"ended": True})
        return {"timing": False}
    return {"timing": True}


def end(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The segment's steps are done: end its timer (now, or when the timer keeps its token)."""
    event = SteerEvent.model_validate(raw_event)
    token = services.jobs.wait_token(event.job_id, wait_name(event.step))
    services.jobs.end_wait(event.job_id, wait_name(event.step))
    if token is not None and services.tokens is not None:
        services.tokens.succeed(token, {"ended": True})
    return {"ended": True}


def timed_out(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The segment ran past its bound: `segment_timed_out`; then the job fails (`on_timeout="fail"`: recorded here,
    error kind `timeout`, `detail.segment`) or its review gets the reason (the output, kept under the segment's name
    in the state, is read by the review's opening)."""
    event = SteerEvent.model_validate(raw_event)
    job = services.jobs.get_job(event.job_id)
    if job is None or job.status in TERMINAL_STATUSES or job.status == JobStatus.CANCEL_REQUESTED:
        status = job.status.value if job else "gone"
        raise CancelledError(f"job {event.job_id} is {status}", step=event.step)
    segment = _segment(job.workflow, event.step)
    seconds = event.seconds or segment.timeout_seconds
    detail = {"segment": segment.name, "timeout_seconds": seconds}
    message = f"segment {segment.name} ({', '.join(segment.steps)}) ran past its {seconds} s"
    services.jobs.end_wait(event.job_id, wait_name(event.step))
    if segment.on_timeout == "review":
        services.jobs.append_event(
            event.job_id, "segment_timed_out", step=job.current_step, detail={**detail, "on_timeout": "review"}
        )
        logger.info("segment timed out: on to review", extra={"job_id": event.job_id, "segment": segment.name})
        return {"timed_out": True, "limit": "segment", "message": message, **detail}
    services.jobs.append_event(
        event.job_id, "segment_timed_out", step=job.current_step, detail={**detail, "on_timeout": "fail"}
    )
    error = JobError(
        kind=SegmentTimedOut.kind,
        error=SegmentTimedOut.__name__,
        step=job.current_step,
        message=message,
        detail=detail,
    )
    stored = error.model_dump(exclude_none=True)
    try:
        services.jobs.transition(
            event.job_id,
            JobStatus.FAILED,
            event="job_failed",
            step=job.current_step,
            detail={**stored, "segment": segment.name},
            set_fields={"error": stored},
            allowed_from=FAILABLE,
        )
        emit("JobsFailed", workflow=job.workflow, step=job.current_step or segment.name, kind=error.kind)
    except TransitionRejected:
        logger.warning("job already finished; segment timeout not recorded", extra={"job_id": event.job_id})
    return {"timed_out": True, **detail}
