"""The step runner: what every step does around its work, so the steps themselves stay pure.

Before: the job must be live; a valid checkpoint for this (step, item) means the work is already done.
Then: status → running, step record, `step_started` event, fault hook, the work, checkpoint, `step_finished`.
A typed failure is recorded (`step_attempt_failed`) and re-raised: its class name is the ASL error name that
the state machine's Retry and Catch match. Unknown exceptions become `InternalError` (never retried).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, Field

from longhaul import faults, operations
from longhaul.clock import iso
from longhaul.contracts import TERMINAL_STATUSES, DeadLetter, JobStatus
from longhaul.errors import (
    ITEMS_FAILED,
    CancelledError,
    InternalError,
    InvalidInputError,
    LonghaulError,
    TransientError,
    kind_of,
)
from longhaul.faults import CrashFault
from longhaul.llm.port import Usage
from longhaul.observability import emit, logger
from longhaul.settings import environ
from longhaul.store import TransitionRejected
from longhaul.wiring import Services

# AWS error codes worth another attempt: throttling, and DynamoDB transactions that met a concurrent writer.
TRANSIENT_CODES = {
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "SlowDown",
    "TransactionConflictException",
    "TransactionInProgressException",
    "TransactionCanceledException",
}
MESSAGE_LIMIT = 500
CHECKPOINT_VERSION = 1


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
    job_attempt: int = 1

    @property
    def job_id(self) -> str:
        return self.event.input.job_id

    @property
    def state(self) -> WorkflowState:
        return self.event.input

    def output_of(self, step: str) -> dict[str, Any]:
        return self.event.input.steps[step]

    def charge(self, usage: Usage) -> None:
        """Charge a model call to the job once per (job attempt, step, item): retries never charge twice."""
        item = "" if self.event.item is None else str(self.event.item)
        self.services.store.charge(
            self.job_id,
            f"{self.job_attempt}/{self.event.step}/{item}",
            {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        )


StepWork = Callable[[StepContext], dict[str, Any]]


def input_version(event: StepEvent) -> str:
    """What the step's output depends on: its item reference and every earlier step's output references."""
    basis = {
        "step": event.step,
        "item": event.item,
        "ref": event.ref,
        "input_key": event.input.input_key,
        "steps": event.input.steps,
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:32]


def run_step(
    raw_event: Mapping[str, Any], work: StepWork, services: Services, *, steps: Sequence[str]
) -> dict[str, Any]:
    event = StepEvent.model_validate(raw_event)
    store, job_id, step, item = services.store, event.input.job_id, event.step, event.item
    job = _live_job(services, job_id, step, item)
    version = input_version(event)
    checkpoint = store.get_step(job_id, step, item)
    if checkpoint and checkpoint.get("status") == "succeeded" and checkpoint.get("input_version") == version:
        logger.info("valid checkpoint; step skipped", extra={"job_id": job_id, "step": step, "item": item})
        output = dict(checkpoint.get("output") or {})
        if item is None and step == steps[-1]:  # committed, but the job may not have completed (a crash between)
            _guarded(
                lambda: _complete(services, event.input.workflow, job_id, step, output, steps), step=step, item=item
            )
        return output

    def begin() -> None:
        _enter_running(services, job_id, JobStatus(job["status"]), step)
        store.put_step(
            job_id, step, item, {"status": "running", "started_at": iso(store.clock.now()), "input_version": version}
        )
        store.append_event(job_id, "step_started", step=step, item=item, attempt=event.attempt + 1)
        progress = {"progress": _progress(steps, step, done=False)} if item is None else {}
        store.update_job(job_id, {"current_step": step, **progress})

    _guarded(begin, step=step, item=item)
    started = time.monotonic()
    try:
        faults.active().check(step, item)
        output = work(StepContext(event, services, job_attempt=int(job.get("attempts") or 1)))
        faults.active().crash_point(step, item)
    except CancelledError:
        raise  # the job was stopped: nothing to record, nothing to commit
    except Exception as error:
        typed = classify(error, step=step, item=item)
        _record_attempt_failure(services, event, typed)
        if typed is error:
            raise
        raise typed from error

    def commit() -> None:
        checkpoint = {
            "status": "succeeded",
            "finished_at": iso(store.clock.now()),
            "output": output,
            "input_version": version,
            "checkpoint_version": CHECKPOINT_VERSION,
            "error": None,
        }
        try:  # conditional on the job still running: a step of a cancelled job never commits
            store.commit_step(job_id, step, item, checkpoint)
        except TransitionRejected as stopped:
            raise CancelledError(str(stopped), step=step, item=item) from None
        duration_ms = int((time.monotonic() - started) * 1000)
        store.append_event(
            job_id,
            "step_finished",
            step=step,
            item=item,
            attempt=event.attempt + 1,
            detail={"duration_ms": duration_ms},
        )
        emit("StepDuration", duration_ms, MetricUnit.Milliseconds, workflow=event.input.workflow, step=step)
        if item is None and step == steps[-1]:
            _complete(services, event.input.workflow, job_id, step, output, steps)
        elif item is None:
            store.update_job(job_id, {"progress": _progress(steps, step, done=True)})

    _guarded(commit, step=step, item=item)
    return output


def _guarded(action: Callable[[], None], *, step: str, item: int | None) -> None:
    """Run bookkeeping so that its failures reach the state machine as typed errors."""
    try:
        action()
    except (LonghaulError, CrashFault):
        raise
    except Exception as error:
        raise classify(error, step=step, item=item) from error


def _live_job(services: Services, job_id: str, step: str, item: int | None) -> dict[str, Any]:
    """The job, if a step may start: not finished, not being cancelled, not past its deadline."""
    job = services.store.get_job(job_id)
    if job is None:
        raise InvalidInputError(f"job {job_id} does not exist", step=step, item=item)
    status = JobStatus(job["status"])
    if status in TERMINAL_STATUSES or status == JobStatus.CANCEL_REQUESTED:
        raise CancelledError(f"job {job_id} is {status.value}; step not started", step=step, item=item)
    deadline = job.get("deadline_at")
    if deadline and services.store.clock.now() > datetime.fromisoformat(deadline.replace("Z", "+00:00")):
        with contextlib.suppress(TransitionRejected):
            services.store.transition(
                job_id, JobStatus.EXPIRED, event="job_expired", step=step, item=item, detail={"deadline_at": deadline}
            )
        raise CancelledError(f"job {job_id} passed its deadline {deadline}", step=step, item=item)
    return job


def _complete(
    services: Services, workflow: str, job_id: str, step: str, output: Mapping[str, Any], steps: Sequence[str]
) -> None:
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
                "error": None,
                "progress": {"completed": len(steps), "total": len(steps), "unit": "steps", "message": "completed"},
            },
            allowed_from=[JobStatus.RUNNING, JobStatus.RETRYING],
        )
    except TransitionRejected as rejected:
        raise CancelledError(f"job {job_id} can no longer complete: {rejected}", step=step) from None
    emit("JobsCompleted", workflow=workflow)
    if services.store.dead_letters(job_id):
        try:  # best effort: the job has completed whatever happens here
            operations.purge_dead_letters(services, job_id)
        except Exception:
            logger.exception("dead letters of a completed job were not all removed", extra={"job_id": job_id})


def classify(error: Exception, *, step: str, item: int | None) -> LonghaulError:
    if isinstance(error, LonghaulError):
        return error
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code in TRANSIENT_CODES or error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
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
    try:
        services.store.transition(job_id, JobStatus.RUNNING, event=event, step=step)
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
    emit("StepAttemptFailed", workflow=event.input.workflow, step=event.step, kind=error.kind)
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


def _progress(steps: Sequence[str], step: str, *, done: bool) -> dict[str, Any]:
    index = steps.index(step) if step in steps else 0
    completed = index + 1 if done else index
    message = f"{step} finished" if done else f"{step} running"
    return {"completed": completed, "total": len(steps), "unit": "steps", "message": message}


def sanitize(message: str) -> str:
    """One line, bounded, no stack traces (a traceback is reduced to its last line)."""
    text = str(message)
    if "Traceback (most recent call last)" in text:
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        text = lines[-1] if lines else ""
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


# ---------------------------------------------------------------------- failure recorder


#: The ASL names of a timeout: the Task's own (`TimeoutSeconds`) and the function's, as Lambda reports it.
TASK_TIMEOUT = "States.Timeout"
FUNCTION_TIMEOUT = "Sandbox.Timedout"


class StepLimits(BaseModel):
    """What the house policy gave the failed Task, passed by the state machine so a failure can be told plainly.

    The execution reports a timeout as a bare `States.Timeout`, and a step that timed out never got to count its
    attempt (locally a `hang` never even starts the handler): only the policy knows how many attempts it was.
    """

    task_timeout_seconds: int
    function_timeout_seconds: int
    timeout_attempts: int = Field(description="Attempts a step gets when every one of them times out.")


class FailureEvent(BaseModel):
    job_id: str
    step: str
    workflow: str
    error: str
    cause: str | None = None
    execution: str | None = None
    item: int | None = None
    limits: StepLimits | None = None


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
    """Record a failure and return the dead-letter message (also kept in the table for operators).

    A fan-out item's failure marks only the item (the other items go on); the job fails once after the fan-out,
    with `ItemsFailed` summarising its failed items. Any other failure marks the step and the job failed.
    """
    event = FailureEvent.model_validate(raw_event)
    store = services.store
    if event.error == ITEMS_FAILED:
        error, attempts = _items_failed(services, event)
    else:
        started = int((store.get_step(event.job_id, event.step, event.item) or {}).get("attempts", 0))
        attempts, message = _attempts_and_message(event, started)
        error = {"kind": kind_of(event.error), "error": event.error, "step": event.step, "item": event.item}
        error["message"] = message
        store.put_step(event.job_id, event.step, event.item, {"status": "failed", "error": error, "attempts": attempts})
    job = store.get_job(event.job_id) or {}
    if event.item is not None:
        store.append_event(event.job_id, "item_failed", step=event.step, item=event.item, detail=error)
    else:
        try:
            store.transition(
                event.job_id,
                JobStatus.FAILED,
                event="job_failed",
                step=event.step,
                item=error.get("item"),
                detail={**error, "attempts": attempts},
                set_fields={"error": error, "current_step": event.step},
            )
            emit("JobsFailed", workflow=event.workflow, step=event.step, kind=str(error["kind"]))
        except TransitionRejected:
            logger.warning("job already finished; failure recorded on the step only", extra={"job_id": event.job_id})
    dead_letter = DeadLetter(
        job_id=event.job_id,
        tenant_id=job.get("tenant_id"),
        workflow=event.workflow,
        step=event.step,
        item=event.item,
        error=error["error"],
        kind=error["kind"],
        message=error["message"],
        attempts=attempts,
        execution=event.execution,
        trace_id=environ().get("_X_AMZN_TRACE_ID") or event.execution,
        failed_at=store.clock.now(),
        replay={
            "method": "POST",
            "path": f"/v1/ops/jobs/{event.job_id}/replay",
            "body": {"from_step": event.step, "reason": "<why the replay will succeed now>"},
        },
    ).model_dump(mode="json")
    if event.error != ITEMS_FAILED:  # the summary of a fan-out sends no dead letter of its own
        store.put_dead_letter(dead_letter)
    return dead_letter


def _attempts_and_message(event: FailureEvent, started: int) -> tuple[int, str]:
    """How many attempts the step had and what went wrong, in words (`started`: attempts its handler began).

    A timeout that ends in the Catch has exhausted its retrier: exactly `timeout_attempts` attempts timed out
    (earlier attempts may have failed otherwise). Any failure means at least one attempt.
    """
    limits = event.limits
    if event.error in (TASK_TIMEOUT, FUNCTION_TIMEOUT) and limits is not None:
        timed_out = limits.timeout_attempts
        attempts = max(started, timed_out)
        if event.error == TASK_TIMEOUT:
            what = f"timed out after {limits.task_timeout_seconds} s"
        else:
            what = f"the function timed out after {limits.function_timeout_seconds} s"
        on = f"each of {timed_out} attempts" if attempts == timed_out else f"{timed_out} of {attempts} attempts"
        return attempts, f"{what} on {on}"
    return max(started, 1), _cause_message(event.cause) or event.error


def _items_failed(services: Services, event: FailureEvent) -> tuple[dict[str, Any], int]:
    items = [r for r in services.store.steps(event.job_id) if r["step"] == event.step and r.get("item") is not None]
    failed = sorted((r for r in items if r.get("status") == "failed"), key=lambda r: int(r["item"]))
    first = (failed[0].get("error") if failed else None) or {}
    numbers = [int(r["item"]) for r in failed]
    error = {
        "kind": first.get("kind", "internal"),
        "error": first.get("error", ITEMS_FAILED),
        "step": event.step,
        "item": numbers[0] if numbers else None,
        "items": numbers,
        "message": sanitize(
            f"{len(failed)} of {len(items)} items failed (items {numbers}); first: {first.get('message', 'unknown')}"
        ),
    }
    return error, max((int(r.get("attempts", 0)) for r in failed), default=0)
