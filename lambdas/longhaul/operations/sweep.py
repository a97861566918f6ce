"""The sweep (every few minutes, and after a cancel that could not stop its execution): expire jobs past their
deadline, reconcile live jobs whose execution ended without its failure path, finish cancellations, re-admit queued
jobs admission lost, report idle ones.

Reaches AWS through the ports only (the engine, the stores), so it is unit-tested with fakes (`test_sweep.py`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from longhaul.core.clock import iso
from longhaul.core.contracts import (
    JobStatus,
)
from longhaul.core.observability import STUCK_JOBS_METRIC, logger, metrics
from longhaul.core.ports import EngineUnavailable, ExecutionStatus
from longhaul.core.records import Job, version_number
from longhaul.operations.admission import Admission
from longhaul.review.lane import close_for_stopped_job
from longhaul.services import Services
from longhaul.storage.jobs import ACTIVE, TransitionRejected
from longhaul.workflows import REGISTRY

START_GRACE = timedelta(minutes=5)  # a queued job may wait this long for its execution to appear


REQUEUE_AFTER = timedelta(minutes=10)  # a job waiting this long without news is sent to its intake queue again


SWEPT = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.RETRYING, JobStatus.WAITING_FOR_REVIEW, JobStatus.PAUSED)


class SweepReport(dict[str, int]):
    """What the sweep did (counts by kind), and `versions`: the state machine versions that live jobs run, by workflow
    (`{"document-analysis": {"3": 2, "4": 17}}`), so operators know which old versions must stay (pruning is
    `longhaul admin prune-versions`)."""

    versions: dict[str, dict[str, int]]


def sweep(services: Services, now: datetime, *, stuck_after: timedelta | None = None) -> SweepReport:
    """Every few minutes, oldest first: finish cancellations, expire jobs past their deadline (stopping their
    execution), fail jobs whose execution ended without saying so, and report jobs with no progress for a while,
    and the versions live jobs still run."""
    jobs = services.jobs
    stuck_after = stuck_after or timedelta(minutes=services.settings.stuck_after_minutes)
    counts = SweepReport(checked=0, expired=0, stuck=0, reconciled=0, cancelled=0, requeued=0)
    counts.versions = {}
    admission = Admission(services)
    for status in (*SWEPT, JobStatus.CANCEL_REQUESTED):
        for job in jobs.list_jobs(status=status, limit=None, oldest_first=True):
            counts["checked"] += 1
            number = version_number(job.state_machine_version)
            if number is not None:  # a job not started yet will start on whatever is deployed then
                in_use = counts.versions.setdefault(job.workflow, {})
                in_use[str(number)] = in_use.get(str(number), 0) + 1
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
                # waiting for a person is its review ladder's business; a paused job waits for its resume
                status not in (JobStatus.WAITING_FOR_REVIEW, JobStatus.PAUSED)
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
    if services.bus is not None:  # the bus's outbox: events their writers did not publish
        published = services.bus.relay_pending()
        if published:
            logger.info("bus events published by the sweep", extra={"events": published})
    metrics.add_metric(name=STUCK_JOBS_METRIC, unit="Count", value=counts["stuck"])
    metrics.add_metric(name="ExpiredJobs", unit="Count", value=counts["expired"])
    logger.info("state machine versions live jobs run", extra={"versions": counts.versions})
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
    review = close_for_stopped_job(services, job, "cancelled")
    fields = {"review": review} if review else None
    cancelled = _transition_or_none(services, job, JobStatus.CANCELLED, "job_cancelled", {"by": "sweep"}, fields)
    return int(cancelled is not None)


def _recently_reported(job: Job, now: datetime, window: timedelta) -> bool:
    return job.stuck_reported_at is not None and job.stuck_reported_at > now - window


def _expire(services: Services, job: Job, deadline: datetime) -> int:
    """Past its deadline the job ends `expired` even if its execution cannot be stopped yet: its steps refuse to
    start or commit for an expired job, so the execution ends at its next step."""
    _stop(services, job, error="JobExpired", cause=f"deadline {iso(deadline)} passed")
    review = close_for_stopped_job(services, job, "expired")
    try:
        services.jobs.transition(
            job.job_id,
            JobStatus.EXPIRED,
            event="job_expired",
            detail={"deadline_at": iso(deadline)},
            set_fields={"review": review} if review else None,
            allowed_from=[*ACTIVE, JobStatus.QUEUED, JobStatus.WAITING_FOR_REVIEW, JobStatus.PAUSED],
        )
        return 1
    except TransitionRejected:
        return 0


def deadline_seconds(job: Job) -> int:
    return job.deadline_seconds or REGISTRY[job.workflow].deadline_default_seconds
