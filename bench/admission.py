"""Benchmark: admission on the local runtime. One tenant (`alpha`, 2 jobs in flight) queues a batch backlog; how
fast are its submissions accepted, what do they estimate, and how soon does another tenant's (`beta`) interactive
job start behind that backlog?

    .venv/bin/python bench/admission.py --backlog 200

Prints figures; asserts nothing. The backlog is cancelled at the end (a cancelled waiting job never starts).
"""

from __future__ import annotations

import argparse
import json
import logging
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

SAMPLES = ROOT / "samples"
POLICIES = {"alpha": {"jobs_in_flight": 2, "submissions_per_minute": 10_000}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=200)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT, env_overrides={"LONGHAUL_TENANT_POLICIES": json.dumps(POLICIES)})
    alpha, beta = platform.auth_header("alpha"), platform.auth_header("beta")
    body = json.loads((SAMPLES / "request.json").read_text())
    url = f"{platform.api_url}/v1/jobs"
    try:
        baseline = []
        for _ in range(10):  # the fast path (a slot free, nothing waiting) on the same platform, for comparison
            mark = time.perf_counter()
            requests.post(url, json=body, headers=beta, timeout=30).raise_for_status()
            baseline.append(time.perf_counter() - mark)
        print(f"beta: 10 submissions that start at once, 202 p50 {statistics.median(baseline) * 1000:.0f} ms")
        latencies, accepted = [], []
        started = time.perf_counter()
        for _ in range(args.backlog):
            mark = time.perf_counter()
            response = requests.post(url, json={**body, "sla_class": "batch"}, headers=alpha, timeout=30)
            latencies.append(time.perf_counter() - mark)
            accepted.append(response.json())
        elapsed = time.perf_counter() - started
        queued = [a for a in accepted if a.get("estimated_start_seconds", 0) > 0]
        print(
            f"alpha: {args.backlog} batch submissions in {elapsed:.1f}s ({args.backlog / elapsed:.1f}/s, one client); "
            f"202 p50 {statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms; "
            f"{len(queued)} queued, estimated start {queued[0]['estimated_start_seconds'] if queued else 0}"
            f"…{queued[-1]['estimated_start_seconds'] if queued else 0} s"
        )
        mark = time.perf_counter()
        response = requests.post(url, json={**body, "sla_class": "interactive"}, headers=beta, timeout=30)
        job_id = response.json()["job_id"]
        accepted_after = time.perf_counter() - mark
        wait_until(
            lambda: requests.get(f"{url}/{job_id}", headers=beta, timeout=30).json()["started_at"] or None,
            timeout=120,
            interval=0.02,
            what="beta's interactive job to start",
        )
        print(
            f"beta: interactive job behind alpha's backlog accepted in {accepted_after * 1000:.0f} ms "
            f"(estimated_start_seconds {response.json()['estimated_start_seconds']}), running after "
            f"{time.perf_counter() - mark:.2f}s"
        )
        still = sum(
            1
            for a in queued
            if requests.get(f"{url}/{a['job_id']}", headers=alpha, timeout=30).json()["status"] == "queued"
        )
        print(f"alpha: {still} of {len(queued)} queued jobs still waiting then")
        for a in queued:
            requests.post(f"{url}/{a['job_id']}/cancel", headers=alpha, timeout=30)
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
