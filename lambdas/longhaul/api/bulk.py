"""Operators act on many jobs at once: replay (`POST /v1/ops/jobs:replay`) or terminate (`POST /v1/ops/jobs:terminate`)
every job a filter matches.

A dry run (the default) lists the matching jobs and, for each, what would happen: a replay's plan (the same checks and
plan as one job's dry run) or the status it would end in. Executing acts on each job as the one-job action does (a
replay goes through admission like a submission: it starts holding a slot or waits in its class's queue), records
who and why on each job's event log, and answers what was done per job. With an Idempotency-Key, the jobs taken are
frozen when the action first runs and each job's outcome is kept as it is done (`storage.bulk`): the same request
again answers the same and acts on no job twice, and a retry after a crash does only the rest.

Which jobs: each status of the filter is one listing by last change (`since`/`until` as its key condition), the rest
of the filter checked on each job (`storage.listing.JobFilter`). A replay by filter leaves out the jobs an operator
terminated (`error.kind` `terminated`) unless the filter asks for that kind.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace
from typing import Any, Literal

from longhaul.api.jobs import JobService
from longhaul.api.terminate import STOPPABLE, terminate
from longhaul.core.auth import Principal
from longhaul.core.contracts import (
    TERMINATED_KIND,
    BulkFilter,
    BulkJobOutcome,
    BulkOutcome,
    BulkReplayRequest,
    BulkRequest,
    BulkTerminateRequest,
    JobStatus,
    TerminateOutcome,
)
from longhaul.core.ports import WorkflowEngine
from longhaul.core.problems import ApiProblem, IdempotencyKeyReused, InvalidRequest
from longhaul.core.records import Job
from longhaul.operations import replay as replays
from longhaul.services import Services
from longhaul.storage.bulk import BulkRecord, BulkRecords, BulkTarget
from longhaul.storage.listing import JobFilter

# The statuses each action applies to when the filter names none.
REPLAY_STATUSES = (JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED)
TERMINATE_STATUSES = (*sorted(STOPPABLE), JobStatus.FAILED)


def bulk_replay(
    service: JobService, principal: Principal, request: BulkReplayRequest, idempotency_key: str | None
) -> BulkOutcome:
    return _bulk(service, principal, "replay", request, idempotency_key)


def bulk_terminate(
    service: JobService, principal: Principal, request: BulkTerminateRequest, idempotency_key: str | None
) -> BulkOutcome:
    return _bulk(service, principal, "terminate", request, idempotency_key)


def matching_jobs(services: Services, action: str, given: BulkFilter, limit: int) -> tuple[list[Job], bool]:
    """The jobs the filter matches (most recently changed first, at most `limit`) and whether more matched."""
    statuses = given.statuses() or list(REPLAY_STATUSES if action == "replay" else TERMINATE_STATUSES)
    narrow = JobFilter(
        workflow=given.workflow,
        failed_step=given.failed_step,
        error_kind=given.error_kind,
        escalated=given.escalated,
        updated_since=given.since,
        updated_until=given.until,
    )
    jobs, more = services.jobs.find_jobs(statuses, tenant_id=given.tenant_id, narrow=narrow, limit=limit)
    if action == "replay" and given.error_kind != TERMINATED_KIND:  # an operator ended these for good
        jobs = [j for j in jobs if j.error is None or j.error.kind != TERMINATED_KIND]
    return jobs, more


def _bulk(
    service: JobService,
    principal: Principal,
    action: Literal["replay", "terminate"],
    request: BulkRequest,
    idempotency_key: str | None,
) -> BulkOutcome:
    s = service.services
    reason = request.reason or f"bulk {action} ({_described(request.filter)})"
    if request.dry_run:
        jobs, more = matching_jobs(s, action, request.filter, request.limit)
        planning = JobService(replace(s, engine=_KnownVersions(s.engine)), long_poll=service.long_poll)
        planned = [_dry(planning, principal, action, request, job, reason) for job in jobs]
        return _answer(action, request, planned, more, None)
    records = BulkRecords(s.jobs.table, clock=s.jobs.clock)
    record: BulkRecord | None = None
    if idempotency_key is not None:
        record = _claimed(s, records, principal, action, request, idempotency_key)
        targets = [(t.job_id, t.attempts) for t in record.targets]
        more = record.more
    else:
        jobs, more = matching_jobs(s, action, request.filter, request.limit)
        targets = [(j.job_id, j.attempts) for j in jobs]
    outcomes: list[BulkJobOutcome] = []
    for job_id, attempts in targets:
        kept = record.done.get(job_id) if record is not None else None
        if kept is not None:  # done by this action before: its answer, not a second act
            outcomes.append(BulkJobOutcome.model_validate_json(kept))
            continue
        job = s.jobs.get_job(job_id)
        if job is None:
            continue
        outcome = _act(service, principal, action, request, job, attempts, reason, idempotency_key)
        if idempotency_key is not None and not outcome.retry:  # (a job the engine did not take now: the retry does)
            kept = records.done(principal.tenant_id, idempotency_key, job_id, outcome.model_dump(mode="json"))
            outcome = BulkJobOutcome.model_validate_json(kept)  # (a concurrent send's, if it was first)
        outcomes.append(outcome)
    return _answer(action, request, outcomes, more, idempotency_key)


def _claimed(
    s: Services,
    records: BulkRecords,
    principal: Principal,
    action: str,
    request: BulkRequest,
    key: str,
) -> BulkRecord:
    """The action kept under the key: found (the same request: its jobs; another: 422), or claimed now with the jobs
    the filter matches now."""
    payload = json.dumps({"action": action, **request.model_dump(mode="json")}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(payload.encode()).hexdigest()
    for _ in range(2):
        found = records.get(principal.tenant_id, key)
        if found is not None:
            if found.payload_hash != digest:
                raise IdempotencyKeyReused(
                    f"Idempotency-Key {key!r} was used for another bulk action within 24 h; use a new key",
                    action=found.action,
                )
            return found
        jobs, more = matching_jobs(s, action, request.filter, request.limit)
        targets = [BulkTarget(job_id=j.job_id, attempts=j.attempts) for j in jobs]
        claimed = records.claim(
            principal.tenant_id, key, action=action, payload_hash=digest, targets=targets, more=more
        )
        if claimed is not None:
            return claimed
    raise InvalidRequest(f"Idempotency-Key {key!r} could not be claimed; use a new key")


def _dry(
    service: JobService,
    principal: Principal,
    action: str,
    request: BulkRequest,
    job: Job,
    reason: str,
) -> BulkJobOutcome:
    if action == "replay":
        assert isinstance(request, BulkReplayRequest)
        try:
            plan = replays.replay(
                service.services,
                principal,
                job.job_id,
                from_step=request.from_step,
                reason=reason,
                dry_run=True,
                read=job,
            )
        except ApiProblem as refused:
            return _outcome(job, "refused", problem=refused.detail or refused.title)
        return _outcome(job, "would_replay", plan=plan)
    assert isinstance(request, BulkTerminateRequest)
    to = JobStatus(request.status)
    if job.status not in STOPPABLE and not (job.status == JobStatus.FAILED and to == JobStatus.FAILED):
        return _outcome(job, "refused", problem=f"job {job.job_id} is {job.status.value}: it is not terminated")
    would = TerminateOutcome(job_id=job.job_id, status=to, previous_status=job.status, message=request.message)
    return _outcome(job, "would_terminate", terminated=would)


def _act(
    service: JobService,
    principal: Principal,
    action: str,
    request: BulkRequest,
    job: Job,
    attempts: int,
    reason: str,
    key: str | None,
) -> BulkJobOutcome:
    try:
        if action == "replay":
            assert isinstance(request, BulkReplayRequest)
            if job.attempts > attempts:  # replayed since the action took it (by it, before a crash, or by someone)
                return _outcome(job, "refused", problem=f"job {job.job_id} was replayed meanwhile")
            plan = replays.replay(
                service.services,
                principal,
                job.job_id,
                from_step=request.from_step,
                reason=reason + (f" [bulk {key}]" if key else ""),
            )
            return _outcome(job, "replayed", plan=plan)
        assert isinstance(request, BulkTerminateRequest)
        ended = terminate(service, principal, job.job_id, status=request.status, reason=reason, message=request.message)
        return _outcome(job, "terminated", terminated=ended)
    except ApiProblem as refused:
        return _outcome(job, "refused", problem=refused.detail or refused.title, retry=refused.status >= 500)


class _KnownVersions:
    """The engine, answering `has_version` once per (workflow, version) for one request: a bulk plan of many jobs of
    one deploy asks the same question of each (a DescribeStateMachine with the whole definition)."""

    def __init__(self, engine: WorkflowEngine) -> None:
        self._engine = engine
        self._known: dict[tuple[str, str], bool] = {}

    def has_version(self, workflow: str, version: str) -> bool:
        if (workflow, version) not in self._known:
            self._known[(workflow, version)] = self._engine.has_version(workflow, version)
        return self._known[(workflow, version)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def _outcome(job: Job, outcome: str, **fields: Any) -> BulkJobOutcome:
    return BulkJobOutcome.model_validate(
        {
            "job_id": job.job_id,
            "tenant_id": job.tenant_id,
            "workflow": job.workflow,
            "status": job.status,
            "error_kind": job.error.kind if job.error else None,
            "failed_step": job.error.step if job.error else None,
            "outcome": outcome,
            **fields,
        }
    )


def _answer(
    action: Literal["replay", "terminate"],
    request: BulkRequest,
    outcomes: list[BulkJobOutcome],
    more: bool,
    key: str | None,
) -> BulkOutcome:
    return BulkOutcome(
        action=action,
        dry_run=request.dry_run,
        filter=request.filter,
        matched=len(outcomes),
        more=more,
        counts=dict(Counter(o.outcome for o in outcomes)),
        jobs=outcomes,
        idempotency_key=key,
    )


def _described(given: BulkFilter) -> str:
    fields = given.model_dump(mode="json", exclude_none=True)
    return ", ".join(f"{k}={v}" for k, v in fields.items()) or "every job"
