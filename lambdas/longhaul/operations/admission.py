"""Admission control in front of StartExecution: a job starts when it holds one of the platform's and its tenant's
in-flight slots (`storage/admission.py`); until then it waits `queued` in the intake queue of its SLA class, and the
dispatcher hands out freed slots weighted-fair across tenants and classes.

Fairness is a virtual finish time, as in weighted fair queueing: a tenant's waiting jobs, most urgent class first
then oldest first, finish at the running sum of 1 / (tenant weight x class weight); the job with the earliest
finish time goes first. A tenant's 200 batch jobs finish at 1, 2, … 200 while another tenant's interactive job
finishes at 1/8: it goes first, whatever the backlog. Aging takes one unit off per `AGING_SECONDS` waited, so an old
batch job eventually precedes new interactive ones and nothing waits forever.

The estimate of a waiting job's start is ceil(jobs of its tenant waiting / its jobs_in_flight) rounds of the job's
own `estimated_sla_seconds` (or of the platform's, when the platform's limit is what holds it back): how long the
jobs ahead of it take to free its tenant's slots, assuming they run about as long as it will.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from aws_lambda_powertools.metrics import MetricUnit

from longhaul.core import tracing
from longhaul.core.budgets import SLA_CLASSES, TenantPolicy
from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus
from longhaul.core.observability import QUEUE_WAIT_METRIC, emit, logger
from longhaul.core.ports import EngineUnavailable, IntakeQueues, Waiting
from longhaul.core.records import Job
from longhaul.services import Services
from longhaul.storage.admission import AdmissionStore, Counters

CLASS_WEIGHTS: Mapping[str, int] = {"interactive": 8, "standard": 3, "batch": 1}
AGING_SECONDS = 60.0  # a minute of waiting is worth one unit of virtual time
RECEIVE_PER_CLASS = 50  # messages one round reads from each intake queue


def fair_order(waiting: Iterable[Waiting], weights: Mapping[str, int], now: datetime) -> list[Waiting]:
    """The order in which waiting jobs get free slots (see the module docstring); `weights` by tenant (default 1)."""
    by_tenant: dict[str, list[Waiting]] = {}
    for item in waiting:
        by_tenant.setdefault(item.tenant_id, []).append(item)
    scored: list[tuple[float, datetime, str, Waiting]] = []
    for tenant, items in by_tenant.items():
        items.sort(key=lambda w: (-CLASS_WEIGHTS.get(w.sla_class, 1), w.queued_at, w.job_id))
        finish = 0.0
        for item in items:
            finish += 1.0 / (max(1, weights.get(tenant, 1)) * CLASS_WEIGHTS.get(item.sla_class, 1))
            aged = max(0.0, (now - item.queued_at).total_seconds()) / AGING_SECONDS
            scored.append((finish - aged, item.queued_at, item.job_id, item))
    scored.sort(key=lambda s: (s[0], s[1], s[2]))
    return [s[3] for s in scored]


def estimated_start_seconds(
    *, sla_seconds: int, tenant_waiting: int, tenant_limit: int, platform_waiting: int, platform_limit: int
) -> int:
    """Rounds of the jobs ahead times the job's own duration estimate (at least one second: it has not started)."""
    tenant_rounds = math.ceil(tenant_waiting / tenant_limit)
    platform_rounds = math.ceil(platform_waiting / platform_limit)
    return max(1, max(1, tenant_rounds, platform_rounds) * max(1, sla_seconds))


def start(services: Services, job: Job) -> None:
    """Start the job's execution: on the version it runs if it has one (a replay of an old job), else through its
    workflow's alias on the version deployed now. `EngineUnavailable`."""
    services.engine.start(
        job.workflow, job.execution_name, job.initial_state().model_dump(), version=job.state_machine_version
    )


class NewJobAdmission(NamedTuple):
    """How a new job is admitted, decided on the counters read with its submission: the fields of its item
    (`slot`, or `waiting` with its estimated start), the transaction items that come with it, and the seconds until
    it is estimated to start (0: at once)."""

    marks: dict[str, Any]
    writes: list[dict[str, Any]]
    estimated_start_seconds: int
    counters: Counters


@dataclass
class DispatchReport:
    received: int = 0
    started: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    poison: list[str] = field(default_factory=list)  # left to their receives and the dead-letter queue
    kept: int = 0


@dataclass
class Admission:
    services: Services

    @property
    def enabled(self) -> bool:
        return self.services.intake is not None

    @property
    def store(self) -> AdmissionStore:
        return self.services.admission

    # ------------------------------------------------------------------ at submission

    def admit(self, job: Job, policy: TenantPolicy) -> int:
        """Start the job if it may (0), else have it wait for a slot: the estimated seconds until it starts.

        Idempotent: a job holding a slot is (re)started, a waiting one keeps waiting. `EngineUnavailable` only
        without admission control (with it, a job the engine refused waits in its queue and is retried)."""
        s = self.services
        if job.status != JobStatus.QUEUED:
            return 0
        if not self.enabled:
            start(s, job)
            return 0
        if job.waiting:
            return job.estimated_start_seconds(s.now()) or 1
        if job.slot or self.store.acquire(
            job.job_id,
            job.tenant_id,
            tenant_limit=policy.jobs_in_flight,
            global_limit=s.settings.max_jobs_in_flight,
            waiting=False,
        ):
            try:
                start(s, job)
            except EngineUnavailable:
                logger.warning("the engine refused the job; it waits for a slot again", extra={"job_id": job.job_id})
                self.store.give_back(job.model_copy(update={"slot": True}))
                return self._wait_in_queue(job, policy, marked=True)
            emit(QUEUE_WAIT_METRIC, 0, MetricUnit.Seconds, sla_class=job.sla_class)
            return 0
        return self._wait_in_queue(job, policy, marked=False)

    def plan_new(self, tenant_id: str, sla_seconds: int, policy: TenantPolicy, counters: Counters) -> NewJobAdmission:
        """A new job's admission on `counters` (as read with its submission, no read of its own): a slot when its
        tenant and the platform have one free and its tenant has no backlog, else a place in the queue."""
        s = self.services
        if not self.enabled:
            return NewJobAdmission({}, [], 0, counters)
        limit = s.settings.max_jobs_in_flight
        start_now = (
            counters.tenant_in_flight < policy.jobs_in_flight
            and counters.tenant_queued <= 0
            and counters.global_in_flight < limit
        )
        writes = self.store.new_job_writes(
            tenant_id, start=start_now, tenant_limit=policy.jobs_in_flight, global_limit=limit
        )
        if start_now:
            return NewJobAdmission({"slot": True}, writes, 0, counters)
        seconds = estimated_start_seconds(
            sla_seconds=sla_seconds,
            tenant_waiting=counters.tenant_queued + 1,
            tenant_limit=policy.jobs_in_flight,
            platform_waiting=counters.global_queued + 1 if counters.global_in_flight >= limit else 0,
            platform_limit=limit,
        )
        marks = {"waiting": True, "estimated_start_at": iso(s.now() + timedelta(seconds=seconds))}
        return NewJobAdmission(marks, writes, seconds, counters)

    def admit_new(self, job: Job, policy: TenantPolicy, planned: NewJobAdmission) -> int:
        """After the new job's transaction: start it (it holds its slot), or send it to its intake queue (it is
        counted waiting); the estimated seconds to its start. `EngineUnavailable` only without admission control."""
        if not job.waiting:
            seconds = self.admit(job, policy)
            queue_wait_span(job, job.created_at, self.services.now())  # started at once: a queue wait of ~0
            return seconds
        self._send(job, policy, planned.counters, ahead=planned.counters.tenant_queued)
        return planned.estimated_start_seconds

    def _wait_in_queue(self, job: Job, policy: TenantPolicy, *, marked: bool) -> int:
        s = self.services
        counters = self.store.counters(job.tenant_id)
        seconds = estimated_start_seconds(
            sla_seconds=job.estimated_sla_seconds,
            tenant_waiting=counters.tenant_queued + (0 if marked else 1),
            tenant_limit=policy.jobs_in_flight,
            platform_waiting=counters.global_queued + (0 if marked else 1)
            if counters.global_in_flight >= s.settings.max_jobs_in_flight
            else 0,
            platform_limit=s.settings.max_jobs_in_flight,
        )
        if not marked and not self.store.enqueue(job, s.now() + timedelta(seconds=seconds)):
            latest = s.jobs.get_job(job.job_id)  # it changed meanwhile (started, cancelled, or already waiting)
            return (latest.estimated_start_seconds(s.now()) or 0) if latest else 0
        self._send(job, policy, counters, ahead=counters.tenant_queued - (1 if marked else 0))
        return seconds

    def _send(self, job: Job, policy: TenantPolicy, counters: Counters, *, ahead: int) -> None:
        """Send a job marked waiting to its intake queue, and wake a round if it may start now: its tenant has more
        slots free than jobs waiting ahead of it (`ahead`, by `counters`), and the platform has a slot free.

        Otherwise a round would start nothing for it, and only read the queue and put every message back: the jobs
        ahead take the free slots first (the round that starts them, woken by a slot's release or by the first of
        them, reads this job's message too), and a slot's release wakes the dispatcher again. A backlog's
        submissions do not each cost a round; the dispatcher's schedule catches what a lost wake-up leaves."""
        s = self.services
        assert s.intake is not None
        try:
            s.intake.send(Waiting(job.job_id, job.tenant_id, job.sla_class, job.created_at))
        except Exception:  # the job is marked waiting: the sweep sends it to its queue again
            logger.exception("a waiting job was not sent to its intake queue", extra={"job_id": job.job_id})
        free = policy.jobs_in_flight - counters.tenant_in_flight
        if max(0, ahead) < free and counters.global_in_flight < s.settings.max_jobs_in_flight:
            self._wake()

    def _wake(self) -> None:
        if self.services.wake is None:
            return
        try:
            self.services.wake.wake()
        except Exception:  # the dispatcher's schedule runs a round within a minute anyway
            logger.exception("the admission dispatcher was not woken")

    # ------------------------------------------------------------------ the dispatcher

    def dispatch(self) -> DispatchReport:
        """One round: read the intake queues, order what waits, start what the slots allow, put the rest back."""
        s = self.services
        intake: IntakeQueues | None = s.intake
        report = DispatchReport()
        if intake is None or self.store.platform_in_flight() >= s.settings.max_jobs_in_flight:
            return report  # nothing could start: the next release wakes a round
        received = [w for sla_class in SLA_CLASSES for w in intake.receive(sla_class, RECEIVE_PER_CLASS)]
        report.received = len(received)
        if not received:
            return report
        policies = {t: s.budgets.policy(t) for t in sorted({w.tenant_id for w in received})}
        ordered = fair_order(received, {t: p.weight for t, p in policies.items()}, s.now())
        done: list[Waiting] = []
        kept: list[Waiting] = []
        full_tenants: set[str] = set()
        platform_full = False
        for item in ordered:
            if platform_full or item.tenant_id in full_tenants:
                kept.append(item)
                continue
            policy = policies[item.tenant_id]
            try:
                outcome = self._start_waiting(item, policy)
            except Exception:  # one message never fails the round: it is left to its receives and dead letters
                if item.receives <= 1:
                    logger.exception("an intake message could not be handled", extra={"job_id": item.job_id})
                outcome = "poison"
            if outcome == "started":
                report.started.append(item.job_id)
                done.append(item)
            elif outcome == "gone":
                report.dropped.append(item.job_id)
                done.append(item)
            elif outcome == "poison":
                report.poison.append(item.job_id)
            else:
                kept.append(item)
                if outcome == "platform_full":
                    platform_full = True
                elif outcome == "tenant_full":
                    full_tenants.add(item.tenant_id)
        if done:
            intake.delete(done)
        if kept:
            intake.put_back(kept)
        report.kept = len(kept)
        return report

    def _start_waiting(self, item: Waiting, policy: TenantPolicy) -> str:
        s = self.services
        job = s.jobs.get_job(item.job_id)
        if job is None or job.status != JobStatus.QUEUED or not job.waiting:
            return "gone"  # cancelled, expired, started already (a duplicate message): its message goes
        if (job.tenant_id, job.sla_class) != (item.tenant_id, item.sla_class):
            # The counters are the job's tenant's: a message that names another is never trusted with a slot.
            if item.receives <= 1:
                logger.warning("an intake message does not match its job", extra={"job_id": item.job_id})
            return "poison"
        limit = s.settings.max_jobs_in_flight
        if not self.store.acquire(
            item.job_id, item.tenant_id, tenant_limit=policy.jobs_in_flight, global_limit=limit, waiting=True
        ):
            counters = self.store.counters(item.tenant_id)
            if counters.global_in_flight >= limit:
                return "platform_full"
            if counters.tenant_in_flight >= policy.jobs_in_flight:
                return "tenant_full"
            return "retry"  # the job changed meanwhile: the next round sees how
        try:
            start(s, job)
        except EngineUnavailable:
            logger.warning("the engine refused a queued job; it waits again", extra={"job_id": job.job_id})
            self.store.give_back(job)
            return "platform_full"  # no use trying more this round
        now = s.now()
        waited = max(0.0, (now - item.queued_at).total_seconds())
        emit(QUEUE_WAIT_METRIC, waited, MetricUnit.Seconds, sla_class=item.sla_class)
        queue_wait_span(job, job.created_at, now)
        return "started"

    # ------------------------------------------------------------------ the sweep's repairs

    def repair(self, job: Job, *, requeue_after: timedelta) -> bool:
        """A queued job admission lost track of: one that never got to admission (a crash after it was stored) is
        admitted now; one waiting long without being seen is sent to its queue again (duplicates are dropped)."""
        s = self.services
        if not self.enabled or job.status != JobStatus.QUEUED or job.slot:
            return False
        if not job.waiting:
            self.admit(job, s.budgets.policy(job.tenant_id))
            return True
        if job.updated_at < s.now() - requeue_after and s.intake is not None:
            s.intake.send(Waiting(job.job_id, job.tenant_id, job.sla_class, job.created_at))
            s.jobs.update_job(job.job_id, {}, only_if=[JobStatus.QUEUED])  # its updated_at: not again at once
            return True
        return False


def queue_wait_span(job: Job, queued_at: datetime, dispatched_at: datetime) -> None:
    """The job's queue wait in its trace: from its intake to its dispatch, with those real times, by SLA class."""
    with tracing.job_trace(job.correlation_id, "dispatch job", {tracing.JOB_ID: job.job_id}):
        tracing.record_span(
            "queue wait",
            queued_at,
            dispatched_at,
            {tracing.JOB_ID: job.job_id, tracing.SLA_CLASS: job.sla_class, tracing.TENANT_ID: job.tenant_id},
        )
