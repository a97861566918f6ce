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
from longhaul.contracts import JobList, JobStatus
from longhaul.jobs import JOB_ID, page_of_jobs
from longhaul.observability import logger, metrics
from longhaul.problems import ApiProblem, InvalidRequest, NotFound, Unavailable
from longhaul.store import ACTIVE, TransitionRejected
from longhaul.workflows import DEFAULT_DEADLINE_SECONDS, FAN_OUT_STEPS, STEPS, execution_arn

if TYPE_CHECKING:
    from longhaul.wiring import Services

REPLAYABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})
# Fail states of the house policy: the failure was recorded, the job failed or stopped.
ENDED_BY_FAILURE_PATH = frozenset({"StepFailed", "JobStopped"})
START_GRACE = timedelta(minutes=5)  # a queued job may wait this long for its execution to appear
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
    expected: dict[str, int] = {}
    for record in records:
        queue = services.settings.dead_letter_queues.get(record["workflow"], {}).get(record["step"])
        if queue:
            expected[queue] = expected.get(queue, 0) + 1
    removed = sum(_delete_messages(services, queue, job_id, count) for queue, count in expected.items())
    services.store.append_event(job_id, "dead_letters_removed", detail={"records": len(records), "messages": removed})
    return removed


def _delete_messages(services: Services, queue: str, job_id: str, expected: int, *, rounds: int = 10) -> int:
    """Delete the job's messages from a queue; others are made visible again at once. SQS may answer a receive
    with nothing while messages exist, so an empty answer is retried with long polling, within `rounds`."""
    sqs, removed = services.sqs, 0
    for attempt in range(rounds):
        if removed >= expected:
            break
        messages = sqs.receive_message(
            QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=1 if attempt else 0
        ).get("Messages", [])
        for message in messages:
            try:
                body = json.loads(message["Body"])
            except ValueError:
                body = {}
            if body.get("job_id") == job_id:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
                removed += 1
            else:
                sqs.change_message_visibility(
                    QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
    return removed


def list_jobs(
    services: Services, *, tenant: str | None, status: JobStatus | None, limit: int, cursor: str | None = None
) -> JobList:
    """Every tenant's jobs for operators, newest first and paged; optionally one tenant's (by creation), or those
    in a status (by latest update), or both."""
    return page_of_jobs(services.store, tenant_id=tenant, status=status, limit=limit, cursor=cursor)


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
    job = store.get_job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    steps = STEPS[job["workflow"]]
    if from_step not in steps:
        raise InvalidRequest(f"unknown step {from_step!r}", allowed_steps=list(steps))
    if JobStatus(job["status"]) not in REPLAYABLE:  # an execution that ended without saying so frees the job
        job = reconcile(services, job) or job
    status = JobStatus(job["status"])
    if status not in REPLAYABLE:
        raise NotReplayable(f"job {job_id} is {status.value}; only failed, cancelled or expired jobs are replayed")
    if services.artifacts.head(job["input_key"]) is None:
        raise NotReplayable(f"job {job_id}'s intermediate artifacts have expired; submit it again")
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
            set_fields={
                "attempts": attempt,
                "execution_name": name,
                "error": None,
                "current_step": from_step,
                # a new attempt gets the job's full time again
                "deadline_at": iso(store.clock.now() + timedelta(seconds=_deadline_seconds(job))),
            },
            allowed_from=REPLAYABLE,
        )
    except TransitionRejected as rejected:
        raise NotReplayable(f"job {job_id} changed meanwhile: {rejected}") from None
    store.delete_items(job_id, plan.drop)  # no execution of the job runs now: nobody reads these checkpoints
    if mode == "replay":
        state = {k: job[k] for k in ("job_id", "tenant_id", "workflow", "input_key")}
        try:
            services.stepfunctions.start_execution(stateMachineArn=machine, name=name, input=json.dumps(state))
        except ClientError as error:
            with contextlib.suppress(TransitionRejected):
                store.transition(job_id, status, event="replay_not_started", detail={"error": str(error)})
            raise Unavailable("the workflow engine did not start the replay; replay again") from error
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
    """What the new attempt will redo, and the checkpoints to drop for it.

    A replay drops the checkpoints of `from_step` and later steps (of a fan-out `from_step`: only its unfinished
    items); a redrive drops none (Step Functions resumes the execution). Either way, every step without a
    checkpoint runs again, also before `from_step`: a cancelled job may have stopped before it got there. A fan-out
    has as many items as the list its previous step produced.
    """
    steps = STEPS[workflow]
    later = set(steps[steps.index(from_step) :]) if mode == "replay" else set()
    fan_out = FAN_OUT_STEPS.get(workflow, frozenset())
    records = services.store.steps(job_id)

    def kept(record: dict[str, Any]) -> bool:
        if record.get("status") != "succeeded":
            return False
        partial = record["step"] == from_step and record["step"] in fan_out and record.get("item") is not None
        return record["step"] not in later or partial

    checkpoints = {(r["step"], r.get("item")) for r in records if kept(r)}
    drop = [r["sk"] for r in records if r["step"] in later and not kept(r)]
    rerun_steps: list[str] = []
    kept_items: list[int] = []
    rerun_items: list[int] = []
    for index, step in enumerate(steps):
        if step not in fan_out:
            if (step, None) not in checkpoints:
                rerun_steps.append(step)
            continue
        count = _item_count(records, workflow, steps[index - 1]) if index else None
        previous_reruns = bool(rerun_steps) and rerun_steps[-1] == steps[index - 1]
        items = range(count or 0)
        done = [] if previous_reruns else [i for i in items if (step, i) in checkpoints]
        missing = [i for i in items if i not in done]
        if missing or count is None or previous_reruns:
            rerun_steps.append(step)
        kept_items += done
        rerun_items += missing
    return ReplayPlan(from_step, rerun_steps, sorted(kept_items), sorted(rerun_items), drop)


def _item_count(records: list[dict[str, Any]], workflow: str, producer: str) -> int | None:
    """How many items the fan-out after `producer` has: the length of the list in its last committed output
    (None if it never committed)."""
    output = next(
        (r.get("output") for r in records if r["step"] == producer and r.get("item") is None and r.get("output")),
        None,
    )
    lists = [v for v in (output or {}).values() if isinstance(v, list)] if isinstance(output, dict) else []
    return len(lists[0]) if len(lists) == 1 else None


# ---------------------------------------------------------------------- sweep


def sweep(services: Services, now: datetime, *, stuck_after: timedelta | None = None) -> dict[str, int]:
    """Every few minutes, oldest first: finish cancellations, expire jobs past their deadline (stopping their
    execution), fail jobs whose execution ended without saying so, and report jobs with no progress for a while."""
    store = services.store
    stuck_after = stuck_after or timedelta(minutes=services.settings.stuck_after_minutes)
    counts = {"checked": 0, "expired": 0, "stuck": 0, "reconciled": 0, "cancelled": 0}
    for status in (*SWEPT, JobStatus.CANCEL_REQUESTED):
        for job in store.list_jobs(status=status, limit=None, oldest_first=True):
            counts["checked"] += 1
            deadline = job.get("deadline_at")
            if status == JobStatus.CANCEL_REQUESTED:
                counts["cancelled"] += _finish_cancel(services, job)
            elif deadline and now > _parse(deadline):
                counts["expired"] += _expire(services, job, deadline)
            elif reconcile(services, job, now=now):
                counts["reconciled"] += 1
            elif _parse(job["updated_at"]) < now - stuck_after and not _recently_reported(job, now, stuck_after):
                idle = int((now - _parse(job["updated_at"])).total_seconds())
                store.append_event(
                    job["job_id"], "job_stuck", step=job.get("current_step"), detail={"idle_seconds": idle}
                )
                store.mark_stuck(job["job_id"], iso(now))
                counts["stuck"] += 1
    metrics.add_metric(name="StuckJobs", unit="Count", value=counts["stuck"])
    metrics.add_metric(name="ExpiredJobs", unit="Count", value=counts["expired"])
    return counts


def reconcile(services: Services, job: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any] | None:
    """A live job whose execution has ended without recording it (aborted from the console, timed out, the failure
    recorder failed) or never started is marked failed (cancelled, if a cancel was asked). The job, or None."""
    machine = services.settings.workflows.get(job["workflow"])
    if machine is None:
        return None
    try:
        described = services.stepfunctions.describe_execution(
            executionArn=execution_arn(machine, job["execution_name"])
        )
        ended = described["status"]
    except ClientError as error:
        if error.response["Error"]["Code"] != "ExecutionDoesNotExist":
            raise
        ended = "NOT_STARTED"
    now = now or services.store.clock.now()
    if ended == "RUNNING" or (ended == "NOT_STARTED" and _parse(job["updated_at"]) > now - START_GRACE):
        return None
    if JobStatus(job["status"]) == JobStatus.CANCEL_REQUESTED:
        return _transition_or_none(services, job, JobStatus.CANCELLED, "job_cancelled", {"execution": ended})
    failure = {
        "kind": "timeout" if ended == "TIMED_OUT" else "internal",
        "error": f"Execution{ended.title().replace('_', '')}",
        "step": job.get("current_step"),
        "item": None,
        "message": f"the execution ended {ended} without recording a failure",
    }
    return _transition_or_none(services, job, JobStatus.FAILED, "job_failed", failure, set_fields={"error": failure})


def _transition_or_none(
    services: Services,
    job: dict[str, Any],
    to: JobStatus,
    event: str,
    detail: dict[str, Any],
    set_fields: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    try:
        return services.store.transition(job["job_id"], to, event=event, detail=detail, set_fields=set_fields)
    except TransitionRejected:
        return None


def _finish_cancel(services: Services, job: dict[str, Any]) -> int:
    """A cancellation whose execution could not be stopped at the time: stop it now and end the job."""
    machine = services.settings.workflows.get(job["workflow"])
    if machine:
        with contextlib.suppress(ClientError):
            services.stepfunctions.stop_execution(
                executionArn=execution_arn(machine, job["execution_name"]), error="JobCancelled"
            )
    return int(_transition_or_none(services, job, JobStatus.CANCELLED, "job_cancelled", {"by": "sweep"}) is not None)


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


def _deadline_seconds(job: dict[str, Any]) -> int:
    return int(job.get("deadline_seconds") or DEFAULT_DEADLINE_SECONDS)
