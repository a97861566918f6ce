"""Benchmark summary: every figure of the lean-paths table in one run, with the machine's cores and load.

    make bench            # runs this last; or: .venv/bin/python bench/table.py [--with-5000] [--runs 5]

Each figure is measured by the benchmark that owns it, called as a function, each in a fresh interpreter (a
`LocalPlatform` is one per process, and one measurement's warm caches must not flatter the next):
- a 10-document job (`cost.request_of(10)`): submit → completed (`end_to_end.run_job`), then the same job's
  transitions, DynamoDB requests and orchestration dollars once its executions are counted (`cost.run`);
- accepted submissions per second with 50 keep-alive clients while the tenant may run one job, so the others queue
  (`submissions.burst`, as `submissions.py --hold`), and the p99 of their 202;
- the AWS calls of a submission that starts and of one that queues (`submission_calls.measure`);
- the API handler's cold import as bundled, against a bare `import boto3` handler (`cold_start.measure`);
- a 1,000-document archive job (`archive_job.archive_of`) submit → completed, and with `--with-5000` a
  5,000-document one (it takes many minutes; without the flag its row says it was not run).
Prints figures; asserts nothing. Timings depend on the load: it is printed before and after each figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for path in (BENCH, ROOT, ROOT / "lambdas"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

TERMINAL = frozenset({"completed", "failed", "cancelled", "expired"})
HOLD_CLIENTS, HOLD_REQUESTS = 50, 200


def _load() -> float:
    return os.getloadavg()[0]


def _quiet() -> None:
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")


# ---------------------------------------------------------------------- measurements (each in a process of its own)


def ten_document_job() -> dict[str, Any]:
    """A 10-document job's time to completion, and its cost once counted (transitions, requests, dollars)."""
    import cost
    import end_to_end

    from local.platform import LocalPlatform

    _quiet()
    platform = LocalPlatform.start(ROOT)
    try:
        headers = platform.auth_header(platform.keys[0].tenant)
        timed = end_to_end.run_job(platform, headers, cost.request_of(10))
        counted = cost.run(platform, headers, 10)
    finally:
        platform.stop()
    if isinstance(counted, str):
        raise RuntimeError(f"the 10-document job: the platform {counted}")
    orchestration = counted["cost"]["orchestration"]
    return {
        "status": timed["status"],
        "completed_s": timed["completed_s"],
        "transitions": orchestration["transitions"],
        "dynamodb": orchestration["requests"]["dynamodb"],
        "usd_per_job": orchestration["usd"],
    }


def submissions_held() -> dict[str, Any]:
    """Accepted submissions per second at 50 clients, one job in flight (the others queue), and the 202's p99."""
    import submissions

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    platform = submissions.start_platform(port, hold=True)
    api = f"http://127.0.0.1:{port}"
    try:
        submissions.burst(api, 1, 2)  # warm
        result = submissions.burst(api, HOLD_CLIENTS, HOLD_REQUESTS)
        submissions.cancel(api, result["job_ids"])
    finally:
        submissions.stop_platform(platform)
    latencies = result["latencies"]
    return {
        "per_second": len(latencies) / result["wall"],
        "p99_ms": submissions._percentile(latencies, 0.99) * 1000,
        "errors": sum(n for status, n in result["statuses"].items() if status != "202"),
    }


def aws_calls() -> dict[str, Any]:
    import submission_calls

    _quiet()
    calls, _ = submission_calls.measure()
    return {kind: len(made) for kind, made in calls.items()}


def cold_import() -> dict[str, Any]:
    import cold_start

    measured = cold_start.measure(5, {"api": "handlers.api"})
    bundle_ms = measured["rows"][0][3]
    counted = measured["instructions"]
    return {
        "api_ms": bundle_ms,
        "bare_ms": measured["bare_runtime"],
        "ratio": bundle_ms / measured["bare_runtime"],
        "instructions_ratio": counted["api"] / counted["bare"] if counted else None,
    }


def archive_job(documents: int) -> dict[str, Any]:
    """A job over a ZIP archive of `documents` documents, submit → completed."""
    import requests
    from archive_job import archive_of

    from local.deploy import wait_until
    from local.platform import LocalPlatform
    from longhaul.core import limits

    _quiet()
    limits.MAX_DOCUMENTS = max(limits.MAX_DOCUMENTS, documents)
    platform = LocalPlatform.start(ROOT)
    try:
        headers = platform.auth_header(platform.keys[0].tenant)
        api = platform.api_url
        ticket = requests.post(
            f"{api}/v1/uploads",
            json={"filename": "agreements.zip", "media_type": "application/zip"},
            headers=headers,
            timeout=30,
        ).json()
        upload = requests.put(ticket["upload_url"], data=archive_of(documents), headers=ticket["headers"], timeout=60)
        upload.raise_for_status()
        body = {
            "workflow": "document-analysis",
            "input": {"question": "What is the liability cap?", "archive": {"upload_id": ticket["upload_id"]}},
        }
        started = time.perf_counter()
        accepted = requests.post(f"{api}/v1/jobs", json=body, headers=headers, timeout=120)
        accepted.raise_for_status()
        job_id = accepted.json()["job_id"]

        def done() -> dict[str, Any] | None:
            job: dict[str, Any] = requests.get(f"{api}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
            return job if job["status"] in TERMINAL else None

        job = wait_until(done, timeout=3600, interval=0.5, what=job_id)
        return {"status": job["status"], "completed_s": time.perf_counter() - started}
    finally:
        platform.stop()


MEASUREMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "ten_document_job": ten_document_job,
    "submissions_held": submissions_held,
    "aws_calls": aws_calls,
    "cold_import": cold_import,
    "archive_1000": lambda: archive_job(1000),
    "archive_5000": lambda: archive_job(5000),
}


def _measured(name: str) -> tuple[dict[str, Any] | str, str]:
    """Run one measurement in a fresh interpreter: its figures (or why it failed), and the load before/after it."""
    before = _load()
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    load = f"load {before:.1f}→{_load():.1f}"
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        return f"not measured: {why[:160]}", load
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures, load


# ---------------------------------------------------------------------- the table


def _row(figure: str, before: str, target: str, now: str, met: bool | None, load: str) -> str:
    verdict = "" if met is None else ("met" if met else "MISSED")
    return f"| {figure} | {before} | {target} | {now} | {verdict} | {load} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", choices=sorted(MEASUREMENTS), help=argparse.SUPPRESS)
    parser.add_argument("--with-5000", action="store_true", help="also run the 5,000-document job (many minutes)")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(MEASUREMENTS[args.measure]()))
        return
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    started = time.perf_counter()
    print(f"lean paths: {os.cpu_count()} cores, load average {_load():.1f} at the start (figures are noisy under load)")
    print("| figure | issue's before | target | now | | load while measured |")
    print("|---|---|---|---|---|---|")

    job, load = _measured("ten_document_job")
    if isinstance(job, str):
        print(*[_row(name, before, target, job, None, load) for name, before, target in _TEN_DOCUMENT_ROWS], sep="\n")
    else:
        usd_thousand = float(job["usd_per_job"]) * 1000
        print(
            _row(
                "transitions per 10-document job", "54", "≤ 30", str(job["transitions"]), job["transitions"] <= 30, load
            ),
            _row(
                "DynamoDB requests per 10-document job",
                "359",
                "≤ 120",
                str(job["dynamodb"]),
                job["dynamodb"] <= 120,
                load,
            ),
            _row(
                "orchestration $ per 1,000 10-document jobs",
                "2.62",
                "≤ 1.00",
                f"{usd_thousand:.2f}",
                usd_thousand <= 1.0,
                load,
            ),
            _row(
                "10-document job, submit → completed, local",
                "12.5 s",
                "≤ 2 s",
                f"{job['completed_s']:.1f} s ({job['status']})",
                job["completed_s"] <= 2.0 and job["status"] == "completed",
                load,
            ),
            sep="\n",
        )

    held, load = _measured("submissions_held")
    name = f"submissions accepted per second, {HOLD_CLIENTS} clients, local (`--hold`)"
    if isinstance(held, str):
        print(_row(name, "6.3 (p99 15 s)", "≥ 60 (p99 < 1 s)", held, None, load))
    else:
        now = f"{held['per_second']:.1f} (p99 {held['p99_ms'] / 1000:.2f} s" + (
            f", {held['errors']} refused)" if held["errors"] else ")"
        )
        met = held["per_second"] >= 60 and held["p99_ms"] < 1000
        print(_row(name, "6.3 (p99 15 s)", "≥ 60 (p99 < 1 s)", now, met, load))

    calls, load = _measured("aws_calls")
    name = "AWS calls per submission that starts / queues"
    if isinstance(calls, str):
        print(_row(name, "9 / 13", "≤ 4 / 5", calls, None, load))
    else:
        met = calls["starts"] <= 4 and calls["queues"] <= 5
        print(_row(name, "9 / 13", "≤ 4 / 5", f"{calls['starts']} / {calls['queues']}", met, load))

    cold, load = _measured("cold_import")
    name = "API handler cold import as bundled, × bare boto3"
    if isinstance(cold, str):
        print(_row(name, "3.0×", "≤ 2.0×", cold, None, load))
    else:
        now = f"{cold['ratio']:.2f}× ({cold['api_ms']:.0f} ms / {cold['bare_ms']:.0f} ms)"
        if cold["instructions_ratio"]:
            now += f"; {cold['instructions_ratio']:.2f}× in instructions"
        print(_row(name, "3.0×", "≤ 2.0×", now, cold["ratio"] <= 2.0, load))

    archive, load = _measured("archive_1000")
    name = "1,000-document archive job, local"
    if isinstance(archive, str):
        print(_row(name, "88–109 s (quiet)", "≤ 60 s", archive, None, load))
    else:
        now = f"{archive['completed_s']:.0f} s ({archive['status']})"
        met = archive["completed_s"] <= 60 and archive["status"] == "completed"
        print(_row(name, "88–109 s (quiet)", "≤ 60 s", now, met, load))

    name = "5,000-document job"
    target = "completes; no invocation above half its timeout or memory"
    if args.with_5000:
        large, load = _measured("archive_5000")
        now = (
            large
            if isinstance(large, str)
            else f"{large['status']} in {large['completed_s']:.0f} s (invocations' peaks not measured here)"
        )
        met = None if isinstance(large, str) else large["status"] == "completed"
        print(_row(name, "not run", target, now, met, load))
    else:
        print(_row(name, "not run", target, "not run (many minutes): `bench/table.py --with-5000`", None, "-"))

    print(f"({time.perf_counter() - started:.0f} s; load average {_load():.1f} at the end, {os.cpu_count()} cores)")


_TEN_DOCUMENT_ROWS = [
    ("transitions per 10-document job", "54", "≤ 30"),
    ("DynamoDB requests per 10-document job", "359", "≤ 120"),
    ("orchestration $ per 1,000 10-document jobs", "2.62", "≤ 1.00"),
    ("10-document job, submit → completed, local", "12.5 s", "≤ 2 s"),
]


if __name__ == "__main__":
    main()
