"""Analytics over every job (`longhaul.operations.analytics`): a finished job's rows exported as Parquet under
`analytics/` (Hive partitions, idempotent keys), the scheduled export's watermark, and the usage report computed from
the files with DuckDB: its totals are the sum of the jobs' costs, its steps' durations and failure kinds, its retry
cost, a tenant's report holds only that tenant's jobs. The stores run on moto; the engine is faked."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from longhaul.adapters import parquet
from longhaul.core import schema
from longhaul.core.analytics import PARTITION_COLUMNS, TABLES, columns
from longhaul.core.budgets import usd
from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus
from longhaul.core.problems import BadRequest
from longhaul.operations import analytics
from longhaul.services import Services
from longhaul.storage.jobs import NewJob
from tests.unit.api_helpers import assert_problem
from tests.unit.conftest import KEY_A, KEY_OPS, TENANT_A, TENANT_B, CallApi, FakeClock

S = JobStatus
WORKFLOW = "document-analysis"


def charge(services: Services, job_id: str, n: int, *, step: str, cost: int, tokens: int, at: str) -> None:
    services.jobs.table.put_item(
        Item={
            **schema.charge_key(job_id, f"c{n}"),
            "charge_id": f"c{n}",
            "status": "settled",
            "step": step,
            "at": at,
            "route": "default",
            "provider": "offline",
            "model_id": "offline:test",
            "input_tokens": tokens,
            "output_tokens": tokens // 2,
            "cost_micro": cost,
            "tenant_id": "t",
        }
    )


def finished_job(
    services: Services, clock: FakeClock, job_id: str, *, tenant: str, retried: bool = False, fail: bool = False
) -> str:
    """A job of two steps: `parse` (one attempt failed `transient` first when `retried`, with a model call that
    failure wasted), then `summarize`; it completes (or fails in `summarize`)."""
    jobs = services.jobs
    spent = {"cost_micro": 3_000 + 300 * retried, "usage_input_tokens": 1_200 + 100 * retried}
    spent["usage_output_tokens"] = spent["usage_input_tokens"] // 2
    jobs.create_job(NewJob(job_id, tenant, WORKFLOW, f"work/{job_id}/input.json", "h", "offline:test", 30))
    jobs.transition(job_id, S.RUNNING, event="job_started")
    n = 0
    jobs.append_event(job_id, "step_started", step="parse", attempt=1)
    if retried:
        clock.advance(timedelta(seconds=1))
        charge(services, job_id, n := n + 1, step="parse", cost=300, tokens=100, at=iso(clock.now()))
        clock.advance(timedelta(seconds=1))
        jobs.append_event(
            job_id, "step_attempt_failed", step="parse", attempt=1, detail={"kind": "transient", "will_retry": True}
        )
        jobs.append_event(job_id, "step_started", step="parse", attempt=2)
    clock.advance(timedelta(seconds=2))
    charge(services, job_id, n := n + 1, step="parse", cost=1_000, tokens=400, at=iso(clock.now()))
    jobs.append_event(job_id, "step_finished", step="parse", attempt=2 if retried else 1)
    jobs.append_event(job_id, "step_started", step="summarize", attempt=1)
    clock.advance(timedelta(seconds=4))
    charge(services, job_id, n := n + 1, step="summarize", cost=2_000, tokens=800, at=iso(clock.now()))
    if fail:
        jobs.append_event(
            job_id,
            "step_attempt_failed",
            step="summarize",
            attempt=1,
            detail={"kind": "output-invalid", "will_retry": False},
        )
        error = {"kind": "output-invalid", "error": "OutputInvalidError", "step": "summarize", "message": "no"}
        jobs.transition(job_id, S.FAILED, event="job_failed", step="summarize", set_fields={"error": error, **spent})
    else:
        jobs.append_event(job_id, "step_finished", step="summarize", attempt=1)
        jobs.transition(job_id, S.COMPLETED, event="job_completed", set_fields=spent)
    return job_id


def export(services: Services, job_id: str) -> Any:
    done = analytics.export_job(services, job_id)
    assert done is not None
    return done


def test_a_finished_job_is_exported_as_three_parquet_objects_partitioned_by_day_tenant_and_workflow(
    services: Services, clock: FakeClock, s3: Any, bucket: str, tmp_path: Path
) -> None:
    # Given a job that completed after a retried step
    job_id = finished_job(services, clock, "job_" + "a" * 28, tenant="tenant-a", retried=True)
    # When it is exported twice (a re-run)
    export(services, job_id)
    done = export(services, job_id)
    # Then each table has one object at the job's partition, the same keys both times
    day = clock.now().date().isoformat()
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="analytics/")["Contents"])
    assert keys == [
        f"analytics/{table}/dt={day}/tenant_id=tenant-a/workflow={WORKFLOW}/{job_id}.parquet"
        for table in sorted(TABLES)
    ]
    # And the rows say what happened: the steps' attempts and failure kinds, the wasted call as retry cost
    assert [(s.step, s.attempts, s.status, s.failure_kinds) for s in done.steps] == [
        ("parse", 2, "finished", ["transient"]),
        ("summarize", 1, "finished", []),
    ]
    assert [c.kept for c in done.calls] == [False, True, True]
    assert done.job.retry_cost_micro == 300 and done.job.retry_tokens == 150
    assert done.job.model_cost_micro == 3_300
    # And its day files hold its rows once, with the declared columns (Glue's tables declare the same) and the
    # partitions'
    daily = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="analytics-daily/")["Contents"])
    assert daily == [f"analytics-daily/{table}/dt={day}.parquet" for table in sorted(TABLES)]
    services.analytics.sync_days(tmp_path, [day])
    with parquet.Session(tmp_path, [day]) as db:
        described = db.run("DESCRIBE SELECT * FROM {steps}")
        assert db.run("SELECT job_id, tenant_id, workflow, count(*) FROM {steps} GROUP BY ALL") == [
            (job_id, "tenant-a", WORKFLOW, 2)
        ]
    assert [(name, kind) for name, kind, *_ in described] == [
        (n, {"string": "VARCHAR", "bigint": "BIGINT", "double": "DOUBLE", "array<string>": "VARCHAR[]"}[k])
        for n, k in (*columns("steps"), *PARTITION_COLUMNS)
    ]


def test_a_job_that_has_not_finished_is_not_exported(services: Services, s3: Any, bucket: str) -> None:
    job_id = "job_" + "b" * 28
    services.jobs.create_job(NewJob(job_id, "tenant-a", WORKFLOW, "work/x/input.json", "h", "offline:test", 30))
    assert analytics.export_job(services, job_id) is None
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="analytics/")


def test_the_scheduled_export_takes_the_jobs_finished_since_its_watermark(services: Services, clock: FakeClock) -> None:
    # Given one finished job, exported by a first run some minutes later
    finished_job(services, clock, "job_" + "c" * 28, tenant="tenant-a")
    clock.advance(timedelta(minutes=10))
    assert analytics.export_finished(services) == {"exported": 1, "failed": 0, "left": 0}
    # When another finishes later (beyond the overlap) and the export runs again
    clock.advance(timedelta(minutes=10))
    finished_job(services, clock, "job_" + "d" * 28, tenant="tenant-a")
    # Then only that one is exported
    assert analytics.export_finished(services) == {"exported": 1, "failed": 0, "left": 0}


def test_a_run_within_the_overlap_does_not_export_again_what_the_last_run_exported(
    services: Services, clock: FakeClock
) -> None:
    # Given a job exported by a run just after it finished (its change is within the next run's overlap)
    finished_job(services, clock, "job_" + "e" * 28, tenant="tenant-a")
    clock.advance(timedelta(seconds=5))
    assert analytics.export_finished(services)["exported"] == 1
    # When runs follow within the overlap (a schedule firing often), Then the job is not exported again
    clock.advance(timedelta(seconds=5))
    assert analytics.export_finished(services)["exported"] == 0
    clock.advance(timedelta(seconds=5))
    assert analytics.export_finished(services)["exported"] == 0
    # But a job finishing meanwhile is
    finished_job(services, clock, "job_" + "f" * 28, tenant="tenant-a")
    clock.advance(timedelta(seconds=5))
    assert analytics.export_finished(services)["exported"] == 1


def test_the_reports_totals_are_the_sum_of_the_jobs_costs(services: Services, clock: FakeClock, tmp_path: Path) -> None:
    # Given jobs of two tenants, one retried, one failed, all exported
    exports = [
        export(services, finished_job(services, clock, "job_" + "e" * 28, tenant="tenant-a", retried=True)),
        export(services, finished_job(services, clock, "job_" + "f" * 28, tenant="tenant-a", fail=True)),
        export(services, finished_job(services, clock, "job_" + "g" * 28, tenant="tenant-b")),
    ]
    # When the operators' report is asked for the last 7 days
    report = analytics.report(services, since="7d", root=tmp_path)
    # Then its totals are the sums of the jobs' exported costs, and each group's spend adds up to the total
    assert report.jobs == 3
    assert report.total_usd == usd(sum(e.job.cost_micro for e in exports))
    assert report.model_usd == usd(sum(e.job.model_cost_micro for e in exports)) == usd(3_300 + 3_000 + 3_000)
    # (not kept: the call of the attempt that was retried, and the call of the failed job's last attempt)
    assert report.retry_usd == usd(300 + 2_000)
    assert [(r.key, r.jobs, r.completed, r.failed) for r in report.spend] == [(WORKFLOW, 3, 2, 1)]
    assert report.spend[0].usd == report.total_usd
    # And the steps' durations and failure kinds come from the events
    parse = next(s for s in report.steps if s.step == "parse")
    assert (parse.runs, parse.attempts) == (3, 4)
    assert sorted((f.step, f.kind, f.count) for f in report.failures) == [
        ("parse", "transient", 1),
        ("summarize", "output-invalid", 1),
    ]
    # And by route, the model calls' dollars add up to the model spend
    by_route = analytics.report(services, since="7d", by="route", root=tmp_path)
    assert [(r.key, r.usd, r.retry_usd) for r in by_route.spend] == [("default", report.model_usd, report.retry_usd)]
    # And a tenant's report holds only its own jobs
    own = analytics.report(services, since="7d", tenant_id="tenant-b", root=tmp_path)
    assert own.jobs == 1 and own.total_usd == usd(exports[2].job.cost_micro)
    # And a window before the jobs holds none
    empty = analytics.report(services, since="1h", until=clock.now() - timedelta(days=2), root=tmp_path)
    assert (empty.jobs, empty.total_usd, empty.spend, empty.review_wait_seconds) == (0, usd(0), [], None)


def test_runs_that_fold_one_day_at_once_keep_each_others_rows_and_a_job_exported_again_replaces_its_own(
    services: Services, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two finished jobs of one day, and another run that folds the second one into the day's files just after
    # the first run has read them
    first = finished_job(services, clock, "job_" + "j" * 28, tenant="tenant-a", retried=True)
    second = finished_job(services, clock, "job_" + "k" * 28, tenant="tenant-b")
    store, read, raced = services.analytics, services.analytics.day_file, list[Any]()

    def read_then_race(table: str, day: str, into: Path) -> str | None:
        etag = read(table, day, into)
        if not raced:
            raced.append(None)
            raced.append(export(services, second))
        return etag

    monkeypatch.setattr(store, "day_file", read_then_race)
    exports = [export(services, first)]
    # When the first job is exported again, and the report is read twice
    exports.append(export(services, first))
    cache = tmp_path / "cache"
    assert store.sync_days(cache, [clock.now().date().isoformat()]) == 3
    report = analytics.report(services, since="7d", root=cache)
    # Then the day files hold both jobs, each once: the report's total is the sum of their costs
    assert report.jobs == 2
    assert report.total_usd == usd(exports[0].job.cost_micro + raced[1].job.cost_micro)
    assert sum(s.runs for s in report.steps) == 4
    # And a second report reads no object again (the ETags have not changed)
    assert store.sync_days(cache, [clock.now().date().isoformat()]) == 0


@pytest.mark.parametrize("since", ["7", "0d", "7w", "yesterday"])
def test_a_window_that_is_not_one_is_refused(services: Services, since: str) -> None:
    with pytest.raises(BadRequest):
        analytics.window(since, None, services.now())


# ---------------------------------------------------------------------- the routes


@pytest.mark.usefixtures("api_keys", "operator_key")
def test_a_tenant_reads_its_own_report_and_an_operator_reads_every_tenants(
    call_api: CallApi, services: Services, clock: FakeClock
) -> None:
    # Given a finished job of each tenant, exported
    for job_id, tenant in (("job_" + "h" * 28, TENANT_A), ("job_" + "i" * 28, TENANT_B)):
        finished_job(services, clock, job_id, tenant=tenant)
        export(services, job_id)
    window = {"since": "400d", "until": iso(clock.now() + timedelta(hours=1))}
    # When tenant A asks for its usage report
    own = call_api("GET", "/v1/reports/usage", key=KEY_A, query=window)
    # Then it sees its own job only
    assert own.status == 200, own.raw_body
    assert (own.body["tenant_id"], own.body["jobs"]) == (TENANT_A, 1)
    # And an operator sees both tenants', and may pick one
    every = call_api("GET", "/v1/ops/reports", key=KEY_OPS, query=window)
    assert every.status == 200, every.raw_body
    assert every.body["jobs"] == 2
    one = call_api("GET", "/v1/ops/reports", key=KEY_OPS, query={**window, "tenant_id": TENANT_B, "by": "step"})
    assert (one.body["jobs"], [r["key"] for r in one.body["spend"]]) == (1, ["summarize", "parse"])
    # And a tenant key cannot read the operators' report, nor a window that is not one
    assert call_api("GET", "/v1/ops/reports", key=KEY_A).status == 403
    assert_problem(call_api("GET", "/v1/reports/usage", key=KEY_A, query={"since": "7 days"}), 422, "invalid-request")
