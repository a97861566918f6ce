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
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from longhaul.core import faults
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus
from longhaul.core.errors import (
    CancelledError,
    InternalError,
    InvalidInputError,
    LonghaulError,
    PlatformConfigurationError,
    TransientError,
)
from longhaul.core.faults import CrashFault
from longhaul.core.observability import STEP_RETRIES_METRIC, emit, logger
from longhaul.core.ports import EngineUnavailable
from longhaul.core.records import Job, Provenance, version_number
from longhaul.core.step_events import StepEvent
from longhaul.engine.context import StepContext, StepWork
from longhaul.engine.failures import sanitize
from longhaul.engine.items import item_count
from longhaul.engine.spec import StepKind, WorkflowSpec, registry
from longhaul.engine.usage import recording
from longhaul.services import Services
from longhaul.storage.jobs import TransitionRejected

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
CHECKPOINT_VERSION = 1
# A job's version is recorded by its execution's first step, before it moves the job to running.
RECORDS_VERSION = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.RETRYING)


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
    raw_event: Mapping[str, Any],
    services: Services,
    *,
    work: StepWork | None = None,
    spec: WorkflowSpec | None = None,
) -> dict[str, Any]:
    """Run one step (or fan-out item) of the event's own workflow (`spec` defaults to the registry's) with its domain
    function (`work` defaults to the spec's). Whatever the outcome, the invocation's usage is added to the job's
    cost (`longhaul.engine.usage.recording`)."""
    with recording(services, raw_event):
        return _run_step(raw_event, services, work=work, spec=spec)


def _run_step(
    raw_event: Mapping[str, Any],
    services: Services,
    *,
    work: StepWork | None,
    spec: WorkflowSpec | None,
) -> dict[str, Any]:
    event = StepEvent.model_validate(raw_event)
    spec = spec or registry()[event.input.workflow]
    work = work or spec.work(event.step)
    jobs, checkpoints = services.jobs, services.checkpoints
    job_id, step, item = event.input.job_id, event.step, event.item
    job = _live_job(services, job_id, step, item)
    provenance = _provenance(services, event, job)
    agent = spec.step(step).kind == StepKind.AGENT  # its item is a turn of the loop, not a fan-out's item
    version = input_version(event)
    checkpoint = checkpoints.get_step(job_id, step, item)
    if checkpoint and checkpoint.succeeded and checkpoint.input_version == version:
        logger.info("valid checkpoint; step skipped", extra={"job_id": job_id, "step": step, "item": item})
        output = dict(checkpoint.output or {})
        if item is None and step == spec.last_step:  # committed, but the job may not have completed (crash between)
            _guarded(lambda: _complete(services, spec, job_id, step, output), step=step, item=item)
        elif item is not None and agent:  # committed, but the agent's end may not have been recorded (idempotent)
            _guarded(lambda: _agent_progress(services, spec, event, item, output), step=step, item=item)
        elif item is not None:  # committed, but its attempt may have ended before counting it (idempotent)
            _guarded(lambda: _item_progress(services, spec, event, item), step=step, item=item)
        return output

    def begin() -> None:
        _enter_running(services, job_id, job.status, step)
        checkpoints.put_step(
            job_id, step, item, {"status": "running", "started_at": iso(services.now()), "input_version": version}
        )
        jobs.append_event(job_id, "step_started", step=step, item=item, attempt=event.attempt + 1)
        progress = {"progress": _progress(spec, step, done=False, turn=item if agent else None)}
        jobs.update_job(job_id, {"current_step": step, **(progress if item is None or agent else {})})

    _guarded(begin, step=step, item=item)
    started = time.monotonic()
    try:
        faults.active().check(step, item)
        ctx = StepContext(event, services, job_attempt=job.attempts, job=job, provenance=provenance)
        output = work(ctx)
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
            "finished_at": iso(services.now()),
            "output": output,
            "input_version": version,
            "checkpoint_version": CHECKPOINT_VERSION,
            "error": None,
            # what produced the output: the code and workflow versions; route, provider, model, prompt version and
            # hash and usage of each model call
            **provenance.model_dump(),
            "model_calls": ctx.model_calls or None,
        }
        try:  # conditional on the job still running: a step of a cancelled job never commits
            checkpoints.commit_step(job_id, step, item, checkpoint)
        except TransitionRejected as stopped:
            raise CancelledError(str(stopped), step=step, item=item) from None
        duration_ms = int((time.monotonic() - started) * 1000)
        jobs.append_event(
            job_id,
            "step_finished",
            step=step,
            item=item,
            attempt=event.attempt + 1,
            detail={"duration_ms": duration_ms},
        )
        emit("StepDuration", duration_ms, MetricUnit.Milliseconds, workflow=event.input.workflow, step=step)
        if item is None and step == spec.last_step:
            _complete(services, spec, job_id, step, output)
        elif item is None:
            jobs.update_job(job_id, {"progress": _progress(spec, step, done=True)})
        elif agent:
            _agent_progress(services, spec, event, item, output)
        else:
            _item_progress(services, spec, event, item)

    _guarded(commit, step=step, item=item)
    return output


def _provenance(services: Services, event: StepEvent, job: Job) -> Provenance:
    """The code version (this function's) and the workflow version its job runs. The first step of an execution
    learns the latter from the engine and records it on the job; every later step reads it there."""
    version = job.state_machine_version
    if version is None and event.execution:
        try:
            version = services.engine.version_of(event.execution)
        except EngineUnavailable:
            logger.warning("the execution's version is unknown", extra={"job_id": job.job_id})
        if version is not None:
            services.jobs.update_job(job.job_id, {"state_machine_version": version}, only_if=RECORDS_VERSION)
    return Provenance(code_version=services.settings.code_version, workflow_version=version_number(version))


def _guarded(action: Callable[[], None], *, step: str, item: int | None) -> None:
    """Run bookkeeping so that its failures reach the state machine as typed errors."""
    try:
        action()
    except (LonghaulError, CrashFault):
        raise
    except Exception as error:
        raise classify(error, step=step, item=item) from error


def _live_job(services: Services, job_id: str, step: str, item: int | None) -> Job:
    """The job, if a step may start: not finished, not being cancelled, not past its deadline."""
    job = services.jobs.get_job(job_id)
    if job is None:
        raise InvalidInputError(f"job {job_id} does not exist", step=step, item=item)
    if job.status in TERMINAL_STATUSES or job.status == JobStatus.CANCEL_REQUESTED:
        raise CancelledError(f"job {job_id} is {job.status.value}; step not started", step=step, item=item)
    if job.deadline_at and services.now() > job.deadline_at:
        deadline = iso(job.deadline_at)
        with contextlib.suppress(TransitionRejected):
            services.jobs.transition(
                job_id, JobStatus.EXPIRED, event="job_expired", step=step, item=item, detail={"deadline_at": deadline}
            )
        raise CancelledError(f"job {job_id} passed its deadline {deadline}", step=step, item=item)
    return job


def _complete(services: Services, spec: WorkflowSpec, job_id: str, step: str, output: Mapping[str, Any]) -> None:
    """The last step's output carries the result reference; the job completes with it."""
    total = len(spec.steps)
    try:
        services.jobs.transition(
            job_id,
            JobStatus.COMPLETED,
            event="job_completed",
            step=step,
            set_fields={
                "result_key": output["result_key"],
                "current_step": None,
                "error": None,
                "progress": {"completed": total, "total": total, "unit": "steps", "message": "completed"},
            },
            allowed_from=[JobStatus.RUNNING, JobStatus.RETRYING],
        )
    except TransitionRejected as rejected:
        raise CancelledError(f"job {job_id} can no longer complete: {rejected}", step=step) from None
    emit("JobsCompleted", workflow=spec.name)
    # Its dead letters, if any, went when an operator replayed it (`operations.replay`): only the operator path may
    # read and delete dead letters, so a step's role has no access to the dead-letter queues.


#: How AWS refuses a call the caller's policies do not allow (S3 and query APIs; JSON APIs).
ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException"})


def classify(error: Exception, *, step: str, item: int | None) -> LonghaulError:
    if isinstance(error, LonghaulError):
        return error
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code in ACCESS_DENIED_CODES:  # a grant the deployment lacks: its fault, never retried
            return PlatformConfigurationError(
                f"AWS {code}: this step's role may not call {error.operation_name}", step=step, item=item
            )
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
        services.jobs.transition(job_id, JobStatus.RUNNING, event=event, step=step)
    except TransitionRejected:
        # Another item moved it first (a Map), or it was cancelled meanwhile: re-check the latter.
        job = services.jobs.get_job(job_id)
        if job is None or job.status not in (JobStatus.RUNNING, JobStatus.RETRYING):
            raise CancelledError(f"job {job_id} is no longer running", step=step) from None


def _record_attempt_failure(services: Services, event: StepEvent, error: LonghaulError) -> None:
    jobs, job_id = services.jobs, event.input.job_id
    detail = {
        "error": type(error).__name__,
        "kind": error.kind,
        "message": sanitize(error.message),
        "will_retry": error.retryable,
    }
    services.checkpoints.put_step(
        job_id, event.step, event.item, {"status": "retrying" if error.retryable else "failed", "error": detail}
    )
    jobs.append_event(
        job_id, "step_attempt_failed", step=event.step, item=event.item, attempt=event.attempt + 1, detail=detail
    )
    emit("StepAttemptFailed", workflow=event.input.workflow, step=event.step, kind=error.kind)
    if error.retryable:
        emit(STEP_RETRIES_METRIC, workflow=event.input.workflow, step=event.step)
        with contextlib.suppress(TransitionRejected):
            jobs.transition(
                job_id,
                JobStatus.RETRYING,
                event="job_retrying",
                step=event.step,
                item=event.item,
                allowed_from=[JobStatus.RUNNING],
            )


def _item_progress(services: Services, spec: WorkflowSpec, event: StepEvent, item: int) -> None:
    """A fan-out's progress in its own unit ("parse_documents: 312 of 1,000 documents"): the count of its committed
    items (atomic and idempotent, see `CheckpointStore.count_item`) of its list's count."""
    over = spec.step(event.step).over
    producer, _, field = (over or "").partition(".")
    total = item_count((event.input.steps.get(producer) or {}).get(field))
    if total is None:
        return
    completed = services.checkpoints.count_item(event.input.job_id, event.step, item)
    unit = plural(spec.step(event.step).item_unit, total)
    message = f"{event.step}: {completed:,} of {total:,} {unit}"
    progress = {
        "completed": completed,
        "total": total,
        "unit": plural(spec.step(event.step).item_unit),
        "message": message,
    }
    services.jobs.show_item_progress(event.input.job_id, event.step, progress)


def _agent_progress(
    services: Services, spec: WorkflowSpec, event: StepEvent, turn: int, output: Mapping[str, Any]
) -> None:
    """After an agent's turn: when it was the last, the step's own checkpoint (its output, once) and
    `step_finished`; a replay from a later step then finds the agent done without running a turn."""
    if output.get("next") != "done":
        return
    job_id, step = event.input.job_id, event.step
    done = services.checkpoints.get_step(job_id, step, None)
    if done is not None and done.succeeded:
        return
    checkpoint = {
        "status": "succeeded",
        "finished_at": iso(services.now()),
        "output": dict(output),
        "input_version": input_version(event.model_copy(update={"item": None, "ref": None})),
        "checkpoint_version": CHECKPOINT_VERSION,
        "error": None,
    }
    try:
        services.checkpoints.commit_step(job_id, step, None, checkpoint)
    except TransitionRejected as stopped:
        raise CancelledError(str(stopped), step=step, item=turn) from None
    services.jobs.append_event(
        job_id, "step_finished", step=step, attempt=event.attempt + 1, detail={"turns": turn + 1, **output}
    )
    services.jobs.update_job(job_id, {"progress": _progress(spec, step, done=True)})


def plural(unit: str, count: int = 2) -> str:
    """ "document" → "documents", "passage group" → "passage groups", "page batch" → "page batches"."""
    if count == 1:
        return unit
    return f"{unit}es" if unit.endswith(("s", "sh", "ch", "x")) else f"{unit}s"


def _progress(spec: WorkflowSpec, step: str, *, done: bool, turn: int | None = None) -> dict[str, Any]:
    names = spec.step_names
    index = names.index(step) if step in names else 0
    completed = index + 1 if done else index
    message = f"{step} finished" if done else f"{step} running" if turn is None else f"{step}: turn {turn + 1}"
    return {"completed": completed, "total": len(names), "unit": "steps", "message": message}
