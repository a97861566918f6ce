"""Benchmark: the operators' metrics route (`GET /v1/ops/metrics`) after a large job and many small ones.

    .venv/bin/python bench/ops_metrics.py [--documents 1000] [--jobs 50] [--trials 5]

Runs a `--documents`-document job, then `--jobs` jobs of 3 documents, on the local runtime (every metric the
functions emit is put into its in-memory CloudWatch), then reads the route `--trials` times. Prints the route's
latency (first read and median), the number of series it answers, how many distinct (metric, dimensions) pairs
those are, the most series any one metric has, and how many data points the history holds. Asserts nothing; the
machine's cores and load are printed with the figures. API Gateway ends a request at 29 s.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import ACCOUNT, REGION, wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

TERMINAL = {"completed", "failed", "cancelled", "expired"}


def _request(documents: int, tag: str) -> dict[str, Any]:
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "Which supplier caps the liability for service 7?",
            "documents": [
                {"name": f"{tag}-{n + 1:04d}.txt", "text": f"Contract {n + 1}. The supplier caps service {n % 10}."}
                for n in range(documents)
            ],
        },
    }


def _run(platform: LocalPlatform, headers: dict[str, str], bodies: list[dict[str, Any]]) -> Counter[str]:
    """Submit every body, wait until every job has ended; their statuses counted."""
    ids = []
    for body in bodies:
        accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=600)
        accepted.raise_for_status()
        ids.append(accepted.json()["job_id"])
    statuses: dict[str, str] = {}

    def ended() -> bool | None:
        for job_id in ids:
            if job_id not in statuses:
                job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
                if job["status"] in TERMINAL:
                    statuses[job_id] = job["status"]
        return True if len(statuses) == len(ids) else None

    wait_until(ended, timeout=3600, interval=1.0, what=f"{len(ids)} jobs")
    return Counter(statuses.values())


def _data_points() -> int:
    from moto.cloudwatch.models import cloudwatch_backends

    return len(cloudwatch_backends[ACCOUNT][REGION].get_all_metrics())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    try:
        headers = platform.auth_header(platform.keys[0].tenant)
        ops = platform.auth_header("ops")
        started = time.perf_counter()
        large = _run(platform, headers, [_request(args.documents, "large")])
        small = _run(platform, headers, [_request(3, f"small{n}") for n in range(args.jobs)])
        print(
            f"jobs: 1 of {args.documents} documents {dict(large)}, {args.jobs} of 3 documents {dict(small)}, "
            f"in {time.perf_counter() - started:.0f} s; {_data_points()} data points in the local CloudWatch"
        )
        latencies, body = [], {}
        for _ in range(args.trials):
            began = time.perf_counter()
            answer = requests.get(f"{platform.api_url}/v1/ops/metrics", headers=ops, timeout=900)
            latencies.append(time.perf_counter() - began)
            answer.raise_for_status()
            body = answer.json()
        series = body["series"]
        distinct = {(s["name"], tuple(sorted(s["dimensions"].items()))) for s in series}
        (busiest, most), *_ = Counter(s["name"] for s in series).most_common(1) or [("-", 0)]
        print(
            f"GET /v1/ops/metrics (24 h): first {latencies[0]:.2f} s, median {statistics.median(latencies):.2f} s "
            f"of {args.trials} (cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f})"
        )
        print(
            f"series: {len(series)}, distinct (metric, dimensions): {len(distinct)}; most series of one metric: "
            f"{most} ({busiest})"
        )
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
