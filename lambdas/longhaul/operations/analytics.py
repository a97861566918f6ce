"""Analytics over every job: the export of each finished job as Parquet, and the usage report computed from it.

Where the export runs: a function of its own on a schedule (`stacks/analytics.py`), which exports the jobs whose
record changed since its last run (the `by_state` index, terminal statuses, after its watermark). Nothing is added to
a job's path: no state transition, no write to the job, no call from the functions that finish it, so an export that
fails can never fail or slow a job. A run that fails as a whole leaves the watermark where it was (the next run does
its work); a job whose own export fails is logged and passed. A job's objects are keyed by its creation day, tenant,
workflow and id, so exporting it again (a replayed job finishing again, its cost settled by a later read)
overwrites the same three objects: the export is idempotent.

A run then folds its jobs' rows into one file per table and day (`analytics-daily/<table>/dt=<day>.parquet`): the
day file read, the rows of the jobs exported again dropped, theirs added, written back only over the version read
(S3's conditional write: two runs that overlap never lose each other's rows; the loser reads and folds again). So
exporting a job again replaces its rows there too.

The report brings the window's day files (three per day) into a local directory (`AnalyticsStore.sync_days`: a file
whose ETag has not changed is not read again) and queries them with DuckDB, filtering a tenant's report by its
tenant; Athena runs the same SQL over the job files on AWS (the manual's how-to `report-usage` gives it).
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from longhaul.adapters import parquet
from longhaul.core.analytics import (
    ANALYTICS_PREFIX,
    SINCE,
    TABLES,
    CallRow,
    FailureKinds,
    JobExport,
    JobRow,
    Percentiles,
    ReportBy,
    SpendRow,
    StepDurations,
    StepRow,
    UsageReport,
    object_key,
)
from longhaul.core.budgets import to_micro, usd
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, EventView
from longhaul.core.observability import logger
from longhaul.core.problems import BadRequest
from longhaul.core.records import Job, version_number
from longhaul.operations.costs import with_transitions
from longhaul.services import Services
from longhaul.storage.analytics import AnalyticsStore

EVENT_PAGES = 200  # 100 events a page: a job with more has its first 20,000 events exported
#: A run exports jobs whose record changed after its watermark less this (a write committed late, a clock's skew).
OVERLAP = timedelta(minutes=2)
#: Jobs one run exports at most (about a tenth of a second each): a backlog (the first run) takes several runs.
MAX_PER_RUN = 1_000
#: Reads and folds of one day file before a run gives up (another run wrote it each time in between).
FOLD_TRIES = 5
_ATTEMPT_ENDS = frozenset({"step_finished", "step_attempt_failed", "item_failed"})


# --- the rows of one job -----------------------------------------------------------------------------------------


def _events(services: Services, job_id: str) -> list[EventView]:
    events: list[EventView] = []
    after: int | None = 0
    for _ in range(EVENT_PAGES):
        page, after = services.jobs.list_events(job_id, after=after or 0, limit=100)
        events.extend(page)
        if after is None or not page:
            break
    return events


def _step_rows(job: Job, events: list[EventView], version: int | None) -> list[StepRow]:
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for event in events:
        if event.step is None or event.type not in {"step_started", *_ATTEMPT_ENDS}:
            continue
        run = runs.setdefault(
            (event.step, -1 if event.item is None else event.item),
            {"first": event.at, "last": event.at, "attempts": 0, "status": "started", "kinds": []},
        )
        run["first"], run["last"] = min(run["first"], event.at), max(run["last"], event.at)
        if event.type == "step_started":
            run["attempts"] += 1
        elif event.type == "step_finished":
            run["status"] = "finished"
        else:
            kind = event.detail.get("kind")
            if isinstance(kind, str) and kind not in run["kinds"]:
                run["kinds"].append(kind)
            if event.type == "item_failed" or event.detail.get("will_retry") is False:
                run["status"] = "failed"
    return [
        StepRow(
            job_id=job.job_id,
            step=step,
            item=item,
            attempts=max(run["attempts"], 1),
            status=run["status"],
            duration_seconds=round((run["last"] - run["first"]).total_seconds(), 3),
            failure_kinds=run["kinds"],
            workflow_version=version,
        )
        for (step, item), run in sorted(runs.items())
    ]


def _failed_after(events: list[EventView]) -> dict[tuple[str | None, int], list[datetime]]:
    """When each step (item) had an attempt fail."""
    failed: dict[tuple[str | None, int], list[datetime]] = defaultdict(list)
    for event in events:
        if event.type in ("step_attempt_failed", "item_failed"):
            failed[(event.step, -1 if event.item is None else event.item)].append(event.at)
    return failed


def rows_of(services: Services, job: Job) -> JobExport:
    """A finished job's rows: its record and cost, its steps and items, its model calls."""
    job = with_transitions(services, job)
    view = job.view(now=services.now())
    version = version_number(job.state_machine_version)
    events = _events(services, job.job_id)
    failed = _failed_after(events)
    calls: list[CallRow] = []
    for charge in sorted(services.budgets.ledger(job.job_id), key=lambda c: (c.at, c.charge_id)):
        if charge.status == "released":  # held and given back: nothing was spent
            continue
        item = -1 if charge.item is None else charge.item
        kept = not any(at >= charge.at for at in failed.get((charge.step, item), []))
        calls.append(
            CallRow(
                job_id=job.job_id,
                charge_id=charge.charge_id,
                step=charge.step,
                item=item,
                at=charge.at,
                route=charge.route,
                provider=charge.provider,
                model_id=charge.model_id,
                input_tokens=charge.input_tokens,
                output_tokens=charge.output_tokens,
                cost_micro=charge.cost_micro,
                kept=kept,
                workflow_version=charge.workflow_version if charge.workflow_version is not None else version,
            )
        )
    retried = [c for c in calls if not c.kept]
    cost = view.cost
    timing = _timing(services, job, events)
    row = JobRow(
        job_id=job.job_id,
        status=job.status.value,
        sla_class=job.sla_class,
        model_lane=job.model_lane,
        route=job.route,
        workflow_version=version,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        attempts=job.attempts,
        error_kind=job.error.kind if job.error is not None else None,
        failed_step=job.error.step if job.error is not None else None,
        input_tokens=job.usage_input_tokens,
        output_tokens=job.usage_output_tokens,
        cost_micro=_micro(cost.total) if cost is not None else 0,
        model_cost_micro=_micro(cost.model.usd) if cost is not None else 0,
        orchestration_cost_micro=_micro(cost.orchestration.usd) if cost is not None else 0,
        retry_cost_micro=sum(c.cost_micro for c in retried),
        retry_tokens=sum(c.input_tokens + c.output_tokens for c in retried),
        cost_estimated=cost.estimated if cost is not None else True,
        queue_wait_seconds=timing.queue_wait_seconds,
        review_wait_seconds=timing.review_wait_seconds,
        total_seconds=timing.total_seconds,
    )
    return JobExport(
        day=job.created_at.astimezone(UTC).date().isoformat(),
        tenant_id=job.tenant_id,
        workflow=job.workflow,
        job=row,
        steps=_step_rows(job, events, version),
        calls=calls,
    )


def _timing(services: Services, job: Job, events: list[EventView]) -> Any:
    from longhaul.core.timing import job_timing

    return job_timing(
        events, created_at=job.created_at, started_at=job.started_at, finished_at=job.finished_at, now=services.now()
    )


def _micro(dollars: str) -> int:
    from decimal import Decimal

    return to_micro(Decimal(dollars))


# --- the export --------------------------------------------------------------------------------------------------


def export_job(services: Services, job_id: str) -> JobExport | None:
    """Export one job (an operator's re-run): its three objects, then its rows folded into its day's files."""
    with tempfile.TemporaryDirectory() as tmp:
        export = _write_job(services, job_id, Path(tmp))
        if export is not None:
            fold_days(services.analytics, Path(tmp), {export.day: [job_id]})
    return export


def _write_job(services: Services, job_id: str, staged: Path) -> JobExport | None:
    """Write a finished job's three objects (overwriting any earlier export of it), then a copy of each under `staged`
    (laid out as `analytics/`) for the fold; None for a job that is not there or has not finished."""
    job = services.jobs.get_job(job_id)
    if job is None or job.status not in TERMINAL_STATUSES:
        return None
    export = rows_of(services, job)
    where = {"day": export.day, "tenant_id": export.tenant_id, "workflow": export.workflow, "job_id": job_id}
    tables: dict[str, list[dict[str, Any]]] = {
        "jobs": [export.job.model_dump()],
        "steps": [s.model_dump() for s in export.steps],
        "calls": [c.model_dump() for c in export.calls],
    }
    written: dict[str, bytes] = {}
    for table, rows in tables.items():
        key = object_key(table, **where)  # type: ignore[arg-type]
        written[key] = parquet.encode(table, rows)
        services.analytics.put(key, written[key])
        services.analytics.register(table, day=export.day, tenant_id=export.tenant_id, workflow=export.workflow)
    for key, body in written.items():  # all three or none: a job half-written is not folded
        local = staged / key.removeprefix(ANALYTICS_PREFIX)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(body)
    return export


def fold_days(store: AnalyticsStore, staged: Path, jobs_by_day: dict[str, list[str]]) -> None:
    """Fold the job files under `staged` into their days' files: for each table and day, read the day file, drop the
    rows of the jobs exported again, add theirs, and write it back only if no other run wrote it meanwhile (else
    read it again and fold again, `FOLD_TRIES` times at most)."""
    work = staged / "_fold"
    work.mkdir(exist_ok=True)
    for day, job_ids in sorted(jobs_by_day.items()):
        for table in TABLES:
            current, target = work / f"{table}-{day}.current.parquet", work / f"{table}-{day}.parquet"
            for _ in range(FOLD_TRIES):
                etag = store.day_file(table, day, current)
                parquet.fold(table, current if etag else None, staged / table / f"dt={day}", job_ids, target)
                if store.put_day_file(table, day, target, etag):
                    break
            else:
                raise RuntimeError(f"the {table} file of {day} kept changing: {FOLD_TRIES} folds lost the race")


def export_finished(services: Services) -> dict[str, int]:
    """The scheduled run: export the jobs finished (or changed after finishing) since the watermark, oldest change
    first, at most `MAX_PER_RUN`, then fold them into their days' files; the watermark then moves past them (to the
    run's start when there were no more). A job whose export fails is logged with its id and passed (one job's bad
    data must not hold up every later job's): invoke the function with `{"job_id": …}` to export it again. A fold
    that fails fails the run (the watermark stays: the next run exports those jobs again)."""
    started = services.now()
    mark = services.analytics.watermark()
    since = iso(datetime.fromisoformat(mark.at) - OVERLAP) if mark.at else None
    # The overlap reads again what the last run exported: those are skipped unless they changed since.
    found = [(at, job) for at, job in services.analytics.finished_since(since) if mark.recent.get(job) != at]
    batch = found[:MAX_PER_RUN]
    exported = failed = 0
    done: dict[str, str] = {}
    by_day: dict[str, list[str]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for at, job_id in batch:
            try:
                export = _write_job(services, job_id, Path(tmp))
            except Exception:
                failed += 1
                logger.exception("analytics export failed", extra={"job_id": job_id})
                continue
            done[job_id] = at
            if export is not None:
                exported += 1
                if job_id not in by_day[export.day]:
                    by_day[export.day].append(job_id)
        fold_days(services.analytics, Path(tmp), by_day)
    # With more left, the next run goes on after the last one done (the overlap reads from there).
    at = iso(datetime.fromisoformat(batch[-1][0]) + OVERLAP) if len(found) > MAX_PER_RUN else iso(started)
    floor = iso(datetime.fromisoformat(at) - OVERLAP)
    recent = {job: change for job, change in {**mark.recent, **done}.items() if change > floor}
    services.analytics.set_watermark(at, recent)
    return {"exported": exported, "failed": failed, "left": max(0, len(found) - MAX_PER_RUN)}


# --- the report --------------------------------------------------------------------------------------------------


def window(since: str, until: datetime | None, now: datetime) -> tuple[datetime, datetime]:
    """`since` as `7d`, `24h`, `30m` or an ISO time; `until` defaults to now."""
    end = until or now
    match = SINCE.match(since)
    if match:
        amount = int(match["n"])
        start = (
            end
            - {"m": timedelta(minutes=amount), "h": timedelta(hours=amount), "d": timedelta(days=amount)}[match["unit"]]
        )
    else:
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            raise BadRequest(f"since must be like 7d, 24h, 30m or an ISO time, not {since!r}") from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    if start >= end:
        raise BadRequest("since must come before until")
    if end - start > timedelta(days=400):
        raise BadRequest("a report covers 400 days at most")
    return start, end


def _days(start: datetime, end: datetime) -> list[str]:
    first, last = start.astimezone(UTC).date(), end.astimezone(UTC).date()
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def cache_root(services: Services) -> Path:
    """This process's copy of the bucket's day files (a Lambda sandbox's `/tmp` keeps it warm)."""
    return Path(tempfile.gettempdir()) / f"longhaul-analytics-{os.getpid()}" / services.settings.bucket_name


def report(
    services: Services,
    *,
    since: str,
    until: datetime | None = None,
    tenant_id: str | None = None,
    by: ReportBy = "workflow",
    root: Path | None = None,
    sync: bool = True,
) -> UsageReport:
    """Spend per `by` group, step durations (p50/p95), failure kinds, review waits and retry cost of the jobs
    created in the window (and of `tenant_id` only, when given)."""
    start, end = window(since, until, services.now())
    root = root or cache_root(services)
    if sync:
        services.analytics.sync_days(root, _days(start, end))
    return query_report(root, start=start, end=end, tenant_id=tenant_id, by=by)


_GROUP = {
    "workflow": "j.workflow",
    "version": "j.workflow || ' v' || coalesce(CAST(j.workflow_version AS VARCHAR), '-')",
}


def query_report(root: Path, *, start: datetime, end: datetime, tenant_id: str | None, by: ReportBy) -> UsageReport:
    """The report over the day files under `root` (`<table>/<day>.parquet`); a tenant's rows only with `tenant_id`."""
    days = _days(start, end)
    lo, hi = start.astimezone(UTC).replace(tzinfo=None), end.astimezone(UTC).replace(tzinfo=None)
    with parquet.Session(root, days) as db:
        # The window's jobs, then their steps and calls, each read once.
        db.run(
            "CREATE TEMP TABLE j AS SELECT * FROM {jobs} WHERE created_at >= ? AND created_at < ?"
            + (" AND tenant_id = ?" if tenant_id else ""),
            [lo, hi, *([tenant_id] if tenant_id else [])],
        )
        db.run("CREATE TEMP TABLE st AS SELECT * FROM {steps} WHERE job_id IN (SELECT job_id FROM j)")
        db.run("CREATE TEMP TABLE c AS SELECT * FROM {calls} WHERE job_id IN (SELECT job_id FROM j)")
        total = db.run(
            "SELECT count(*), coalesce(sum(cost_micro), 0), coalesce(sum(model_cost_micro), 0), "
            "coalesce(sum(retry_cost_micro), 0), coalesce(sum(retry_tokens), 0) FROM j"
        )[0]
        if by in ("route", "step"):
            column = "c.route" if by == "route" else "c.step"
            spend_sql = (
                f"SELECT coalesce({column}, '-') AS k, count(DISTINCT j.job_id), "
                "count(DISTINCT j.job_id) FILTER (WHERE j.status = 'completed'), "
                "count(DISTINCT j.job_id) FILTER (WHERE j.status = 'failed'), "
                "sum(c.input_tokens), sum(c.output_tokens), sum(c.cost_micro), "
                "coalesce(sum(c.cost_micro) FILTER (WHERE NOT c.kept), 0) "
                "FROM j JOIN c ON c.job_id = j.job_id GROUP BY k ORDER BY sum(c.cost_micro) DESC, k"
            )
        else:
            spend_sql = (
                f"SELECT {_GROUP[by]} AS k, count(*), count(*) FILTER (WHERE j.status = 'completed'), "
                "count(*) FILTER (WHERE j.status = 'failed'), sum(j.input_tokens), sum(j.output_tokens), "
                "sum(j.cost_micro), sum(j.retry_cost_micro) FROM j GROUP BY k ORDER BY sum(j.cost_micro) DESC, k"
            )
        spend = [
            SpendRow(
                key=str(k),
                jobs=n,
                completed=done,
                failed=bad,
                input_tokens=int(i or 0),
                output_tokens=int(o or 0),
                usd=usd(int(c or 0)),
                retry_usd=usd(int(r or 0)),
            )
            for k, n, done, bad, i, o, c, r in db.run(spend_sql)
        ]
        steps = [
            StepDurations(
                workflow=w,
                step=s,
                runs=n,
                attempts=int(a),
                seconds=Percentiles(p50=round(p50, 3), p95=round(p95, 3)),
            )
            for w, s, n, a, p50, p95 in db.run(
                "SELECT workflow, step, count(*), sum(attempts), quantile_cont(duration_seconds, 0.5), "
                "quantile_cont(duration_seconds, 0.95) FROM st GROUP BY 1, 2 ORDER BY 1, 2"
            )
        ]
        failures = [
            FailureKinds(workflow=w, step=s, kind=k, count=n)
            for w, s, k, n in db.run(
                "SELECT workflow, step, kind, count(*) FROM st, unnest(st.failure_kinds) AS u(kind) "
                "GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3"
            )
        ]
        reviews, r50, r95, q50, q95 = db.run(
            "SELECT count(*) FILTER (WHERE review_wait_seconds > 0), "
            "quantile_cont(review_wait_seconds, 0.5) FILTER (WHERE review_wait_seconds > 0), "
            "quantile_cont(review_wait_seconds, 0.95) FILTER (WHERE review_wait_seconds > 0), "
            "quantile_cont(queue_wait_seconds, 0.5), quantile_cont(queue_wait_seconds, 0.95) FROM j"
        )[0]
    return UsageReport(
        since=start,
        until=end,
        tenant_id=tenant_id,
        by=by,
        jobs=total[0],
        total_usd=usd(int(total[1])),
        model_usd=usd(int(total[2])),
        retry_usd=usd(int(total[3])),
        retry_tokens=int(total[4]),
        spend=spend,
        steps=steps,
        failures=failures,
        review_wait_seconds=Percentiles(p50=round(r50, 3), p95=round(r95, 3)) if reviews else None,
        review_waits=reviews,
        queue_wait_seconds=Percentiles(p50=round(q50, 3), p95=round(q95, 3)) if total[0] else None,
    )
