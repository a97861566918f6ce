"""Operator use cases: dead letters, replay from a step, the sweep for expired and stuck jobs.

They reach AWS through the ports only (the engine, dead letters, the stores), so each is unit-tested with fakes.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError

from longhaul.core.auth import Principal
from longhaul.core.budgets import JobBudget, TenantPolicy, to_micro, usd
from longhaul.core.clock import iso
from longhaul.core.contracts import (
    DayUsageView,
    DeadLetter,
    JobList,
    JobStatus,
    NamedItem,
    ReplayOutcome,
    TenantPolicyView,
)
from longhaul.core.errors import JOB_STOPPED, STEP_FAILED
from longhaul.core.observability import logger, metrics
from longhaul.core.ports import EngineUnavailable, ExecutionStatus, RedriveRefused
from longhaul.core.problems import ApiProblem, BadRequest, InvalidRequest, NotFound, Unavailable
from longhaul.core.records import JOB_ID, Job, StepRecord
from longhaul.engine.failures import ref_name
from longhaul.engine.items import ItemBatch, ItemList, item_count
from longhaul.operations.admission import Admission
from longhaul.services import Services
from longhaul.storage.jobs import ACTIVE, TransitionRejected
from longhaul.storage.listing import BadCursor
from longhaul.workflows import REGISTRY

REPLAYABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})
# Fail states of the house policy: the failure was recorded, the job failed or stopped.
ENDED_BY_FAILURE_PATH = frozenset({STEP_FAILED, JOB_STOPPED})
START_GRACE = timedelta(minutes=5)  # a queued job may wait this long for its execution to appear
REQUEUE_AFTER = timedelta(minutes=10)  # a job waiting this long without news is sent to its intake queue again
SWEPT = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.RETRYING, JobStatus.WAITING_FOR_REVIEW)


class NotReplayable(ApiProblem):
    status, slug, title = 409, "not-replayable", "The job cannot be replayed in its current status"


class RedriveUnavailable(ApiProblem):
    status, slug, title = 409, "redrive-unavailable", "Step Functions did not accept the redrive"


# ---------------------------------------------------------------------- listings


def list_dead_letters(
    services: Services, *, step: str | None, workflow: str | None, tenant: str | None, limit: int
) -> list[DeadLetter]:
    return services.dead_letters.find(step=step, workflow=workflow, tenant=tenant, limit=limit)


def list_jobs(
    services: Services, *, tenant: str | None, status: JobStatus | None, limit: int, cursor: str | None = None
) -> JobList:
    """Every tenant's jobs for operators, newest first and paged; optionally one tenant's (by creation), or those
    in a status (by latest update), or both."""
    try:
        jobs, next_cursor = services.jobs.page_jobs(tenant_id=tenant, status=status, limit=limit, cursor=cursor)
    except BadCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by the same listing") from None
    return JobList(jobs=[j.view() for j in jobs], next_cursor=next_cursor)


# ---------------------------------------------------------------------- replay


@dataclass(frozen=True)
class ReplayPlan:
    from_step: str
    rerun_steps: list[str]
    kept_items: list[int]
    rerun_items: list[int]
    drop: list[tuple[str, int | None]]
    rerun_named: list[NamedItem] = field(default_factory=list)


def replay(
    services: Services,
    principal: Principal,
    job_id: str,
    *,
    from_step: str,
    reason: str,
    mode: Literal["replay", "redrive"] = "replay",
    budget: JobBudget | None = None,
) -> ReplayOutcome:
    """A new attempt of a failed (or cancelled, expired) job that reuses every checkpoint before `from_step`.

    Inside a fan-out, only the items without a valid checkpoint rerun. `redrive` asks the engine to redrive the
    failed execution instead (AWS only). Who replayed what and why goes into the job's events.
    """
    jobs = services.jobs
    job = jobs.get_job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    steps = REGISTRY[job.workflow].step_names
    if from_step not in steps:
        raise InvalidRequest(f"unknown step {from_step!r}", allowed_steps=list(steps))
    if job.status not in REPLAYABLE:  # an execution that ended without saying so frees the job
        job = reconcile(services, job) or job
    status = job.status
    if status not in REPLAYABLE:
        raise NotReplayable(f"job {job_id} is {status.value}; only failed, cancelled or expired jobs are replayed")
    if services.artifacts.head(job.input_key) is None:
        raise NotReplayable(f"job {job_id}'s intermediate artifacts have expired; submit it again")
    attempt = job.attempts + 1
    name = job.execution_name if mode == "redrive" else f"{job_id}-r{attempt}"
    if mode == "redrive":
        _ensure_redrivable(services, job)
    plan = _plan(services, job, from_step, mode)
    detail: dict[str, Any] = {
        "by": principal.tenant_id,
        "role": principal.role,
        "reason": reason,
        "from_step": from_step,
        "mode": mode,
        "attempt": attempt,
        "execution": name,
        "rerun_steps": plan.rerun_steps,
        "rerun_items": plan.rerun_items,
        "kept_items": plan.kept_items,
        "rerun_named": [n.model_dump() for n in plan.rerun_named],
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
                "current_step": from_step,
                # a new attempt gets the job's full time again
                "deadline_at": iso(services.now() + timedelta(seconds=_deadline_seconds(job))),
                **budget_fields,
            },
            allowed_from=REPLAYABLE,
        )
    except TransitionRejected as rejected:
        raise NotReplayable(f"job {job_id} changed meanwhile: {rejected}") from None
    services.checkpoints.delete_steps(job_id, plan.drop)  # no execution of the job runs now: nobody reads these
    if mode == "replay":
        try:  # through admission, as a submission: it starts holding a slot, or waits for one in its class's queue
            Admission(services).admit(replayed, services.budgets.policy(job.tenant_id))
        except EngineUnavailable as error:  # (only without admission control: with it, the job waits and is retried)
            _undo(services, job, event="replay_not_started", reason=str(error))
            raise Unavailable("the workflow engine did not start the replay; replay again") from error
    else:
        _redrive(services, job)
    logger.info("job replayed", extra={"job_id": job_id, **detail})
    return ReplayOutcome.model_validate({"job_id": job_id, "status": JobStatus.QUEUED.value, **detail})


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
                "current_step": job.current_step,
                "deadline_at": iso(job.deadline_at) if job.deadline_at else None,
            },
            allowed_from=[JobStatus.QUEUED],
        )


def _plan(services: Services, job: Job, from_step: str, mode: str) -> ReplayPlan:
    """What the new attempt will redo, and the checkpoints to drop for it.

    A replay drops the checkpoints of `from_step` and later steps (of a fan-out `from_step`: only its unfinished
    items); a redrive drops none (the engine resumes the execution). Either way, every step without a checkpoint
    runs again, also before `from_step`: a cancelled job may have stopped before it got there. A fan-out has as many
    items as the list its spec fans out over (an earlier step's output).
    """
    spec = REGISTRY[job.workflow]
    steps = spec.step_names
    later = set(steps[steps.index(from_step) :]) if mode == "replay" else set()
    records = services.checkpoints.steps(job.job_id)

    def kept(record: StepRecord) -> bool:
        partial = record.step == from_step and record.step in spec.fan_out_steps and record.item is not None
        return record.succeeded and (record.step not in later or partial)

    checkpoints = {(r.step, r.item) for r in records if kept(r)}
    drop = [(r.step, r.item) for r in records if r.step in later and not kept(r)]
    rerun_steps: list[str] = []
    kept_items: list[int] = []
    rerun_items: list[int] = []
    named: list[NamedItem] = []
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
        kept_items += done
        rerun_items += missing
        if missing and not producer_reruns:
            names = _item_names(services, records, producer, field, set(missing))
            unit = step.item_unit
            named += [NamedItem(step=step.name, item=i, unit=unit, name=names.get(i)) for i in missing]
    return ReplayPlan(from_step, rerun_steps, sorted(kept_items), sorted(rerun_items), drop, named)


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


# ---------------------------------------------------------------------- sweep


def sweep(services: Services, now: datetime, *, stuck_after: timedelta | None = None) -> dict[str, int]:
    """Every few minutes, oldest first: finish cancellations, expire jobs past their deadline (stopping their
    execution), fail jobs whose execution ended without saying so, and report jobs with no progress for a while."""
    jobs = services.jobs
    stuck_after = stuck_after or timedelta(minutes=services.settings.stuck_after_minutes)
    counts = {"checked": 0, "expired": 0, "stuck": 0, "reconciled": 0, "cancelled": 0, "requeued": 0}
    admission = Admission(services)
    for status in (*SWEPT, JobStatus.CANCEL_REQUESTED):
        for job in jobs.list_jobs(status=status, limit=None, oldest_first=True):
            counts["checked"] += 1
            if status == JobStatus.CANCEL_REQUESTED:
                counts["cancelled"] += _finish_cancel(services, job)
            elif job.deadline_at and now > job.deadline_at:
                counts["expired"] += _expire(services, job, job.deadline_at)
            elif status == JobStatus.QUEUED and admission.enabled and not job.slot:
                # It waits for a slot (no execution yet, by design), or never reached admission (a crash).
                if job.waiting or job.updated_at < now - START_GRACE:
                    counts["requeued"] += admission.repair(job, requeue_after=REQUEUE_AFTER)
            elif reconcile(services, job, now=now):
                counts["reconciled"] += 1
            elif (
                status != JobStatus.WAITING_FOR_REVIEW  # waiting for a person is its review ladder's business
                and job.updated_at < now - stuck_after
                and not _recently_reported(job, now, stuck_after)
            ):
                idle = int((now - job.updated_at).total_seconds())
                jobs.append_event(job.job_id, "job_stuck", step=job.current_step, detail={"idle_seconds": idle})
                jobs.mark_stuck(job.job_id, iso(now))
                counts["stuck"] += 1
    from longhaul.webhooks.dispatcher import relay_pending  # the outbox's safety net: starts what was missed

    relayed = relay_pending(services)
    if relayed:
        logger.info("webhooks relayed", extra={"webhooks": relayed})
    metrics.add_metric(name="StuckJobs", unit="Count", value=counts["stuck"])
    metrics.add_metric(name="ExpiredJobs", unit="Count", value=counts["expired"])
    return counts


def reconcile(services: Services, job: Job, *, now: datetime | None = None) -> Job | None:
    """A live job whose execution has ended without recording it (aborted from the console, timed out, the failure
    recorder failed) or never started is marked failed (cancelled, if a cancel was asked). The job, or None."""
    if job.workflow not in services.settings.workflows:
        return None
    try:
        ended = services.engine.describe(job.workflow, job.execution_name).status
    except EngineUnavailable:
        return None  # the sweep asks again next time
    now = now or services.now()
    if ended == ExecutionStatus.RUNNING or (
        ended == ExecutionStatus.NOT_STARTED and job.updated_at > now - START_GRACE
    ):
        return None
    if job.status == JobStatus.CANCEL_REQUESTED:
        return _transition_or_none(services, job, JobStatus.CANCELLED, "job_cancelled", {"execution": ended.value})
    failure = {
        "kind": "timeout" if ended == ExecutionStatus.TIMED_OUT else "internal",
        "error": f"Execution{ended.value.title().replace('_', '')}",
        "step": job.current_step,
        "item": None,
        "message": f"the execution ended {ended.value} without recording a failure",
    }
    return _transition_or_none(services, job, JobStatus.FAILED, "job_failed", failure, set_fields={"error": failure})


def _transition_or_none(
    services: Services,
    job: Job,
    to: JobStatus,
    event: str,
    detail: dict[str, Any],
    set_fields: dict[str, Any] | None = None,
) -> Job | None:
    try:
        return services.jobs.transition(job.job_id, to, event=event, detail=detail, set_fields=set_fields)
    except TransitionRejected:
        return None


def stop_container_tasks(services: Services, job_id: str, *, reason: str) -> None:
    """Stop the job's container tasks (best effort: a worker also stops by itself at its next page, when it sees
    the job is no longer running or its heartbeat is refused)."""
    try:
        services.container_tasks.stop_job_tasks(job_id, reason=reason)
    except EngineUnavailable:
        logger.warning("the job's container tasks could not be stopped now", extra={"job_id": job_id})


def _stop(services: Services, job: Job, *, error: str, cause: str = "") -> bool:
    """Stop the job's execution; False when the engine did not answer (the sweep tries again next time)."""
    if job.workflow not in services.settings.workflows:
        return True
    try:
        services.engine.stop(job.workflow, job.execution_name, error=error, cause=cause)
        stop_container_tasks(services, job.job_id, reason=f"job stopped: {error}")
        return True
    except EngineUnavailable:
        logger.warning("the execution could not be stopped yet", extra={"job_id": job.job_id})
        return False


def _finish_cancel(services: Services, job: Job) -> int:
    """A cancellation whose execution could not be stopped at the time: stop it now and end the job. While the
    engine does not answer the job stays `cancel_requested`, so the sweep comes back to it."""
    if not _stop(services, job, error="JobCancelled"):
        return 0
    return int(_transition_or_none(services, job, JobStatus.CANCELLED, "job_cancelled", {"by": "sweep"}) is not None)


def _recently_reported(job: Job, now: datetime, window: timedelta) -> bool:
    return job.stuck_reported_at is not None and job.stuck_reported_at > now - window


def _expire(services: Services, job: Job, deadline: datetime) -> int:
    """Past its deadline the job ends `expired` even if its execution cannot be stopped yet: its steps refuse to
    start or commit for an expired job, so the execution ends at its next step."""
    _stop(services, job, error="JobExpired", cause=f"deadline {iso(deadline)} passed")
    try:
        services.jobs.transition(
            job.job_id,
            JobStatus.EXPIRED,
            event="job_expired",
            detail={"deadline_at": iso(deadline)},
            allowed_from=[*ACTIVE, JobStatus.QUEUED, JobStatus.WAITING_FOR_REVIEW],
        )
        return 1
    except TransitionRejected:
        return 0


def _deadline_seconds(job: Job) -> int:
    return job.deadline_seconds or REGISTRY[job.workflow].deadline_default_seconds


# ---------------------------------------------------------------------- tenant policies

TENANT_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def tenant_policy(services: Services, tenant_id: str) -> TenantPolicyView:
    """A tenant's budget policy (stored, or the defaults) and what it has spent today."""
    if not TENANT_ID.match(tenant_id):
        raise InvalidRequest("tenant ids are 1-64 characters of A-Z a-z 0-9 . _ -")
    budgets = services.budgets
    policy = budgets.policy(tenant_id)
    day = budgets.day()
    used = budgets.day_usage(tenant_id, day)
    daily_cost = to_micro(policy.daily_cost_usd)
    return TenantPolicyView(
        tenant_id=tenant_id,
        policy=policy,
        source="stored" if budgets.has_policy(tenant_id) else "default",
        today=DayUsageView(
            day=day,
            tokens=used.tokens,
            cost_usd=usd(used.cost_micro),
            remaining_tokens=max(policy.daily_tokens - used.tokens, 0),
            remaining_cost_usd=usd(max(daily_cost - used.cost_micro, 0)),
        ),
    )


def set_tenant_policy(services: Services, tenant_id: str, policy: TenantPolicy) -> TenantPolicyView:
    """Replace a tenant's policy; running jobs keep the limits they were admitted with, new reservations see the
    new daily allowance."""
    if not TENANT_ID.match(tenant_id):
        raise InvalidRequest("tenant ids are 1-64 characters of A-Z a-z 0-9 . _ -")
    unknown = sorted(set(policy.routes or ()) - set(services.routing.routes))
    if unknown:
        raise InvalidRequest(f"unknown routes {unknown}", allowed_routes=sorted(services.routing.routes))
    services.budgets.put_policy(tenant_id, policy)
    return tenant_policy(services, tenant_id)
