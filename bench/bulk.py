"""Benchmark: an operator's bulk replay, dry run, over N failed jobs on the local runtime (target: 200 jobs in 5 s or
less), and the same jobs found through the filtered listings.

    .venv/bin/python bench/bulk.py --jobs 200

N jobs of tenant `alpha` are submitted with a fault that fails each at its first step (`list_documents`,
invalid-input); once they have all failed, `POST /v1/ops/jobs:replay` plans them all (each job's plan: the same reads
and checks as one job's dry run) and the time of that one request is printed, with the time of a page of
`GET /v1/ops/jobs?status=failed&q=…`. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from longhaul.core import faults  # noqa: E402
from longhaul.workflows import REGISTRY  # noqa: E402

SAMPLES = ROOT / "samples"
POLICIES = {"alpha": {"jobs_in_flight": 50, "submissions_per_minute": 100_000}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="Dry runs timed (the median is printed).")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT, env_overrides={"LONGHAUL_TENANT_POLICIES": json.dumps(POLICIES)})
    alpha, ops = platform.auth_header("alpha"), platform.auth_header("ops")
    body = json.loads((SAMPLES / "request.json").read_text())
    base = platform.api_url
    try:
        faults.install(faults.FaultInjector("list_documents=invalid-input", REGISTRY))
        started = time.perf_counter()
        submitted = [
            requests.post(f"{base}/v1/jobs", json=body, headers=alpha, timeout=60).json()["job_id"]
            for _ in range(args.jobs)
        ]

        def all_failed() -> bool | None:
            listed = requests.get(
                f"{base}/v1/ops/jobs",
                params={"tenant": "alpha", "status": "failed", "limit": 500},
                headers=ops,
                timeout=60,
            ).json()["jobs"]
            return True if {j["job_id"] for j in listed} >= set(submitted) else None

        wait_until(all_failed, timeout=1800, interval=1.0, what=f"{args.jobs} jobs to fail")
        print(f"{args.jobs} failed jobs made in {time.perf_counter() - started:.1f} s")
        request = {"filter": {"tenant_id": "alpha", "status": "failed"}, "limit": max(args.jobs, 1)}
        times: list[float] = []
        planned = 0
        for _ in range(args.repeat):
            mark = time.perf_counter()
            answer = requests.post(f"{base}/v1/ops/jobs:replay", json=request, headers=ops, timeout=300)
            times.append(time.perf_counter() - mark)
            answer.raise_for_status()
            planned = answer.json()["counts"].get("would_replay", 0)
        median = statistics.median(times)
        print(
            f"bulk replay, dry run: {planned} jobs planned in {median:.2f} s (median of {args.repeat}; "
            f"{median / max(planned, 1) * 1000:.1f} ms a job; target ≤ 5 s for 200)"
        )
        mark = time.perf_counter()
        page = requests.get(
            f"{base}/v1/ops/jobs",
            params={"status": "failed", "q": submitted[-1][:12], "limit": 100},
            headers=ops,
            timeout=60,
        )
        page.raise_for_status()
        print(
            f"listing, status=failed and an id prefix: {len(page.json()['jobs'])} job(s) in "
            f"{(time.perf_counter() - mark) * 1000:.0f} ms"
        )
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    finally:
        faults.install(faults.FaultInjector())
        platform.stop()


if __name__ == "__main__":
    main()
