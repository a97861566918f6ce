"""Replay a failed, cancelled or expired job from a step: plan what reruns (a fan-out reruns only its unfinished
items), undo the records of what reruns, and start the job again through admission; or redrive its execution.

Reaches AWS through the ports only (the engine, dead letters, the stores), so it is unit-tested with fakes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pydantic import ValidationError

from longhaul.core import tracing
from longhaul.core.auth import Principal
from longhaul.core.budgets import JobBudget, to_micro, usd
from longhaul.core.clock import iso
from longhaul.core.contracts import (
    JobStatus,
    NamedItem,
    Progress,
    ReplayOutcome,
)
from longhaul.core.errors import JOB_STOPPED, STEP_FAILED
from longhaul.core.observability import logger
from longhaul.core.ports import EngineUnavailable, ExecutionStatus, RedriveRefused
from longhaul.core.problems import ApiProblem, InvalidRequest, NotFound, Unavailable
from longhaul.core.records import JOB_ID, Job, StepRecord, version_number
from longhaul.engine.failures import ref_name
from longhaul.engine.items import ItemBatch, ItemList, item_count
from longhaul.engine.spec import StepKind
from longhaul.operations.admission import Admission
from longhaul.operations.sweep import deadline_seconds, reconcile
from longhaul.services import Services
from longhaul.storage.jobs import TransitionRejected
from longhaul.workflows import REGISTRY

REPLAYABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})


# Fail states of the house policy: the failure was recorded, the job failed or stopped.
ENDED_BY_FAILURE_PATH = frozenset({STEP_FAILED, JOB_STOPPED})


class NotReplayable(ApiProblem):
    status, slug, title = 409, "not-replayable", "The job cannot be replayed in its current status"


class RedriveUnavailable(ApiProblem):
    status, slug, title = 409, "redrive-unavailable", "Step Functions did not accept the redrive"


@dataclass(frozen=True)
class ReplayPlan:
    from_step: str
    rerun_steps: list[str]
    kept_items: dict[str, list[int]]  # by fan-out step (two steps' item numbers are not the same items)
    rerun_items: dict[str, list[int]]
    drop: list[tuple[str, int | None]]
    rerun_named: list[NamedItem] = field(default_factory=list)
    undecided_reviews: list[str] = field(default_factory=list)  # reviews opened, never decided: they ask again


def replay(
    services: Services,
    principal: Principal,
    job_id: str,
    *,
    from_step: str | None,
    reason: str,
    mode: Literal["replay", "redrive"] = "replay",
    budget: JobBudget | None = None,
    dry_run: bool = False,
    version: Literal["own", "current"] = "own",
    read: Job | None = None,
) -> ReplayOutcome:
    """A new attempt of a failed (or cancelled, expired) job that reuses every checkpoint before `from_step` (by
    default the step it failed at, else its first step without a checkpoint).

    Inside a fan-out, only the items without a valid checkpoint rerun. `redrive` asks the engine to redrive the
    failed execution instead (AWS only). A replay runs the state machine version the job ran on (`own`: a job
    finishes on its own code) unless the operator chooses the `current` one. Who replayed what, on which version,
    and why goes into the job's events. A `dry_run` answers the same plan after the same checks, and changes nothing.
    `read`: the job as the caller has just read it (a bulk dry run's), which saves reading it again.
    """
    jobs = services.jobs
    job = read if read is not None and read.job_id == job_id else jobs.get_job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    steps = REGISTRY[job.workflow].step_names
    if from_step is None:
        from_step = default_from_step(services, job)
    if from_step not in steps:
        raise InvalidRequest(f"unknown step {from_step!r}", allowed_steps=list(steps))
    if job.status not in REPLAYABLE:  # an execution that ended without saying so frees the job
        job = reconcile(services, job) or job
    status = job.status
    if status not in REPLAYABLE:
        raise NotReplayable(f"job {job_id} is {status.value}; only failed, cancelled or expired jobs are replayed")
    if job.compensation is not None and job.compensation.status in ("pending", "running"):
        raise NotReplayable(f"job {job_id} is undoing its side effects (its compensation is {job.compensation.status})")
    if services.artifacts.head(job.input_key) is None:
        raise NotReplayable(f"job {job_id}'s intermediate artifacts have expired; submit it again")
    own = job.state_machine_version
    if mode == "redrive" and version == "current":
        raise InvalidRequest("a redrive resumes the execution on its own version; replay (mode=replay) to run another")
    if mode == "replay" and version == "own" and own is not None and not _version_exists(services, job, own):
        raise NotReplayable(
            f"job {job_id} ran on version {version_number(own)} of {job.workflow}, which was pruned; "
            'replay it on the current version ("version": "current")'
        )
    attempt = job.attempts + 1
    name = job.execution_name if mode == "redrive" else f"{job_id}-r{attempt}"
    if mode == "redrive":
        if job.invalidated_steps:
            raise RedriveUnavailable(
                f"job {job_id}'s input was fixed since its execution started, which a redrive would not read; "
                "use mode=replay"
            )
        _ensure_redrivable(services, job)
    plan = _plan(services, job, from_step, mode)
    if dry_run:
        return ReplayOutcome(
            job_id=job_id,
            status=job.status,
            attempt=attempt,
            execution=name,
            from_step=from_step,
            rerun_steps=plan.rerun_steps,
            rerun_items=plan.rerun_items,
            kept_items=plan.kept_items,
            rerun_named=plan.rerun_named,
            undecided_reviews=plan.undecided_reviews,
            version=version,
            from_version=version_number(own),
            dry_run=True,
            input_version=job.input_version,
            invalidated_steps=job.invalidated_steps or [],
        )
    detail: dict[str, Any] = {
        "by": principal.tenant_id,
        "role": principal.role,
        "reason": reason,
        "from_step": from_step,
        "mode": mode,
        "version": version,
        "from_version": version_number(own),
        "attempt": attempt,
        "execution": name,
        "rerun_steps": plan.rerun_steps,
        "rerun_items": plan.rerun_items,
        "kept_items": plan.kept_items,
        "rerun_named": [n.model_dump() for n in plan.rerun_named],
        "undecided_reviews": plan.undecided_reviews,
        "input_version": job.input_version,
        "invalidated_steps": job.invalidated_steps or [],
    }
    # The replay spends from the same budget; an operator may raise it (recorded). Exhaustion is forgotten: the next
    # reservation is checked against the limits again.
    budget_fields: dict[str, Any] = {"budget_exhausted": None}
    if budget is not None:
        tokens = budget.max_tokens if budget.max_tokens is not None else job.budget_tokens
        cost = to_micro(budget.max_cost_usd) if budget.max_cost_usd is not None else job.budget_cost_micro
        budget_fields |= {"budget_tokens": tokens, "budget_cost_micro": cost}
        detail["budget"] = {
            "from": {"max_tokens": job.budget_tokens, "max_cost_usd": usd(job.budget_cost_micro or 0)},
            "to": {"max_tokens": tokens, "max_cost_usd": usd(cost or 0)},
        }
    # A new span in the job's one trace (under its root, whatever ran before), linked to that root: the replay.
    with tracing.job_trace(
        job.correlation_id,
        "replay job",
        {tracing.JOB_ID: job_id, tracing.ATTEMPT: attempt, tracing.STEP: from_step},
        links=[job.correlation_id] if job.correlation_id else [],
    ):
        try:  # the compare-and-set makes concurrent replays safe: one wins, the others get a 409
            replayed = jobs.transition(
                job_id,
                JobStatus.QUEUED,
                event="job_replayed",
                detail=detail,
                set_fields={
                    "attempts": attempt,
                    "execution_name": name,
                    "error": None,
                    "cancellation": None,  # an operator's termination message is no longer the job's last word
                    "current_step": from_step,
                    "progress": Progress(
                        completed=steps.index(from_step), total=len(steps), message=f"replaying from {from_step}"
                    ).model_dump(),
                    # a new attempt gets the job's full time again
                    "deadline_at": iso(services.now() + timedelta(seconds=deadline_seconds(job))),
                    # on the current version: its first step records which one that is
                    **({"state_machine_version": None} if version == "current" else {}),
                    # the checkpoints a fix of the input invalidated are dropped now: this attempt reruns them
                    "invalidated_steps": None,
                    **budget_fields,
                },
                allowed_from=REPLAYABLE,
            )
        except TransitionRejected as rejected:
            raise NotReplayable(f"job {job_id} changed meanwhile: {rejected}") from None
        services.checkpoints.delete_steps(job_id, plan.drop)  # no execution of the job runs now: nobody reads these
        _remove_dead_letters(services, job_id)
        waits = 0
        if mode == "replay":
            try:  # through admission, as a submission: it starts holding a slot, or waits for one in its class's queue
                waits = Admission(services).admit(replayed, services.budgets.policy(job.tenant_id))
            except (
                EngineUnavailable
            ) as error:  # (only without admission control: with it, the job waits and is retried)
                _undo(services, job, event="replay_not_started", reason=str(error))
                raise Unavailable("the workflow engine did not start the replay; replay again") from error
            if waits > 0:  # never queued in silence: the log says why it has not started, and until when
                services.jobs.append_event(
                    job_id,
                    "replay_waiting",
                    detail={
                        "reason": "waiting for an admission slot (the tenant's or the platform's jobs in flight)",
                        "estimated_start_seconds": waits,
                        "sla_class": job.sla_class,
                    },
                )
        else:
            _redrive(services, job)
        logger.info("job replayed", extra={"job_id": job_id, **detail})
        return ReplayOutcome.model_validate(
            {"job_id": job_id, "status": JobStatus.QUEUED.value, **detail, "estimated_start_seconds": waits}
        )


def _remove_dead_letters(services: Services, job_id: str) -> None:
    """The failures being replayed are no longer dead letters: their records and queue messages go now (a failure of
    the new attempt sends its own). Best effort: the replay goes on whatever happens here."""
    if not services.dead_letters.of_job(job_id):
        return
    try:
        removed = services.dead_letters.purge(job_id)
        services.jobs.append_event(job_id, "dead_letters_removed", detail={"messages": removed})
    except Exception:
        logger.exception("dead letters of a replayed job were not all removed", extra={"job_id": job_id})


def default_from_step(services: Services, job: Job) -> str:
    """Where a replay starts when the operator names no step: the first step a fix of its input invalidated, else the
    step the job failed at, else the first step without a checkpoint, so nothing that completed is done again (a
    cancelled or expired job)."""
    steps = REGISTRY[job.workflow].step_names
    if job.invalidated_steps:
        return next(s for s in steps if s in job.invalidated_steps)
    if job.error is not None and job.error.step in steps:
        return job.error.step
    unfinished = _plan(services, job, steps[0], "redrive").rerun_steps  # (a redrive's plan drops nothing)
    return unfinished[0] if unfinished else steps[-1]


def _version_exists(services: Services, job: Job, version: str) -> bool:
    try:
        return services.engine.has_version(job.workflow, version)
    except EngineUnavailable as error:
        raise Unavailable("the workflow engine did not say whether the job's version exists; replay again") from error


def _ensure_redrivable(services: Services, job: Job) -> None:
    """A redrive applies to an execution that stopped outside its failure path (timed out, aborted, or the recorder
    itself failed); one that ended through it would only reach its Fail state again."""
    execution = services.engine.describe(job.workflow, job.execution_name)
    if execution.status == ExecutionStatus.NOT_STARTED:
        raise RedriveUnavailable(f"execution {job.execution_name} does not exist; use mode=replay")
    if execution.error in ENDED_BY_FAILURE_PATH:
        raise RedriveUnavailable(
            f"the execution ended through its failure path ({execution.error}), where a redrive would end "
            "again; use mode=replay"
        )


def _redrive(services: Services, job: Job) -> None:
    try:
        services.engine.redrive(job.workflow, job.execution_name)
    except RedriveRefused as refused:
        _undo(services, job, event="redrive_refused", reason=str(refused))
        raise RedriveUnavailable(f"{refused}; use mode=replay") from None


def _undo(services: Services, job: Job, *, event: str, reason: str) -> None:
    """Put a job whose new attempt did not start back as it was: its status, error, attempt and deadline."""
    with contextlib.suppress(TransitionRejected):
        services.jobs.transition(
            job.job_id,
            job.status,
            event=event,
            detail={"error": reason},
            set_fields={
                "error": job.error.model_dump(exclude_none=True) if job.error else None,
                "attempts": job.attempts,
                "execution_name": job.execution_name,
                "state_machine_version": job.state_machine_version,
                "current_step": job.current_step,
                "deadline_at": iso(job.deadline_at) if job.deadline_at else None,
                "invalidated_steps": job.invalidated_steps,
            },
            allowed_from=[JobStatus.QUEUED],
        )


def _plan(services: Services, job: Job, from_step: str, mode: str) -> ReplayPlan:
    """What the new attempt will redo, and the checkpoints to drop for it.

    A replay drops the checkpoints of `from_step` and later steps (of a fan-out `from_step`: only its unfinished
    items), and every checkpoint of a step that a fix of the input invalidated (it read a changed field), wherever it
    is; a redrive drops none (the engine resumes the execution). Either way, every step without a checkpoint
    runs again, also before `from_step`: a cancelled job may have stopped before it got there. A fan-out has as many
    items as the list its spec fans out over (an earlier step's output).
    """
    spec = REGISTRY[job.workflow]
    steps = spec.step_names
    later = set(steps[steps.index(from_step) :]) if mode == "replay" else set()
    invalidated = set(job.invalidated_steps or ()) if mode == "replay" else set()
    records = services.checkpoints.steps(job.job_id)

    def kept(record: StepRecord) -> bool:
        if record.step in invalidated:
            return False
        partial = record.step == from_step and record.step in spec.fan_out_steps and record.item is not None
        return record.succeeded and (record.step not in later or partial)

    checkpoints = {(r.step, r.item) for r in records if kept(r)}
    drop = [(r.step, r.item) for r in records if (r.step in later or r.step in invalidated) and not kept(r)]
    rerun_steps: list[str] = []
    kept_items: dict[str, list[int]] = {}
    rerun_items: dict[str, list[int]] = {}
    named: list[NamedItem] = []
    opened = {r.step for r in records if (r.item is None and r.status == "waiting") or _legacy_wait(r)}
    for step in spec.steps:
        if step.over is None:
            if (step.name, None) not in checkpoints:
                rerun_steps.append(step.name)
            continue
        producer, field = step.over.split(".", 1)
        count = _item_count(records, producer, field)
        producer_reruns = producer in rerun_steps
        items = range(count or 0)
        done = [] if producer_reruns else [i for i in items if (step.name, i) in checkpoints]
        missing = [i for i in items if i not in done]
        if missing or count is None or producer_reruns:
            rerun_steps.append(step.name)
        if done:
            kept_items[step.name] = done
        if missing:
            rerun_items[step.name] = missing
        if missing and not producer_reruns:
            names = _item_names(services, records, producer, field, set(missing))
            unit = step.item_unit
            named += [NamedItem(step=step.name, item=i, unit=unit, name=names.get(i)) for i in missing]
    undecided = [s.name for s in spec.steps if s.kind == StepKind.REVIEW and s.name in opened]
    return ReplayPlan(from_step, rerun_steps, kept_items, rerun_items, drop, named, undecided)


def _legacy_wait(record: StepRecord) -> bool:
    """A review's opening recorded as `succeeded` with the lane's `next: wait` (before reviews waited as `waiting`)."""
    return record.item is None and record.status == "succeeded" and not record.succeeded


def _item_names(
    services: Services, records: list[StepRecord], producer: str, field: str, wanted: set[int]
) -> dict[int, str]:
    """The names of the `wanted` items of a fan-out whose references carry one (documents), read from the item list
    (or its manifest, for a long one); empty when the list has no names."""
    output = next((r.output for r in records if r.step == producer and r.item is None and r.succeeded), None)
    try:
        listed = ItemList.model_validate((output or {}).get(field))
    except ValidationError:
        return {}
    items = listed.items
    if items is None:
        try:
            items = [i for b in services.artifacts.get_json(listed.manifest_key) for i in ItemBatch(**b).items]
        except Exception:  # the names are a courtesy: an expired manifest leaves the numbers
            logger.warning("item manifest unreadable", extra={"key": listed.manifest_key})
            return {}
    return {i.index: name for i in items if i.index in wanted and (name := ref_name(i.ref))}


def _item_count(records: list[StepRecord], producer: str, field: str) -> int | None:
    """How many items a fan-out has: the count of the item list in its producer's committed output (None if the
    producer never committed)."""
    for record in records:
        if record.step == producer and record.item is None and record.succeeded and record.output is not None:
            return item_count(record.output.get(field))
    return None
