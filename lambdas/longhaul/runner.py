"""The step runner: what every step does around its work, so the steps themselves stay pure.

Before: the job must be live; a valid checkpoint for this (step, item) means the work is already done.
Then: status → running, step record, `step_started` event, fault hook, the work, checkpoint, `step_finished`.
A typed failure is recorded (`step_attempt_failed`) and re-raised: its class name is the ASL error name that
the state machine's Retry and Catch match. Unknown exceptions become `InternalError` (never retried).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, Field

from longhaul import faults
from longhaul.clock import iso
from longhaul.contracts import TERMINAL_STATUSES, JobStatus
from longhaul.errors import (
    CancelledError,
    InternalError,
    InvalidInputError,
    LonghaulError,
    TransientError,
    kind_of,
)
from longhaul.observability import logger
from longhaul.store import TransitionRejected
from longhaul.wiring import Services

THROTTLING_CODES = {"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded", "SlowDown"}
MESSAGE_LIMIT = 500


class WorkflowState(BaseModel):
    """The state document that travels between states: references only."""

    job_id: str
    tenant_id: str
    workflow: str
    input_key: str
    steps: dict[str, Any] = Field(default_factory=dict)


class StepEvent(BaseModel):
    step: str
    attempt: int = 0
    execution: str | None = None
    item: int | None = None
    ref: Any = None
    input: WorkflowState


@dataclass
class StepContext:
    event: StepEvent
    services: Services

    @property
    def job_id(self) -> str:
        return self.event.input.job_id

    @property
    def state(self) -> WorkflowState:
        return self.event.input

    def output_of(self, step: str) -> dict[str, Any]:
        return self.event.input.steps[step]


StepWork = Callable[[StepContext], dict[str, Any]]


def run_step(
    raw_event: Mapping[str, Any], work: StepWork, services: Services, *, steps: Sequence[str]
) -> dict[str, Any]:
    event = StepEvent.model_validate(raw_event)
    store, job_id, step, item = services.store, event.input.job_id, event.step, event.item
    job = store.get_job(job_id)
    if job is None:
        raise InvalidInputError(f"job {job_id} does not exist", step=step, item=item)
    status = JobStatus(job["status"])
    if status in TERMINAL_STATUSES or status == JobStatus.CANCEL_REQUESTED:
        raise CancelledError(f"job {job_id} is {status.value}; step not started", step=step, item=item)
    checkpoint = store.get_step(job_id, step, item)
    if checkpoint and checkpoint.get("status") == "succeeded":
        logger.info("checkpoint found; step skipped", extra={"job_id": job_id, "step": step, "item": item})
        return dict(checkpoint.get("output") or {})

    _enter_running(services, job_id, status, step)
    store.put_step(job_id, step, item, {"status": "running", "started_at": iso(store.clock.now())})
    store.append_event(job_id, "step_started", step=step, item=item, attempt=event.attempt + 1)
    if item is None:
        store.update_job(job_id, {"current_step": step, "progress": _progress(job, steps, step, done=False)})
    started = time.monotonic()
    try:
        faults.active().check(step, item)
        output = work(StepContext(event, services))
    except Exception as error:
        typed = classify(error, step=step, item=item)
        _record_attempt_failure(services, event, typed)
        if typed is error:
            raise
        raise typed from error
    store.put_step(job_id, step, item, {"status": "succeeded", "finished_at": iso(store.clock.now()), "output": output})
    store.append_event(
        job_id,
        "step_finished",
        step=step,
        item=item,
        attempt=event.attempt + 1,
        detail={"duration_ms": int((time.monotonic() - started) * 1000)},
    )
    if item is None and step == steps[-1]:
        _complete(services, job_id, step, output, steps)
    elif item is None:
        store.update_job(job_id, {"progress": _progress(job, steps, step, done=True)})
    return output


def _complete(services: Services, job_id: str, step: str, output: Mapping[str, Any], steps: Sequence[str]) -> None:
    """The last step's output carries the result reference; the job completes with it."""
    try:
        services.store.transition(
            job_id,
            JobStatus.COMPLETED,
            event="job_completed",
            step=step,
            set_fields={
                "result_key": output["result_key"],
                "current_step": None,
                "progress": {"completed": len(steps), "total": len(steps), "unit": "steps", "message": "completed"},
            },
            allowed_from=[JobStatus.RUNNING, JobStatus.RETRYING],
        )
    except TransitionRejected as rejected:
        raise CancelledError(f"job {job_id} can no longer complete: {rejected}", step=step) from None


def classify(error: Exception, *, step: str, item: int | None) -> LonghaulError:
    if isinstance(error, LonghaulError):
        return error
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code in THROTTLING_CODES or error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
            return TransientError(f"AWS {code}: retryable", step=step, item=item)
        return InternalError(f"AWS {code}", step=step, item=item)
    if isinstance(error, BotoCoreError):
        return TransientError(type(error).__name__, step=step, item=item)
    logger.exception("unexpected error in step", extra={"step": step, "item": item})
    return InternalError(f"unexpected {type(error).__name__}", step=step, item=item)


def _enter_running(services: Services, job_id: str, status: JobStatus, step: str) -> None:
    if status == JobStatus.RUNNING:
        return
    event = {JobStatus.QUEUED: "job_started", JobStatus.RETRYING: "job_resumed"}.get(status, "job_running")
    first_attempt = {"attempts": 1} if status == JobStatus.QUEUED else None
    try:
        services.store.transition(job_id, JobStatus.RUNNING, event=event, step=step, set_fields=first_attempt)
    except TransitionRejected:
        # Another item moved it first (a Map), or it was cancelled meanwhile: re-check the latter.
        job = services.store.get_job(job_id)
        if job is None or JobStatus(job["status"]) not in (JobStatus.RUNNING, JobStatus.RETRYING):
            raise CancelledError(f"job {job_id} is no longer running", step=step) from None


def _record_attempt_failure(services: Services, event: StepEvent, error: LonghaulError) -> None:
    store, job_id = services.store, event.input.job_id
    detail = {
        "error": type(error).__name__,
        "kind": error.kind,
        "message": sanitize(error.message),
        "will_retry": error.retryable,
    }
    store.put_step(
        job_id, event.step, event.item, {"status": "retrying" if error.retryable else "failed", "error": detail}
    )
    store.append_event(
        job_id, "step_attempt_failed", step=event.step, item=event.item, attempt=event.attempt + 1, detail=detail
    )
    if error.retryable:
        with contextlib.suppress(TransitionRejected):
            store.transition(
                job_id,
                JobStatus.RETRYING,
                event="job_retrying",
                step=event.step,
                item=event.item,
                allowed_from=[JobStatus.RUNNING],
            )


def _progress(job: Mapping[str, Any], steps: Sequence[str], step: str, *, done: bool) -> dict[str, Any]:
    index = steps.index(step) if step in steps else 0
    completed = index + 1 if done else index
    message = f"{step} finished" if done else f"{step} running"
    return {"completed": completed, "total": len(steps), "unit": "steps", "message": message}


def sanitize(message: str) -> str:
    """One line, bounded, no stack traces."""
    line = " ".join(str(message).split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


# ---------------------------------------------------------------------- failure recorder


class FailureEvent(BaseModel):
    job_id: str
    step: str
    workflow: str
    error: str
    cause: str | None = None
    execution: str | None = None
    item: int | None = None


def _cause_message(cause: str | None) -> str:
    if not cause:
        return ""
    try:
        parsed = json.loads(cause)
    except ValueError:
        return sanitize(cause)
    if isinstance(parsed, dict):
        return sanitize(str(parsed.get("errorMessage") or parsed.get("message") or cause))
    return sanitize(cause)


def record_failure(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """Mark the step and job failed (with a sanitized error) and return the dead-letter message."""
    event = FailureEvent.model_validate(raw_event)
    store = services.store
    message = _cause_message(event.cause) or event.error
    error = {
        "kind": kind_of(event.error),
        "error": event.error,
        "step": event.step,
        "item": event.item,
        "message": message,
    }
    step_record = store.get_step(event.job_id, event.step, event.item) or {}
    attempts = int(step_record.get("attempts", 0))
    store.put_step(event.job_id, event.step, event.item, {"status": "failed", "error": error})
    job = store.get_job(event.job_id) or {}
    try:
        store.transition(
            event.job_id,
            JobStatus.FAILED,
            event="job_failed",
            step=event.step,
            item=event.item,
            detail={**error, "attempts": attempts},
            set_fields={"error": error, "current_step": event.step},
        )
    except TransitionRejected:
        logger.warning("job already finished; failure recorded on the step only", extra={"job_id": event.job_id})
    return {
        "job_id": event.job_id,
        "tenant_id": job.get("tenant_id"),
        "workflow": event.workflow,
        "step": event.step,
        "item": event.item,
        "error": event.error,
        "kind": error["kind"],
        "message": message,
        "attempts": attempts,
        "execution": event.execution,
        "failed_at": iso(store.clock.now()),
        "replay": f"fix the cause, then replay the job from step {event.step!r}",
    }
