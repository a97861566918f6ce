"""The usage report over 10,000 jobs: `longhaul ops report --since 30d` as the report function runs it (the window's
day files brought from S3 into its local copy, then queried), timed cold (a fresh copy: every day file read) and warm
(none read again), over the day files of 10,000 finished jobs over 30 days. The jobs' files are generated as the export
writes them (one object per job and table, partitioned by day, tenant and workflow), then folded into the day files in
moto's S3 by the export's own code (`fold_days`), in runs of 1,000 jobs as the scheduled export does.

    .venv/bin/python bench/report.py [--jobs 10000] [--days 30]

Prints seconds; the target is ≤ 5 s for every report, the first (cold) included. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "lambdas"), str(ROOT)]

from longhaul.core.analytics import CallRow, JobRow, StepRow, object_key  # noqa: E402
from longhaul.operations.analytics import query_report  # noqa: E402

TENANTS = ("alpha", "bravo", "charlie", "delta", "echo")
WORKFLOWS = {
    "document-analysis": ("parse_documents", "chunk_documents", "retrieve_passages", "draft_answer", "verify"),
    "invoice-reconciliation": ("extract_invoices", "match_orders", "reconcile", "publish_report"),
    "dispute-resolution": ("gather_evidence", "agent_turn", "notify_vendor"),
}
KINDS = ("transient", "rate-limited", "output-invalid", "upstream-unavailable")


def job_files(rng: random.Random, n: int, now: datetime, days: int) -> dict[str, tuple[str, list[dict]]]:
    """One job's three tables: {key: (table, rows)}."""
    job_id = f"job_{n:028d}"
    tenant, workflow = rng.choice(TENANTS), rng.choice(list(WORKFLOWS))
    created = now - timedelta(seconds=rng.uniform(0, days * 86400))
    failed = rng.random() < 0.05
    steps, calls, at = [], [], created + timedelta(seconds=rng.uniform(0, 30))
    for step in WORKFLOWS[workflow]:
        items = rng.choice((1, 1, 1, 4, 10))
        for item in range(items):
            attempts = 1 + (rng.random() < 0.08)
            kinds = [rng.choice(KINDS)] if attempts > 1 else []
            seconds = rng.lognormvariate(0, 0.8)
            steps.append(
                StepRow(
                    job_id=job_id,
                    step=step,
                    item=item if items > 1 else -1,
                    attempts=attempts,
                    status="finished",
                    duration_seconds=round(seconds, 3),
                    failure_kinds=kinds,
                    workflow_version=3,
                ).model_dump()
            )
            if "draft" in step or "extract" in step or "agent" in step:
                for attempt in range(attempts):
                    calls.append(
                        CallRow(
                            job_id=job_id,
                            charge_id=f"{step}-{item}-{attempt}",
                            step=step,
                            item=item if items > 1 else -1,
                            at=at,
                            route=rng.choice(("default", "strong")),
                            provider="bedrock",
                            model_id="anthropic.claude",
                            input_tokens=rng.randint(500, 4000),
                            output_tokens=rng.randint(100, 800),
                            cost_micro=rng.randint(1_000, 30_000),
                            kept=attempt == attempts - 1,
                            workflow_version=3,
                        ).model_dump()
                    )
            at += timedelta(seconds=seconds)
    model = sum(c["cost_micro"] for c in calls)
    retry = sum(c["cost_micro"] for c in calls if not c["kept"])
    job = JobRow(
        job_id=job_id,
        status="failed" if failed else "completed",
        sla_class="standard",
        model_lane="auto",
        route=None,
        workflow_version=3,
        created_at=created,
        started_at=created,
        finished_at=at,
        attempts=1,
        error_kind="output-invalid" if failed else None,
        failed_step=None,
        input_tokens=sum(c["input_tokens"] for c in calls),
        output_tokens=sum(c["output_tokens"] for c in calls),
        cost_micro=model + 900,
        model_cost_micro=model,
        orchestration_cost_micro=900,
        retry_cost_micro=retry,
        retry_tokens=0,
        cost_estimated=False,
        queue_wait_seconds=round(rng.uniform(0, 5), 3),
        review_wait_seconds=round(rng.uniform(60, 3600), 3) if rng.random() < 0.2 else 0.0,
        total_seconds=(at - created).total_seconds(),
    ).model_dump()
    where = {"day": created.date().isoformat(), "tenant_id": tenant, "workflow": workflow, "job_id": job_id}
    return {
        object_key("jobs", **where): ("jobs", [job]),
        object_key("steps", **where): ("steps", steps),
        object_key("calls", **where): ("calls", calls),
    }


def write_files(root: Path, jobs: list[dict[str, tuple[str, list[dict]]]]) -> int:
    """Every job's three files, as the export lays them out (each table's rows go through one NDJSON file into DuckDB,
    then one `COPY` per job and table: encoding 30,000 files one by one would take far longer than the report)."""
    import duckdb

    from longhaul.adapters.parquet import _DUCK_TYPES
    from longhaul.core.analytics import columns

    connection = duckdb.connect()
    written = 0
    with tempfile.TemporaryDirectory() as tmp:
        for table in ("jobs", "steps", "calls"):
            definition = ", ".join(f'"{n}" {_DUCK_TYPES[k]}' for n, k in columns(table))
            ndjson = Path(tmp) / f"{table}.json"
            keys: dict[str, str] = {}
            with ndjson.open("w") as out:
                for job in jobs:
                    for key, (kind, rows) in job.items():
                        if kind == table:
                            keys[rows[0]["job_id"] if rows else key] = key
                            for row in rows:
                                out.write(json.dumps(row, default=str) + "\n")
            connection.execute(f"CREATE TABLE {table} ({definition})")
            connection.execute(
                f"INSERT INTO {table} SELECT * FROM read_json('{ndjson}', columns = {{"
                + ", ".join(f"'{n}': '{_DUCK_TYPES[k]}'" for n, k in columns(table))
                + "})"
            )
            for job_id, key in keys.items():
                path = root / key.removeprefix("analytics/")
                path.parent.mkdir(parents=True, exist_ok=True)
                connection.execute(
                    f"COPY (SELECT * FROM {table} WHERE job_id = ?) TO '{path}' (FORMAT parquet, COMPRESSION zstd)",
                    [job_id],
                )
                written += 1
    connection.close()
    return written


def main() -> None:
    import boto3
    from moto import mock_aws

    from longhaul.operations.analytics import MAX_PER_RUN, fold_days
    from longhaul.storage.analytics import AnalyticsStore

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    now = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(7)
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the start")
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    )
    with mock_aws(), tempfile.TemporaryDirectory() as tmp:
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="bench")
        store = AnalyticsStore(None, s3, "bench")
        started = time.perf_counter()
        jobs = [job_files(rng, n, now, args.days) for n in range(args.jobs)]
        print(f"generated {args.jobs} jobs over {args.days} days ({time.perf_counter() - started:.0f} s)")
        started, written, folding = time.perf_counter(), 0, 0.0
        for run, first in enumerate(range(0, len(jobs), MAX_PER_RUN)):
            staged = Path(tmp) / f"run-{run}"
            batch = jobs[first : first + MAX_PER_RUN]
            written += write_files(staged, batch)
            by_day: dict[str, list[str]] = {}
            for job in batch:
                (rows,) = [rows for kind, rows in job.values() if kind == "jobs"]
                by_day.setdefault(rows[0]["created_at"].date().isoformat(), []).append(rows[0]["job_id"])
            fold_started = time.perf_counter()
            fold_days(store, staged, by_day)
            folding += time.perf_counter() - fold_started
        daily = [o for o in store._objects("analytics-daily/")]
        print(
            f"export: {written} job files written, folded into {len(daily)} day files "
            f"({sum(o['Size'] for o in daily) / 1e6:.1f} MB) by {-(-len(jobs) // MAX_PER_RUN)} runs; "
            f"the folds took {folding:.1f} s ({folding / max(1, -(-len(jobs) // MAX_PER_RUN)):.1f} s a run)"
        )
        start, end = now - timedelta(days=args.days), now + timedelta(seconds=1)
        days = [(start.date() + timedelta(days=n)).isoformat() for n in range((end.date() - start.date()).days + 1)]
        expected = sum(rows[0]["cost_micro"] for job in jobs for kind, rows in job.values() if kind == "jobs")
        cache = Path(tmp) / "cache"
        for label, by, tenant in (
            ("first report (cold: a fresh copy)", "workflow", None),
            ("second report (warm)", "workflow", None),
            ("report --by route", "route", None),
            ("report --by step", "step", None),
            ("report --by version", "version", None),
            ("report --tenant alpha", "workflow", "alpha"),
        ):
            started = time.perf_counter()
            read = store.sync_days(cache, days)
            report = query_report(cache, start=start, end=end, tenant_id=tenant, by=by)  # type: ignore[arg-type]
            took = time.perf_counter() - started
            print(
                f"{label} --since {args.days}d: {report.jobs} jobs, ${report.total_usd}, "
                f"{read} day files read: {took:.2f} s"
            )
        print(f"the jobs' costs add up to ${expected / 1e6:.6f}")
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
