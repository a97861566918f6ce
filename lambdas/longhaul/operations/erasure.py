"""Erasure of a job, of a tenant's data, and of jobs past their retention (`longhaul.core.erasure` has the contract).

`erase_job` cancels a running job, marks it erasing (from then it answers 410 `job-erased`), then erases each store
in `ERASURE_STORES` order, recording each store's count on the tombstone as it is done; asked again (a retry, the
sweep) it skips the stores done and goes on. `erase_tenant` erases each of the tenant's jobs so, then what the tenant
has apart from its jobs (its memory, its uploads), and answers the counts per store. `sweep_retention` (from the
scheduled sweep) erases the jobs whose retention ended and finishes erasures left unfinished.

What stays: the tombstone (the job's id, tenant, workflow, times, usage and cost, `job_erased`), the tenant's daily
usage records and the analytics day files' cost rows (billing: no content), and the audit trail's entries (who did
what to which job: no content). X-Ray keeps a deployed stack's spans for its own 30 days (it has no delete); the
local runtime's span store forgets the job's trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Attr

from longhaul.core import correlation, faults, schema
from longhaul.core.analytics import ANALYTICS_PREFIX, TABLES
from longhaul.core.auth import Principal
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus
from longhaul.core.erasure import (
    ERASURE_STORES,
    FAULT_STEP_PREFIX,
    ErasureAccepted,
    ErasureReason,
    StoreReport,
    TenantErasureReport,
)
from longhaul.core.observability import logger
from longhaul.services import Services
from longhaul.storage.erasure import OUTBOX_STATUSES, REVIEW_STATUSES, ErasureStore, drop_messages

Eraser = Callable[[Services, ErasureStore, dict[str, Any]], int]
SWEEP_BATCH = 50  # jobs a sweep erases at most (the next sweep goes on)


def store_of(services: Services) -> ErasureStore:
    return ErasureStore(
        services.jobs.table, services.artifacts.s3, services.artifacts.bucket, clock=services.jobs.clock
    )


# ---------------------------------------------------------------------- the stores


def _uploads(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    tenant = item["tenant_id"]
    return sum(
        store.delete_prefix(f"{schema.UPLOADS_PREFIX}{tenant}/{upload}")
        for upload in sorted(store.upload_ids(item["job_id"], tenant))
    )


def _artifacts(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    job_id = item["job_id"]
    deleted = store.delete_prefix(f"{schema.WORK_PREFIX}{job_id}/")
    deleted += store.delete_prefix(f"{schema.RESULTS_PREFIX}{job_id}/")
    # A Distributed Map's result files are under its workflow and map, named by the execution (the job's id).
    workflow = item.get("workflow", "")
    return deleted + store.delete_prefix(f"{schema.MAP_RESULTS_PREFIX}{workflow}/", only=re.compile(re.escape(job_id)))


def _analytics(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    day = str(item.get("created_at", ""))[:10]
    where = f"dt={day}/tenant_id={item['tenant_id']}/workflow={item.get('workflow', '')}/{item['job_id']}.parquet"
    return sum(store.delete_prefix(f"{ANALYTICS_PREFIX}{table}/{where}") for table in TABLES)


def _reviews(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    partitions = [schema.reviews_partition(item["tenant_id"], status) for status in REVIEW_STATUSES]
    reviews = {key[schema.PK] for key in store.indexed(partitions, item["job_id"])}
    review = item.get("review") or {}
    if review.get("review_id"):
        reviews.add(schema.review_key(str(review["review_id"]))[schema.PK])
    return sum(store.delete_keys(store.partition(pk)) for pk in sorted(reviews))


def _webhooks(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    keys = store.indexed([schema.outbox_partition(status) for status in OUTBOX_STATUSES], item["job_id"])
    return store.delete_keys(keys)


def _memory(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    job_id = item["job_id"]
    derived = Attr("job_id").eq(job_id) | Attr("provenance.job_id").eq(job_id)
    return store.delete_keys(store.partition(schema.memory_pk(item["tenant_id"]), filter_expression=derived))


def _streams(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    return store.delete_keys(store.partition(schema.stream_pk(item["job_id"])))


def _history(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    return store.drop_history_entry(str(item.get("workflow", "")), item["job_id"])


def _idempotency(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    key = item.get("idempotency_key")
    if not key:
        return 0
    found = store.partition(schema.idempotency_key(item["tenant_id"], str(key))[schema.PK])
    return store.delete_keys(found)


def _queues(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    """The job's messages in its workflow's step dead-letter queues. (A cancelled job's message still in an intake
    queue names only its id, and the admission dispatcher drops it as it reads it: not read here, which would hold
    back other tenants' jobs.)"""
    from longhaul.adapters import aws

    urls = list(services.settings.dead_letter_queues.get(str(item.get("workflow", "")), {}).values())
    if not urls:
        return 0
    sqs = aws.client("sqs")
    return sum(drop_messages(sqs, url, item["job_id"]) for url in urls)


def _traces(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    correlation_id = item.get("correlation_id")
    forget = getattr(services.traces, "forget", None)  # the local span store; X-Ray has no delete
    if not correlation_id or forget is None:
        return 0
    return int(forget(correlation.trace_id_for(str(correlation_id))))


def _records(services: Services, store: ErasureStore, item: dict[str, Any]) -> int:
    job_id = item["job_id"]
    deleted = store.delete_keys(store.partition(schema.job_pk(job_id), keep_sk=schema.JOB_SK))
    if item.get("retain_until"):
        deleted += store.delete_keys([schema.retention_key(str(item["retain_until"]), job_id)])
    return deleted


ERASERS: dict[str, Eraser] = {
    "uploads": _uploads,
    "artifacts": _artifacts,
    "analytics": _analytics,
    "reviews": _reviews,
    "webhooks": _webhooks,
    "memory": _memory,
    "streams": _streams,
    "history": _history,
    "idempotency": _idempotency,
    "queues": _queues,
    "traces": _traces,
    "records": _records,
}
assert tuple(ERASERS) == ERASURE_STORES


# ---------------------------------------------------------------------- a job


def erased_at(services: Services, job_id: str, *, tenant_id: str | None) -> datetime | None:
    """When the job's erasure began, if it is erased (or being erased) and the caller's (any tenant's: None)."""
    item = store_of(services).item(job_id)
    if item is None or "erased_at" not in item or (tenant_id is not None and item.get("tenant_id") != tenant_id):
        return None
    return datetime.fromisoformat(str(item["erased_at"]))


class StillRunning(Exception):
    """The job has not ended and nothing was given to cancel it with (the sweep erases it once it has ended)."""


def erase_job(
    services: Services,
    job_id: str,
    *,
    reason: ErasureReason,
    by: Principal,
    tenant_id: str | None = None,
    cancel: Callable[[str], None] | None = None,
) -> ErasureAccepted | None:
    """Erase the job (of `tenant_id`, when given), or go on with its erasure; None when there is no such job. A job
    that has not ended is cancelled first with `cancel` (the API's cancellation); without it, `StillRunning`."""
    store = store_of(services)
    item = store.item(job_id)
    if item is None or (tenant_id is not None and item.get("tenant_id") != tenant_id):
        return None
    cancelled = False
    if "erased_at" not in item:
        if JobStatus(item["status"]) not in TERMINAL_STATUSES:
            if cancel is None:
                raise StillRunning(job_id)
            cancel(job_id)  # a job that cannot be stopped now is not erased: the caller retries (503)
            cancelled = True
        item = store.begin(job_id, reason=reason, by=f"{by.role}:{by.key_id or by.tenant_id}")
        if item is None:
            return None
    return _go_on(services, store, item, cancelled=cancelled)


def _go_on(services: Services, store: ErasureStore, item: dict[str, Any], *, cancelled: bool) -> ErasureAccepted:
    job_id = item["job_id"]
    done: dict[str, int] = {k: int(v) for k, v in (item.get("erasure_done") or {}).items()}
    if not item.get("erasure_complete"):
        injector = faults.active()
        for name in ERASURE_STORES:
            if name in done:
                continue
            deleted = ERASERS[name](services, store, item)
            # A store boundary's fault: after the store's deletion, before its count is recorded.
            injector.crash_point(f"{FAULT_STEP_PREFIX}{name}", None, job_id=job_id)
            store.record(job_id, name, deleted)
            done[name] = deleted
        item = store.finish({**item, "erasure_done": done})
        logger.info("job erased", extra={"job_id": job_id, "erasure": done})
    return ErasureAccepted(
        job_id=job_id,
        status="erased",
        erased_at=datetime.fromisoformat(str(item["erased_at"])),
        cancelled=cancelled,
        stores=list(ERASURE_STORES),
        report=[StoreReport(store=name, deleted=done.get(name, 0)) for name in ERASURE_STORES],
    )


# ---------------------------------------------------------------------- a tenant


def erase_tenant(
    services: Services, tenant_id: str, *, by: Principal, cancel: Callable[[str], None] | None = None
) -> TenantErasureReport:
    """Erase every job of the tenant, then its memory and its uploads; the counts per store over all of them."""
    store = store_of(services)
    totals = dict.fromkeys(ERASURE_STORES, 0)
    jobs = 0
    for job_id in sorted(set(store.tenant_jobs(tenant_id))):
        item = store.item(job_id)
        before = dict((item or {}).get("erasure_done") or {})
        done = erase_job(services, job_id, reason="tenant", by=by, tenant_id=tenant_id, cancel=cancel)
        if done is None:
            continue
        jobs += 1
        for line in done.report:
            if line.store not in before:
                totals[line.store] += line.deleted
    # What the tenant has apart from its jobs: memory no job's provenance names, uploads no job used.
    totals["memory"] += store.delete_keys(store.partition(schema.memory_pk(tenant_id)))
    totals["uploads"] += store.delete_prefix(f"{schema.UPLOADS_PREFIX}{tenant_id}/")
    logger.info("tenant erased", extra={"tenant_id": tenant_id, "jobs": jobs, "erasure": totals})
    return TenantErasureReport(
        tenant_id=tenant_id,
        jobs=jobs,
        status="erased",
        report=[StoreReport(store=name, deleted=count) for name, count in totals.items()],
    )


# ---------------------------------------------------------------------- retention (the sweep)


def _sweeper() -> Principal:
    """Who erases a job at the end of its retention (built when used: a model is built on its first instance)."""
    return Principal(tenant_id="-", role="operator", key_id="retention-sweep")


def sweep_retention(services: Services, now: datetime) -> dict[str, int]:
    """Erase the jobs whose retention has ended, and finish erasures left unfinished (a crash, a timeout)."""
    store = store_of(services)
    counts = {"retention_erased": 0, "erasures_finished": 0}
    for entry in store.due(iso(now), limit=SWEEP_BATCH):
        job_id = str(entry["job_id"])
        try:
            erased = erase_job(services, job_id, reason="retention", by=_sweeper())
        except StillRunning:
            continue  # erased by a sweep after it ends
        if erased is None:
            store.delete_keys([{schema.PK: entry[schema.PK], schema.SK: entry[schema.SK]}])  # its job is gone
        counts["retention_erased"] += 1
    for pending in store.pending(limit=SWEEP_BATCH):
        item = store.item(str(pending["job_id"]))
        if item is not None and not item.get("erasure_complete"):
            _go_on(services, store, item, cancelled=False)
            counts["erasures_finished"] += 1
    return counts
