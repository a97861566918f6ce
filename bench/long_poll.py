"""Benchmark: the events long-poll and the `longhaul` command's start-up, on the local runtime.

    .venv/bin/python bench/long_poll.py [--trials 10]

Prints, for a job waiting for review (nothing else happens to it): how long after an event is written a waiting
long-poll (`wait=20`) answers (p50, p90, max over the trials), how long an idle `wait=N` takes and how many reads of
the event log it makes, and the CPU and wall time of `longhaul --help` (the command's imports: every invocation pays
them). Asserts nothing; the machine's cores and load are printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

LONGHAUL = Path(sys.executable).with_name("longhaul")


def _load() -> str:
    return f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}"


def _waiting_job(platform: LocalPlatform, headers: dict[str, str]) -> str:
    body = json.loads((ROOT / "samples" / "request.json").read_text())
    body["review"] = {"mode": "always", "deadline_seconds": 43200}  # its reminders are hours away
    job_id = str(requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=30).json()["job_id"])

    def waiting() -> bool | None:
        job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
        return True if job["status"] == "waiting_for_review" else None

    wait_until(waiting, timeout=300, interval=0.2, what="the review")
    return job_id


def _last_seq(platform: LocalPlatform, headers: dict[str, str], job_id: str) -> int:
    cursor = 0
    while True:  # until the log has been quiet for a second
        page = requests.get(
            f"{platform.api_url}/v1/jobs/{job_id}/events",
            params={"cursor": cursor, "wait": 1},
            headers=headers,
            timeout=30,
        ).json()
        if not page["events"]:
            return cursor
        cursor = page["events"][-1]["seq"]


def _latency(platform: LocalPlatform, headers: dict[str, str], job_id: str, cursor: int, store: Any) -> float:
    """Seconds from an event's write to the waiting long-poll's answer."""
    answered: dict[str, Any] = {}

    def poll() -> None:
        response = requests.get(
            f"{platform.api_url}/v1/jobs/{job_id}/events",
            params={"cursor": cursor, "wait": 20},
            headers=headers,
            timeout=30,
        )
        answered.update(at=datetime.now(UTC), page=response.json())

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(1.5)  # the long-poll is waiting, well into its back-off
    store.append_event(job_id, "bench_marker")
    poller.join()
    event = answered["page"]["events"][0]
    return float((answered["at"] - datetime.fromisoformat(event["at"])).total_seconds())


def _idle(
    platform: LocalPlatform, headers: dict[str, str], job_id: str, cursor: int, seconds: int
) -> tuple[float, int]:
    """Wall time of an idle long-poll, and the event-log reads it made."""
    from longhaul.storage.jobs import JobStore

    reads = {"n": 0}
    original = JobStore.list_events

    def counted(self: JobStore, *args: Any, **kwargs: Any) -> Any:
        reads["n"] += 1
        return original(self, *args, **kwargs)

    JobStore.list_events = counted  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        requests.get(
            f"{platform.api_url}/v1/jobs/{job_id}/events",
            params={"cursor": cursor, "wait": seconds},
            headers=headers,
            timeout=seconds + 10,
        )
        return time.perf_counter() - started, reads["n"]
    finally:
        JobStore.list_events = original  # type: ignore[method-assign]


def _command_start(runs: int) -> tuple[float, float]:
    """Median CPU seconds and wall seconds of `longhaul --help` (its imports; no request)."""
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([str(LONGHAUL), "--help"], capture_output=True, check=True)
        wall.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--idle", type=int, default=20, help="seconds of the idle long-poll (at most 20)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(f"machine: {_load()}")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    try:
        from longhaul.storage.jobs import JobStore

        store = JobStore(platform.client("dynamodb", resource=True).Table(platform.deployment.table_name))
        job_id = _waiting_job(platform, headers)
        cursor = _last_seq(platform, headers, job_id)
        latencies = []
        for _ in range(args.trials):
            latencies.append(_latency(platform, headers, job_id, cursor, store))
            cursor += 1
        ordered = sorted(latencies)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(
            f"new event -> long-poll answer ({args.trials} trials): p50 {statistics.median(latencies) * 1000:.0f} ms, "
            f"p90 {p90 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
        )
        took, reads = _idle(platform, headers, job_id, cursor, args.idle)
        print(f"idle long-poll wait={args.idle}: answered after {took:.2f} s, {reads} reads of the event log")
    finally:
        platform.stop()
    if LONGHAUL.exists():
        cpu, wall = _command_start(5)
        print(f"longhaul --help: {cpu:.2f} s CPU, {wall:.2f} s wall (median of 5)")
    print(f"machine: {_load()}")


if __name__ == "__main__":
    main()
