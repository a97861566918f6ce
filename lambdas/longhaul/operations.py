"""Operator use cases: dead letters, replay from a step, the sweep for expired and stuck jobs."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError

from longhaul.auth import Principal
from longhaul.clock import iso
from longhaul.contracts import JobStatus
from longhaul.observability import logger, metrics
from longhaul.problems import ApiProblem, InvalidRequest, NotFound
from longhaul.store import ACTIVE, TransitionRejected
from longhaul.workflows import FAN_OUT_STEPS, STEPS, execution_arn

if TYPE_CHECKING:
    from longhaul.wiring import Services

REPLAYABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})
# Fail states of the house policy: the failure was recorded, the job failed or stopped.
ENDED_BY_FAILURE_PATH = frozenset({"StepFailed", "JobStopped"})
SWEPT = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.RETRYING, JobStatus.WAITING_FOR_REVIEW)


class NotReplayable(ApiProblem):
    status, slug, title = 409, "not-replayable", "The job cannot be replayed in its current status"


class RedriveUnavailable(ApiProblem):
    status, slug, title = 409, "redrive-unavailable", "Step Functions did not accept the redrive"


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


# ---------------------------------------------------------------------- dead letters


def list_dead_letters(
    services: Services, *, step: str | None, workflow: str | None, tenant: str | None, limit: int
) -> list[dict[str, Any]]:
    wanted = {"step": step, "workflow": workflow, "tenant_id": tenant}
    records = services.store.list_dead_letters(limit=1000)
    matching = [r for r in records if all(v is None or r.get(k) == v for k, v in wanted.items())]
    return [{k: v for k, v in r.items() if not k.startswith(("pk", "sk", "gsi"))} for r in matching[:limit]]


def purge_dead_letters(services: Services, job_id: str) -> int:
    """Remove a job's dead letters (index records and queue messages) once it has completed; returns how many."""
    records = services.store.delete_dead_letters(job_id)
    queues = {services.settings.dead_letter_queues.get(r["workflow"], {}).get(r["step"]) for r in records} - {None}
    removed = 0
    for queue in queues:
        removed += _delete_messages(services, str(queue), job_id)
    services.store.append_event(job_id, "dead_letters_removed", detail={"records": len(records), "messages": removed})
    return removed


def _delete_messages(services: Services, queue: str, job_id: str, *, rounds: int = 20) -> int:
    sqs, removed = services.sqs, 0
    for _ in range(rounds):
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=30).get("Messages", [])
        if not messages:
            break
        for message in messages:
            try:
                body = json.loads(message["Body"])
            except ValueError:
                body = {}
            if body.get("job_id") == job_id:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
                removed += 1
            else:  # not ours: make it visible again at once
                sqs.change_message_visibility(
                    QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
    return removed


# ---------------------------------------------------------------------- replay


@dataclass(frozen=True)
class ReplayPlan:
    from_step: str
    rerun_steps: list[str]
    kept_items: list[int]
    rerun_items: list[int]
    drop: list[str]


def replay(
    services: Services,
    principal: Principal,
    job_id: str,
    *,
    from_step: str,
    reason: str,
    mode: Literal["replay", "redrive"] = "replay",
) -> dict[str, Any]:
    """A new attempt of a failed (or cancelled, expired) job that reuses every checkpoint before `from_step`.

    Inside a fan-out, only the items without a valid checkpoint rerun. `redrive` asks Step Functions to redrive the
    failed execution instead (AWS only). Who replayed what and why goes into the job's events.
    """
    store = services.store
    job = store.get_job(job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    status = JobStatus(job["status"])
    if status not in REPLAYABLE:
        raise NotReplayable(f"job {job_id} is {status.value}; only failed, cancelled or expired jobs are replayed")
    steps = STEPS[job["workflow"]]
    if from_step not in steps:
        raise InvalidRequest(f"unknown step {from_step!r}", allowed_steps=list(steps))
    machine = services.settings.workflows[job["workflow"]]
    attempt = int(job.get("attempts") or 1) + 1
    name = job["execution_name"] if mode == "redrive" else f"{job_id}-r{attempt}"
    if mode == "redrive":
        _ensure_redrivable(services, execution_arn(machine, name))
    plan = _plan(services, job_id, job["workflow"], from_step, mode)
    detail = {
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
    }
    try:  # the compare-and-set makes concurrent replays safe: one wins, the others get a 409
        store.transition(
            job_id,
            JobStatus.QUEUED,
            event="job_replayed",
            detail=detail,
            set_fields={"attempts": attempt, "execution_name": name, "error": None, "current_step": from_step},
            allowed_from=REPLAYABLE,
        )
    except TransitionRejected as rejected:
        raise NotReplayable(f"job {job_id} changed meanwhile: {rejected}") from None
    store.delete_items(job_id, plan.drop)  # no execution of the job runs now: nobody reads these checkpoints
    if mode == "replay":
        state = {k: job[k] for k in ("job_id", "tenant_id", "workflow", "input_key")}
        services.stepfunctions.start_execution(stateMachineArn=machine, name=name, input=json.dumps(state))
    else:
        _redrive(services, job_id, execution_arn(machine, name), status)
    logger.info("job replayed", extra={"job_id": job_id, **detail})
    return {"job_id": job_id, "status": JobStatus.QUEUED.value, **detail}


def _ensure_redrivable(services: Services, arn: str) -> None:
    """RedriveExecution applies to an execution that stopped outside its failure path (timed out, aborted, or the
    recorder itself failed); one that ended through it would only reach its Fail state again."""
    try:
        described = services.stepfunctions.describe_execution(executionArn=arn)
    except ClientError as error:
        raise RedriveUnavailable(f"{error.response['Error'].get('Message', error)}; use mode=replay") from None
    if described.get("error") in ENDED_BY_FAILURE_PATH:
        raise RedriveUnavailable(
            f"the execution ended through its failure path ({described['error']}), where a redrive would end "
            "again; use mode=replay"
        )


def _redrive(services: Services, job_id: str, arn: str, previous: JobStatus) -> None:
    try:
        services.stepfunctions.redrive_execution(executionArn=arn)
    except ClientError as error:
        with contextlib.suppress(TransitionRejected):
            services.store.transition(
                job_id, previous, event="redrive_refused", detail={"error": str(error)}, allowed_from=[JobStatus.QUEUED]
            )
        raise RedriveUnavailable(f"{error.response['Error'].get('Message', error)}; use mode=replay") from None


def _plan(services: Services, job_id: str, workflow: str, from_step: str, mode: str) -> ReplayPlan:
    """The checkpoints to drop: `from_step` and later steps (for a fan-out step: only its unfinished items).
    A redrive keeps them all: Step Functions resumes the execution itself."""
    steps = STEPS[workflow]
    later = set(steps[steps.index(from_step) :])
    fan_out = FAN_OUT_STEPS.get(workflow, frozenset())
    drop: list[str] = []
    kept: list[int] = []
    rerun: list[int] = []
    for record in services.store.steps(job_id):
        step, item = record["step"], record.get("item")
        if step not in later:
            continue
        if step == from_step and step in fan_out and item is not None:
            (kept if record.get("status") == "succeeded" else rerun).append(int(item))
            if record.get("status") == "succeeded":
                continue
        drop.append(record["sk"])
    if mode == "redrive":
        return ReplayPlan(from_step, [], sorted(kept), sorted(rerun), [])
    return ReplayPlan(from_step, [s for s in steps if s in later], sorted(kept), sorted(rerun), drop)


# ---------------------------------------------------------------------- sweep


def sweep(services: Services, now: datetime, *, stuck_after: timedelta | None = None) -> dict[str, int]:
    """Expire jobs past their deadline (stopping their execution); report jobs with no progress for a while."""
    store = services.store
    stuck_after = stuck_after or timedelta(minutes=services.settings.stuck_after_minutes)
    checked = expired = stuck = 0
    for status in SWEPT:
        for job in store.list_jobs(status=status, limit=1000):
            checked += 1
            deadline = job.get("deadline_at")
            if deadline and now > _parse(deadline):
                expired += _expire(services, job, deadline)
            elif _parse(job["updated_at"]) < now - stuck_after and not _recently_reported(job, now, stuck_after):
                idle = int((now - _parse(job["updated_at"])).total_seconds())
                store.append_event(
                    job["job_id"], "job_stuck", step=job.get("current_step"), detail={"idle_seconds": idle}
                )
                store.update_job(job["job_id"], {"stuck_reported_at": iso(now)}, only_if=SWEPT)
                stuck += 1
    metrics.add_metric(name="StuckJobs", unit="Count", value=stuck)
    metrics.add_metric(name="ExpiredJobs", unit="Count", value=expired)
    return {"checked": checked, "expired": expired, "stuck": stuck}


def _recently_reported(job: dict[str, Any], now: datetime, window: timedelta) -> bool:
    reported = job.get("stuck_reported_at")
    return isinstance(reported, str) and _parse(reported) > now - window


def _expire(services: Services, job: dict[str, Any], deadline: str) -> int:
    machine = services.settings.workflows.get(job["workflow"])
    if machine:
        with contextlib.suppress(ClientError):
            services.stepfunctions.stop_execution(
                executionArn=execution_arn(machine, job["execution_name"]),
                error="JobExpired",
                cause=f"deadline {deadline} passed",
            )
    try:
        services.store.transition(
            job["job_id"],
            JobStatus.EXPIRED,
            event="job_expired",
            detail={"deadline_at": deadline},
            allowed_from=[*ACTIVE, JobStatus.QUEUED, JobStatus.WAITING_FOR_REVIEW],
        )
        return 1
    except TransitionRejected:
        return 0
