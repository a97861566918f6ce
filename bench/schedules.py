"""Benchmark: a schedule's fire to its job queued, on the local platform (target: at most 2 s after the fire's scaled
time).

    .venv/bin/python bench/schedules.py [--fires 8] [--scale 0.05]

Creates a `cron(* * * * ? *)` schedule through the API (every minute of its clock: every 3 s of real time at scale
0.05), lets it fire `--fires` times, and prints for each fire the seconds from its scaled time (the real moment the
schedule's clock read its scheduled minute) to its job's `created_at` (queued), then the median and the worst. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lambdas"))

from machine import machine  # noqa: E402

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

BODY = {
    "workflow": "document-analysis",
    "schedule": "cron(* * * * ? *)",
    "input": {
        "question": "What does the notice say about termination?",
        "documents": [{"name": "notice.txt", "text": "Either party may terminate on 30 days' notice."}],
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=8)
    parser.add_argument("--scale", type=float, default=0.05)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(f"schedule fire -> job queued, local platform at time scale {args.scale}; {machine()}")
    platform = LocalPlatform.start(ROOT, time_scale=args.scale)
    try:
        tenant = platform.keys[0].tenant
        headers = platform.auth_header(tenant)
        created = requests.post(f"{platform.api_url}/v1/schedules", json=BODY, headers=headers, timeout=30)
        created.raise_for_status()
        schedule_id = created.json()["schedule_id"]
        scheduler = platform.scheduler
        assert scheduler is not None and scheduler.runtime is not None
        runtime = scheduler.runtime
        tracked = wait_until(
            lambda: next((t for t in runtime.tracked.values() if t.name == schedule_id), None),
            timeout=10,
            what="the schedule to be read",
        )

        def fires() -> list[tuple[datetime, float]] | None:
            found = [(at, mono) for name, at, mono in list(runtime.fired) if name == schedule_id]
            return found if len(found) >= args.fires else None

        wait_until(fires, timeout=args.fires * 60 * args.scale * 3 + 30, interval=0.2, what="the fires")
        time.sleep(2)
        jobs = requests.get(f"{platform.api_url}/v1/jobs", params={"limit": 100}, headers=headers, timeout=30)
        by_minute = {
            j["trigger"]["scheduled_at"]: j
            for j in jobs.json()["jobs"]
            if (j.get("trigger") or {}).get("id") == schedule_id
        }
        delays = []
        for at, _ in (fires() or [])[: args.fires]:
            # the real wall-clock moment the schedule's clock read `at`
            scaled = tracked.virtual0 + timedelta(seconds=(at - tracked.virtual0).total_seconds() * args.scale)
            job = by_minute.get(at.strftime("%Y-%m-%dT%H:%M:00Z"))
            if job is None:
                print(f"  fire due {at:%H:%M} (its clock): no job found")
                continue
            queued = datetime.fromisoformat(job["created_at"].replace("Z", "+00:00"))
            delay = (queued - scaled).total_seconds()
            delays.append(delay)
            print(f"  fire due {at:%H:%M} (its clock): job {job['job_id']} queued {delay:.3f} s after its scaled time")
        if delays:
            print(
                f"fire -> job queued: median {statistics.median(delays):.3f} s, worst {max(delays):.3f} s "
                f"over {len(delays)} fires (target <= 2 s)"
            )
        requests.delete(f"{platform.api_url}/v1/schedules/{schedule_id}", headers=headers, timeout=30)
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
