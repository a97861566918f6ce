"""The step runner: what every step does around its work, so the steps themselves stay pure.

Before: the job must be live; a valid checkpoint for this (step, item) means the work is already done.
Then: status → running, step record, `step_started` event, fault hook, the work, checkpoint, `step_finished`.
Its bookkeeping is three DynamoDB requests on the happy path: one read (the job and the step's record), one
transaction to start, one to commit (with its event, the job's progress and the invocation's usage; the last step's
completes the job). A fan-out's item counts itself into a set on the job (an ADD: no read-modify-write) and
reserves its events' numbers (one more request, `JobStore.reserve_events`) instead of conditioning on the job's event
counter: its siblings move that counter all the time, and optimistic retries collapsed under a wide fan-out.
A typed failure is recorded (`step_attempt_failed`) and re-raised: its class name is the ASL error name that
the state machine's Retry and Catch match. Unknown exceptions become `InternalError` (never retried).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from longhaul.core import faults, limits, tracing
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus, Progress, WaitReason, WaitState
from longhaul.core.errors import (
    CancelledError,
    InternalError,
    InvalidInputError,
    JobPaused,
    LonghaulError,
    PlatformConfigurationError,
    RateLimitedError,
    TransientError,
    UpstreamUnavailableError,
)
from longhaul.core.faults import CrashFault
from longhaul.core.metering import Metered
from longhaul.core.observability import STEP_RETRIES_METRIC, emit, logger
from longhaul.core.ports import EngineUnavailable
from longhaul.core.records import FAN_OUT_UNIT, FanOut, Job, Provenance, StepRecord, version_number
from longhaul.core.step_events import StepEvent
from longhaul.engine.context import PROVISIONAL_KEY, ItemGroup, StepContext, StepWork
from longhaul.engine.failures import sanitize
from longhaul.engine.items import item_count
from longhaul.engine.spec import ITEM_KINDS, StepKind, WorkflowSpec, registry
from longhaul.engine.usage import Slip, recording
from longhaul.services import Services
from longhaul.storage.checkpoints import done_attribute
from longhaul.storage.dynamo import Cancelled, backoff
from longhaul.storage.history import entry_of
from longhaul.storage.jobs import ACTIVE, COMMITTABLE, NewEvent, TransitionRejected
from longhaul.storage.outbox import PROVISIONAL_EVENT

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
# A grouped fan-out's items after the group's first commit together, this many per transaction: each brings its
# checkpoint and two events (DynamoDB's TransactWriteItems takes 100 actions; the job's update is one more).
GROUP_COMMIT_ITEMS = 30
# Optimistic tries of a step's start or commit transaction when the job changed meanwhile (a fan-out's items start
# and commit concurrently, each taking the next event numbers).
BOOKKEEPING_TRIES = 25
T = TypeVar("T")


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
    with _step_span(raw_event), recording(services, _job_id(raw_event)) as slip:
        return _run_step(raw_event, services, work=work, spec=spec, slip=slip)


def _job_id(raw_event: Mapping[str, Any]) -> object:
    state = raw_event.get("input")
    return state.get("job_id") if isinstance(state, Mapping) else None


def _step_span(raw_event: Mapping[str, Any]) -> Any:
    """The span of one step's (or item's) attempt: step, item, attempt (1-based), the workflow's version."""
    state = raw_event.get("input") or {}
    attempt = raw_event.get("attempt")
    return tracing.span(
        f"step {raw_event.get('step')}",
        {
            tracing.JOB_ID: state.get("job_id"),
            tracing.WORKFLOW: state.get("workflow"),
            tracing.WORKFLOW_VERSION: state.get("workflow_version") or raw_event.get("workflow_version"),
            tracing.STEP: raw_event.get("step"),
            tracing.ITEM: raw_event.get("item"),
            tracing.ATTEMPT: attempt + 1 if isinstance(attempt, int) else None,
        },
    )


@dataclass(frozen=True)
class _InGroup:
    """An item as `run_group` runs it: the job and the item's record as the group read them (one read for the
    group), and whether it is the group's first (which counts the invocation and marks its item running, with the
    fan-out's progress on the job; the others' commits count their attempts and record their start)."""

    job: Job | None
    record: StepRecord | None
    first: bool
    group: ItemGroup | None = None
    pending: list[_Pending] | None = None  # where an item not marked running leaves its commit for the group's


@dataclass(frozen=True)
class _Pending:
    """A grouped item's commit, left for the group to write with its siblings' (`_commit_pending`)."""

    event: StepEvent
    checkpoint: dict[str, Any]
    duration_ms: int
    started_at: str
    usage: Metered


def run_group(
    raw_event: Mapping[str, Any],
    services: Services,
    *,
    work: StepWork | None = None,
    spec: WorkflowSpec | None = None,
) -> dict[str, Any]:
    """Run a grouped fan-out's group (`StepEvent.items`): each item in order, exactly as `run_step` runs one item
    (its own checkpoint, usage, fault index, recorded failure); their work sees the group (`StepContext.group`), so
    what the group reads and writes can be one request for all its items. An item's failure does not stop the others;
    after the last, the group fails with the first retryable failure (the state machine retries the group: its
    committed items are skipped then) or else the first failure (its recorder tells the group's items apart). A stopped
    job stops the group at once."""
    event = StepEvent.model_validate(raw_event)
    items = event.items or []
    job_id, step = event.input.job_id, event.step
    try:
        job, records = services.checkpoints.read_items(job_id, step, [item.index for item in items])
    except Exception as error:
        raise classify(error, step=step, item=None) from error
    failures: list[LonghaulError] = []
    committed = 0
    group = ItemGroup(items=list(items))
    pending: list[_Pending] = []
    for position, item in enumerate(items):
        one = {**raw_event, "item": item.index, "ref": item.ref, "items": None}
        grouped = _InGroup(job, records.get(item.index), first=position == 0, group=group, pending=pending)
        try:
            with _step_span(one), recording(services, job_id, invocation=grouped.first) as slip:
                _run_step(one, services, work=work, spec=spec, slip=slip, grouped=grouped)
            committed += 1
        except JobPaused:
            _commit_pending(services, event, job, pending)  # what ran before the pause is kept
            raise  # its re-entry skips what committed
        except CancelledError:
            raise  # a stopped job stops the group at once
        except LonghaulError as error:
            failures.append(error)
        if len(pending) >= GROUP_COMMIT_ITEMS:
            _commit_pending(services, event, job, pending)
    _commit_pending(services, event, job, pending)
    if failures:
        raise next((error for error in failures if error.retryable), failures[0])
    return {"committed": committed}


def _run_step(
    raw_event: Mapping[str, Any],
    services: Services,
    *,
    work: StepWork | None,
    spec: WorkflowSpec | None,
    slip: Slip,
    grouped: _InGroup | None = None,
) -> dict[str, Any]:
    event = StepEvent.model_validate(raw_event)
    spec = spec or registry()[event.input.workflow]
    work = _skipped if event.skipped else (work or spec.work(event.step))
    job_id, step, item = event.input.job_id, event.step, event.item
    agent = spec.step(step).kind == StepKind.AGENT  # its item is a turn of the loop, not a fan-out's item
    if grouped is None:
        found, checkpoint = _read(services, job_id, step, item)
    else:
        found, checkpoint = grouped.job, grouped.record
    job = _live_job(services, found, job_id, step, item)
    # A group's items run in one invocation: each item's lines name it; every line names the workflow version.
    logger.append_keys(item=item, workflow_version=version_number(job.state_machine_version))
    version = input_version(event)
    if checkpoint and checkpoint.succeeded and checkpoint.input_version == version:
        logger.info("valid checkpoint; step skipped", extra={"job_id": job_id, "step": step, "item": item})
        output = dict(checkpoint.output or {})
        if job.status == JobStatus.QUEUED:  # a replay's execution began: it runs, though it reuses this step
            _guarded(lambda: _started_on_checkpoint(services, job_id, step, item), step=step, item=item)
        if item is None and step == spec.last_step:  # committed, but the job may not have completed (crash between)
            _guarded(lambda: _complete(services, spec, job_id, step, output), step=step, item=item)
        elif item is not None and agent:  # committed, but the agent's end may not have been recorded (idempotent)
            _guarded(lambda: _agent_progress(services, spec, event, item, output), step=step, item=item)
        return output

    provenance, recorded = _provenance(services, event, job)
    logger.append_keys(workflow_version=provenance.workflow_version)  # the first step learns it from the engine
    # A fan-out's items start together: each records its start with its commit (or its failure), not by moving the
    # job's event counter under its siblings (a job that must move to running first records it now). Not when the
    # step calls a model: its calls are recorded as they happen, and the log orders them after their item's start
    # (which items started after a budget refusal is read from that order).
    this = spec.step(step)
    deferred = this.kind == StepKind.FAN_OUT and not this.calls_model and job.status == JobStatus.RUNNING
    # A group's items after its first are not marked running: their commit (or failure) counts the attempt.
    unmarked = deferred and grouped is not None and not grouped.first and not recorded
    started_at = iso(services.now())
    try:
        if not unmarked:
            job = _guarded(
                lambda: _begin(services, spec, event, job, version, recorded, agent=agent, deferred=deferred),
                step=step,
                item=item,
            )
    except _CommittedMeanwhile as done:
        logger.info("committed by a concurrent delivery; step skipped", extra={"job_id": job_id, "step": step})
        return done.output
    started = time.monotonic()
    try:
        faults.active().slow_point(step, item, job_id=job_id)
        faults.active().check(step, item, job_id=job_id)
        ctx = StepContext(
            event,
            services,
            job_attempt=job.attempts,
            job=job,
            provenance=provenance,
            group=grouped.group if grouped is not None else None,
        )
        output = work(ctx)
        faults.active().crash_point(step, item, job_id=job_id)
    except CancelledError:
        raise  # the job was stopped: nothing to record, nothing to commit
    except Exception as error:
        typed = classify(error, step=step, item=item)
        _record_attempt_failure(
            services, event, typed, started_at=started_at if deferred else None, count_attempt=unmarked
        )
        if typed is error:
            raise
        raise typed from error

    # A review step that opened its review waits for the decision: its record says so, and is no checkpoint (the
    # decision's is, `review.lane`); a replay re-enters it.
    # A signal step that opened its wait likewise: its checkpoint is written when it consumes the signal (or learns
    # that none came).
    waiting = this.kind in (StepKind.REVIEW, StepKind.SIGNAL) and output.get("next") == "wait"
    checkpoint_fields = {
        "status": "waiting" if waiting else "skipped" if event.skipped else "succeeded",
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
    duration_ms = int((time.monotonic() - started) * 1000)
    deferred_at = started_at if deferred else None
    if unmarked:
        checkpoint_fields["started_at"] = started_at
    if unmarked and grouped is not None and grouped.pending is not None:
        # the group commits it with its siblings' (one transaction for up to GROUP_COMMIT_ITEMS items)
        grouped.pending.append(_Pending(event, checkpoint_fields, duration_ms, started_at, slip.usage()))
        slip.settled = True
        return output
    _guarded(
        lambda: _commit(
            services,
            spec,
            event,
            job,
            checkpoint_fields,
            duration_ms,
            slip,
            agent=agent,
            started_at=deferred_at,
            count_attempt=unmarked,
        ),
        step=step,
        item=item,
    )
    emit("StepDuration", duration_ms, MetricUnit.Milliseconds, workflow=event.input.workflow, step=step)
    if item is None and step == spec.last_step:
        emit("JobsCompleted", workflow=spec.name)
        record_history(services, spec, job_id)
        # Its dead letters, if any, went when an operator replayed it (`operations.replay`): only the operator path
        # may read and delete dead letters, so a step's role has no access to the dead-letter queues.
    elif agent and item is not None:
        _guarded(lambda: _agent_progress(services, spec, event, item, output), step=step, item=item)
    return output


def _read(services: Services, job_id: str, step: str, item: int | None) -> tuple[Job | None, StepRecord | None]:
    try:
        return services.checkpoints.read(job_id, step, item)
    except (LonghaulError, CrashFault):
        raise
    except Exception as error:
        raise classify(error, step=step, item=item) from error


def _begin(
    services: Services,
    spec: WorkflowSpec,
    event: StepEvent,
    job: Job,
    version: str,
    recorded: Mapping[str, Any],
    *,
    agent: bool,
    deferred: bool = False,
) -> Job:
    """One transaction: the job running (if it was not), `step_started` (unless `deferred` to the commit), the step's
    record running, its progress."""
    job_id, step, item = event.input.job_id, event.step, event.item
    running = services.checkpoints.running_write(
        job_id, step, item, {"started_at": iso(services.now()), "input_version": version}
    )
    # A step starting: the job waits on nothing any more; a step it was not in before starts its clock (the ETA's).
    fields: dict[str, Any] = {"current_step": step, "wait_state": None, **recorded}
    if job.current_step != step or item is None:
        fields["step_started_at"] = iso(services.now())
    if item is None or agent:
        fields["progress"] = _progress(spec, step, done=False, turn=item if agent else None)
    else:
        fields.update(_fan_out_fields(spec, event))
    sibling = item is not None and not agent  # a fan-out's item: its siblings write alike (see `_commit`)
    for tries in range(BOOKKEEPING_TRIES):
        events = [] if deferred else [NewEvent("step_started", step=step, item=item, attempt=event.attempt + 1)]
        entering = job.status != JobStatus.RUNNING
        if entering:
            name = {JobStatus.QUEUED: "job_started", JobStatus.RETRYING: "job_resumed"}.get(job.status, "job_running")
            events.insert(0, NewEvent(name, step=step, item=item))
        try:
            return services.jobs.write(
                job,
                events,
                to=JobStatus.RUNNING if entering else None,
                fields=fields,
                items=[running],
                reserve=sibling and not entering,
            )
        except Cancelled:  # the job changed meanwhile (another item, a cancel, a concurrent delivery): read again
            backoff(tries)
            found, record = services.checkpoints.read(job_id, step, item)
            job = _live_job(services, found, job_id, step, item)
            if record is not None and record.succeeded and record.input_version == version:
                raise _CommittedMeanwhile(dict(record.output or {})) from None
    raise TransientError(f"job {job_id} kept changing; {step} not started", step=step, item=item)


class _CommittedMeanwhile(Exception):
    """A concurrent delivery of the same step (or item) committed it between this one's read and its start."""

    def __init__(self, output: dict[str, Any]) -> None:
        super().__init__("committed meanwhile")
        self.output = output


def _commit(
    services: Services,
    spec: WorkflowSpec,
    event: StepEvent,
    job: Job,
    checkpoint: Mapping[str, Any],
    duration_ms: int,
    slip: Slip,
    *,
    agent: bool,
    started_at: str | None = None,
    count_attempt: bool = False,
) -> None:
    """One transaction, conditional on the job still running (a step of a cancelled job never commits): the
    checkpoint (`count_attempt`: with its attempt), `step_finished`, the job's progress (a fan-out's item: its number
    in the step's set), the invocation's usage; the last step completes the job with its result in it."""
    job_id, step, item = event.input.job_id, event.step, event.item
    last = item is None and step == spec.last_step
    committed = services.checkpoints.committed_write(job_id, step, item, checkpoint, count_attempt=count_attempt)
    # A fan-out's item sets nothing its siblings do not set alike and adds its number to the step's set: it reserves
    # its events' numbers rather than conditioning on the job's event counter, which its siblings move all the time.
    sibling = item is not None and not agent
    if not sibling and spec.step(step).calls_model:
        # The model gateway recorded its calls while this ran: the job as it is now, or the commit would meet a moved
        # event counter and read it then anyway.
        job = services.jobs.get_job(job_id) or job
    for tries in range(BOOKKEEPING_TRIES):
        attempt = event.attempt + 1
        events = [
            *([NewEvent("step_started", step=step, item=item, attempt=attempt, at=started_at)] if started_at else []),
            NewEvent("step_finished", step=step, item=item, attempt=attempt, detail={"duration_ms": duration_ms})
            if checkpoint["status"] != "skipped"
            else NewEvent("step_skipped", step=step, attempt=attempt, detail={"when": _when(spec, step)}),
        ]
        to: JobStatus | None = None
        fields: dict[str, Any] = {}
        add: dict[str, Any] = {}
        if last:
            if job.status not in ACTIVE:
                raise CancelledError(f"job {job_id} is {job.status.value}; it can no longer complete", step=step)
            events.append(NewEvent("job_completed", step=step, records_status=True))
            to, fields = (
                JobStatus.COMPLETED,
                _completed_fields(spec, _result_output(services, spec, job_id, checkpoint)),
            )
        elif item is None:
            fields["progress"] = _progress(spec, step, done=checkpoint["status"] in ("succeeded", "skipped"))
        elif not agent:
            add[done_attribute(step)] = {item}
        announce = None
        provisional_key = (checkpoint["output"] or {}).get(PROVISIONAL_KEY)
        if not last and item is None and spec.step(step).provisional and provisional_key:
            # Its output is the job's provisional result: recorded, logged and announced with the checkpoint.
            events.append(NewEvent("provisional_result", step=step, detail={"step": step}))
            fields |= {
                "provisional_key": provisional_key,
                "provisional_step": step,
                "provisional_at": iso(services.now()),
            }
            announce = PROVISIONAL_EVENT
        try:
            services.jobs.write(
                job,
                events,
                to=to,
                fields=fields,
                add=add,
                items=[committed],
                usage=slip.usage(),
                reserve=sibling,
                only_if=COMMITTABLE if sibling else ACTIVE,  # an item under way when its job paused is kept
                announce=announce,
            )
            slip.settled = True
            return
        except Cancelled:
            backoff(tries)
            found, record = services.checkpoints.read(job_id, step, item)
            if found is None or found.status not in (COMMITTABLE if sibling else ACTIVE):
                status = found.status.value if found else "gone"
                raise CancelledError(f"job {job_id} is {status}; {step} not committed", step=step, item=item) from None
            if record is not None and record.succeeded and record.input_version == checkpoint["input_version"]:
                return  # a duplicate delivery committed it meanwhile
            job = found
    raise TransientError(f"job {job_id} kept changing; {step} not committed", step=step, item=item)


# What a reserving write's first request adds (`JobStore.reserve_events`: one update), before its transaction.
_RESERVING = Metered(dynamodb_requests=1, dynamodb_write_units=1)


def _commit_pending(services: Services, group: StepEvent, job: Job | None, pending: list[_Pending]) -> None:
    """Commit a group's pending items in one transaction (then empty `pending`), conditional on the job still
    committable, as each item's own commit would be: each item's checkpoint (with its attempt), its `step_started` and
    `step_finished`, its number in the step's set, their usage and this commit's own. An item a concurrent delivery
    committed meanwhile is left out; a job stopped meanwhile commits none (`CancelledError`). What the items used is
    recorded whatever happens."""
    if not pending:
        return
    job_id, step = group.input.job_id, group.step
    todo, pending[:] = list(pending), []
    used = sum((p.usage for p in todo), Metered())
    with recording(services, job_id, invocation=False) as slip:  # this commit's time and requests: billed too
        try:
            for tries in range(BOOKKEEPING_TRIES):
                # the job as the group read it (the write reserves its events' numbers: only its status is the
                # condition)
                if job is None or (tries and job.status not in COMMITTABLE):
                    status = job.status.value if job else "gone"
                    raise CancelledError(f"job {job_id} is {status}; {step} not committed", step=step)
                events, items = [], []
                for p in todo:
                    attempt = p.event.attempt + 1
                    events += [
                        NewEvent("step_started", step=step, item=p.event.item, attempt=attempt, at=p.started_at),
                        NewEvent(
                            "step_finished",
                            step=step,
                            item=p.event.item,
                            attempt=attempt,
                            detail={"duration_ms": p.duration_ms},
                        ),
                    ]
                    items.append(
                        services.checkpoints.committed_write(
                            job_id, step, p.event.item, p.checkpoint, count_attempt=True
                        )
                    )
                try:
                    services.jobs.write(
                        job,
                        events,
                        add={done_attribute(step): {p.event.item for p in todo}},
                        items=items,
                        usage=used + slip.usage() + _RESERVING,
                        reserve=True,
                        only_if=COMMITTABLE,
                    )
                    slip.settled, used = True, Metered()
                    break
                except Cancelled:
                    backoff(tries)
                    job, records = services.checkpoints.read_items(job_id, step, [p.event.item for p in todo])
                    todo = [p for p in todo if not _committed_as(records.get(p.event.item), p.checkpoint)]
                    if not todo:
                        return  # a concurrent delivery committed them all
            else:
                raise TransientError(f"job {job_id} kept changing; {step} not committed", step=step)
        except (LonghaulError, CrashFault):
            raise
        except Exception as error:
            raise classify(error, step=step, item=None) from error
        finally:
            if used != Metered():  # not committed: what the items used is billed all the same
                with contextlib.suppress(Exception):
                    services.usage.add(job_id, used)
    for p in todo:
        emit("StepDuration", p.duration_ms, MetricUnit.Milliseconds, workflow=group.input.workflow, step=step)


def _committed_as(record: StepRecord | None, checkpoint: Mapping[str, Any]) -> bool:
    return record is not None and record.succeeded and record.input_version == checkpoint["input_version"]


def _fan_out_fields(spec: WorkflowSpec, event: StepEvent) -> dict[str, Any]:
    """A fan-out item's progress: its step, the item count of its list and what one is (the count of committed items
    is the job's set, see `Job.shown_progress`)."""
    over = spec.step(event.step).over
    producer, _, field = (over or "").partition(".")
    total = item_count((event.input.steps.get(producer) or {}).get(field))
    if total is None:
        return {}
    unit = spec.step(event.step).item_unit
    return {
        "fan_out": FanOut(step=event.step, total=total, unit=unit).model_dump(),
        "progress": Progress(completed=0, total=total, unit=FAN_OUT_UNIT, message=f"{event.step} running").model_dump(),
    }


def _provenance(services: Services, event: StepEvent, job: Job) -> tuple[Provenance, dict[str, Any]]:
    """The code version (this function's) and the workflow version its job runs, and what the step's start records
    on the job: the first step of an execution learns the workflow version from the engine and records it; every
    later step reads it there."""
    version = job.state_machine_version
    recorded: dict[str, Any] = {}
    if version is None and event.execution:
        try:
            version = services.engine.version_of(event.execution)
        except EngineUnavailable:
            logger.warning("the execution's version is unknown", extra={"job_id": job.job_id})
        if version is not None:
            recorded["state_machine_version"] = version
    provenance = Provenance(code_version=services.settings.code_version, workflow_version=version_number(version))
    return provenance, recorded


def _guarded(action: Callable[[], T], *, step: str, item: int | None) -> T:
    """Run bookkeeping so that its failures reach the state machine as typed errors."""
    try:
        return action()
    except (LonghaulError, CrashFault, _CommittedMeanwhile):
        raise
    except Exception as error:
        raise classify(error, step=step, item=item) from error


def _started_on_checkpoint(services: Services, job_id: str, step: str, item: int | None) -> None:
    """A job whose execution starts on checkpoints (a replay) is running from its first state, not when the first
    step without one begins: `job_started` says which checkpoint it began on."""
    with contextlib.suppress(TransitionRejected):  # another item moved it first
        services.jobs.transition(
            job_id,
            JobStatus.RUNNING,
            event="job_started",
            step=step,
            item=item,
            detail={"on_checkpoint": True},
            set_fields={"current_step": step},
            allowed_from=[JobStatus.QUEUED],
        )


def _live_job(services: Services, job: Job | None, job_id: str, step: str, item: int | None) -> Job:
    """The job, if a step may start: not finished, not being cancelled, not past its deadline."""
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
    if job.status == JobStatus.PAUSED:
        raise JobPaused(f"job {job_id} is paused before {step}", step=step, item=item)
    if job.pause is not None and job.status in ACTIVE:
        return _pause(services, job, step, item)
    return job


def _pause(services: Services, job: Job, step: str, item: int | None) -> Job:
    """A pause was asked for: the job stops here, at a step boundary (`job_paused`, once: its siblings and re-entries
    find it paused) and the step raises `JobPaused`, which the state machine catches into its pause wait. Conditional
    on the job as read, which a withdrawn request moves (its event): when the resume came first, the job as it is now
    is returned and the step runs."""
    for tries in range(BOOKKEEPING_TRIES):
        if job.status == JobStatus.PAUSED:
            break  # a sibling paused it meanwhile
        if job.pause is None or job.status not in ACTIVE:
            return _live_job(services, job, job.job_id, step, item)
        pause = job.pause.model_copy(update={"paused_at": services.now(), "step": step})
        try:
            services.jobs.write(
                job,
                [
                    NewEvent(
                        "job_paused", step=step, item=item, detail={"step": step, "requested_by": pause.requested_by}
                    )
                ],
                to=JobStatus.PAUSED,
                fields={
                    "pause": pause.model_dump(mode="json"),
                    "wait_state": WaitState(
                        reason="paused",
                        detail=f"paused before {step} at the request of {pause.requested_by}",
                        step=step,
                        since=pause.paused_at,
                    ).model_dump(mode="json"),
                },
            )
            break
        except Cancelled:  # it moved meanwhile (a sibling's event, a resume): read again
            backoff(tries)
            found = services.jobs.get_job(job.job_id)
            if found is None:
                raise InvalidInputError(f"job {job.job_id} does not exist", step=step, item=item) from None
            job = found
    else:
        raise TransientError(f"job {job.job_id} kept changing; its pause before {step} not recorded", step=step)
    raise JobPaused(f"job {job.job_id} is paused before {step}", step=step, item=item)


def _skipped(ctx: StepContext) -> dict[str, Any]:
    """A step whose `when=` did not hold: nothing runs; its output says so."""
    return {"skipped": True}


def _when(spec: WorkflowSpec, step: str) -> dict[str, Any] | None:
    when = spec.step(step).when
    return when.as_json() if when is not None else None


def _result_output(
    services: Services, spec: WorkflowSpec, job_id: str, checkpoint: Mapping[str, Any]
) -> Mapping[str, Any]:
    """The output carrying the result: the last step's, unless a child step or a skippable step follows the step
    that publishes it (`WorkflowSpec.result_step`): then that step's checkpoint."""
    if spec.result_step == spec.last_step:
        return dict(checkpoint["output"])
    record = services.checkpoints.get_step(job_id, spec.result_step, None)
    if record is None or not record.succeeded:
        raise InternalError(f"job {job_id}: {spec.result_step} has no checkpoint to complete with")
    return dict(record.output or {})


def _completed_fields(spec: WorkflowSpec, output: Mapping[str, Any]) -> dict[str, Any]:
    total = len(spec.steps)
    return {
        "result_key": output["result_key"],
        "current_step": None,
        "error": None,
        "progress": {"completed": total, "total": total, "unit": "steps", "message": "completed"},
    }


def _complete(services: Services, spec: WorkflowSpec, job_id: str, step: str, output: Mapping[str, Any]) -> None:
    """The last step's output carries the result reference; the job completes with it (the last step's commit did,
    unless it crashed between: then its re-run does, here)."""
    try:
        services.jobs.transition(
            job_id,
            JobStatus.COMPLETED,
            event="job_completed",
            step=step,
            set_fields=_completed_fields(spec, _result_output(services, spec, job_id, {"output": output})),
            allowed_from=[JobStatus.RUNNING, JobStatus.RETRYING],
        )
    except TransitionRejected as rejected:
        raise CancelledError(f"job {job_id} can no longer complete: {rejected}", step=step) from None
    emit("JobsCompleted", workflow=spec.name)
    record_history(services, spec, job_id)
    # Its dead letters, if any, went when an operator replayed it (`operations.replay`): only the operator path may
    # read and delete dead letters, so a step's role has no access to the dead-letter queues.


def record_history(services: Services, spec: WorkflowSpec, job_id: str) -> None:
    """A completed job's step durations join its workflow's history (`storage/history.py`), which later jobs' ETAs
    come from. Best effort: a lost entry only makes the next estimates a little less informed."""
    try:
        job = services.jobs.get_job(job_id)
        if job is None or job.status != JobStatus.COMPLETED:
            return
        entry = entry_of(
            job_id,
            job.sla_class,
            job.eta.size if job.eta else 1,
            job.finished_at or services.now(),
            spec.step_names,
            {s.name: s.kind in ITEM_KINDS for s in spec.steps},
            services.checkpoints.steps(job_id),
        )
        services.history.record(spec.name, entry)
    except Exception:
        logger.warning("the job's step durations were not added to its workflow's history", exc_info=True)


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


def _record_attempt_failure(
    services: Services,
    event: StepEvent,
    error: LonghaulError,
    *,
    started_at: str | None = None,
    count_attempt: bool = False,
) -> None:
    jobs, job_id = services.jobs, event.input.job_id
    if started_at is not None:  # a fan-out item's start, not recorded yet (see `_run_step`)
        jobs.append_event(job_id, "step_started", step=event.step, item=event.item, attempt=event.attempt + 1)
    detail = {
        "error": type(error).__name__,
        "kind": error.kind,
        "message": sanitize(error.message),
        "will_retry": error.retryable,
    }
    services.checkpoints.put_step(
        job_id,
        event.step,
        event.item,
        {"status": "retrying" if error.retryable else "failed", "error": detail},
        count_attempt=count_attempt,
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
        retry_wait(services, event, error)


# What a retryable failure's class says the job waits on until its retry.
WAIT_REASONS: dict[type[LonghaulError], WaitReason] = {
    RateLimitedError: "rate_limited",
    UpstreamUnavailableError: "provider_unavailable",
}


def retry_wait(services: Services, event: StepEvent, error: LonghaulError) -> None:
    """The job's wait state after a retryable failure: a provider's 429 (`rate_limited`), a provider down or its
    breaker open (`provider_unavailable`), else `retry_scheduled`; until the latest time the state machine's retry
    (exponential backoff, full jitter) starts the next attempt. None when no retry is left."""
    delay = limits.retry_delay_seconds(event.attempt, rate_limited=isinstance(error, RateLimitedError))
    if delay is None:
        return
    reason: WaitReason = next((r for cls, r in WAIT_REASONS.items() if isinstance(error, cls)), "retry_scheduled")
    where = event.step if event.item is None else f"{event.step} #{event.item}"
    with contextlib.suppress(Exception):  # a hint for people: never the reason a step's failure is lost
        services.jobs.set_waiting(
            event.input.job_id,
            reason,
            until=services.now() + timedelta(seconds=delay),
            detail=f"{where}: {sanitize(error.message)}; attempt {event.attempt + 2} after the backoff",
            step=event.step,
            only_if=[JobStatus.RUNNING, JobStatus.RETRYING],
        )


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


def _progress(spec: WorkflowSpec, step: str, *, done: bool, turn: int | None = None) -> dict[str, Any]:
    names = spec.step_names
    index = names.index(step) if step in names else 0
    completed = index + 1 if done else index
    message = f"{step} finished" if done else f"{step} running" if turn is None else f"{step}: turn {turn + 1}"
    return {"completed": completed, "total": len(names), "unit": "steps", "message": message}
