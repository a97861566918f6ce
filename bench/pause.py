"""Benchmark: how soon a pause takes hold, and what a job that is not paused pays for being pausable.

    .venv/bin/python bench/pause.py

Runs a document-analysis job whose `extract_evidence` items take about 0.5 s each (a middleware of the local runtime
holds each item that long), asks for a pause as soon as its first item finished, and prints the seconds from the
pause request to the `paused` status (a step boundary: items under way finish first), then resumes it and prints
whether it completed. Then runs an unpaused 10-document job and prints its state transitions (the pause catches add
no state to a path that does not pause). Prints figures; asserts nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lambdas"))

from cost import request_of, run  # noqa: E402
from machine import machine  # noqa: E402

from local import lambda_runtime  # noqa: E402
from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

ITEM_SECONDS = 0.5
FILLER = "This clause is read together with the schedules and survives termination of the agreement. " * 8
TEXT = "\n\n".join(f"Clause {n}. The liability cap for service {n} is {n} million. {FILLER}" for n in range(24))
BODY = {
    "workflow": "document-analysis",
    "input": {
        "question": "What is the liability cap for each service?",
        "documents": [{"name": "caps.txt", "text": TEXT}],
        "max_passages": 16,
        "passages_per_group": 1,
    },
}


def main() -> None:
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(f"pause and resume, local platform; {machine()}")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    api = platform.api_url
    first = threading.Event()

    def slow_items(invocation: Any, call_next: Any) -> Any:
        result = call_next()
        if isinstance(invocation.event, dict) and invocation.event.get("step") == "extract_evidence":
            first.set()
            time.sleep(ITEM_SECONDS)
        return result

    def status(job_id: str) -> str:
        return str(requests.get(f"{api}/v1/jobs/{job_id}", headers=headers, timeout=30).json()["status"])

    try:
        with lambda_runtime.middleware(slow_items):
            job_id = requests.post(f"{api}/v1/jobs", json=BODY, headers=headers, timeout=30).json()["job_id"]
            first.wait(120)
            asked = time.perf_counter()
            requests.post(f"{api}/v1/jobs/{job_id}/pause", headers=headers, timeout=30).raise_for_status()
            wait_until(lambda: status(job_id) == "paused" or None, timeout=60, interval=0.02, what="the pause")
            latency = time.perf_counter() - asked
            print(f"  pause request -> paused: {latency:.2f} s (items of {ITEM_SECONDS} s, target <= 2 s)")
            requests.post(f"{api}/v1/jobs/{job_id}/resume", headers=headers, timeout=30).raise_for_status()
            ended = wait_until(
                lambda: ((s := status(job_id)) in ("completed", "failed", "cancelled", "expired") and s) or None,
                timeout=180,
                interval=0.2,
                what="the job",
            )
            print(f"  after the resume: {ended}")
        job = run(platform, headers, 10, request_of(10))
        if isinstance(job, str):
            print(f"  10 documents: the platform {job}")
        else:
            transitions = job["cost"]["orchestration"]["transitions"]
            print(f"  10-document job, not paused: {transitions} transitions (target <= 22)")
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
