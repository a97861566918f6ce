"""Benchmark: a 100-document job erased on the local platform, and the seconds until its marker is found nowhere.

    .venv/bin/python bench/erasure.py                  # part of `make bench`
    .venv/bin/python bench/erasure.py --documents 500

A job of `--documents` inline documents, each holding a distinctive marker (and the question too), runs to
completion; then `DELETE /v1/jobs/{job_id}` erases it, and every table, bucket (every object version), queue and log
group of the local AWS is searched (`local.scan`) until neither the marker nor the job's id is found anywhere but its
tombstone. Prints the erasure's answer time, the seconds until the marker was found nowhere (target: 10 s), what
each store deleted, and the machine's load. Asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from local.scan import left_after_erasure  # noqa: E402

TARGET_SECONDS = 10.0


def request(documents: int, marker: str) -> dict[str, Any]:
    return {
        "workflow": "document-analysis",
        "input": {
            "question": f"Which supplier caps the liability for service 7 ({marker})?",
            "documents": [
                {
                    "name": f"contract-{n + 1:04d}.txt",
                    "text": f"Contract {n + 1} of {marker}. The supplier caps the liability for service {n % 10} "
                    f"at {n} euros.",
                }
                for n in range(documents)
            ],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=100)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    marker = f"MARK{uuid.uuid4().hex[:16]}"
    try:
        accepted = requests.post(
            f"{platform.api_url}/v1/jobs", json=request(args.documents, marker), headers=headers, timeout=600
        )
        accepted.raise_for_status()
        job_id = accepted.json()["job_id"]

        def finished() -> dict[str, Any] | None:
            job: dict[str, Any] = requests.get(
                f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=60
            ).json()
            return job if job["status"] in ("completed", "failed", "cancelled", "expired") else None

        job = wait_until(finished, timeout=1800, interval=0.5, what=f"job {job_id} to finish")
        before = left_after_erasure(platform.client, markers=(marker,), job_ids=(job_id,))
        started = time.perf_counter()
        answer = requests.delete(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=600)
        answered_s = time.perf_counter() - started
        answer.raise_for_status()
        left: list[str] = []
        while True:
            left = left_after_erasure(platform.client, markers=(marker,), job_ids=(job_id,))
            if not left or time.perf_counter() - started > 120:
                break
            time.sleep(0.2)
        gone_s = time.perf_counter() - started
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"erasure of a {args.documents}-document job ({job['status']}), local "
            f"(load {load}, {os.cpu_count()} cores):"
        )
        print(f"  places holding its marker or id before: {len(before)}")
        print(f"  DELETE answered 202 in {answered_s:.2f} s")
        status = "found nowhere" if not left else f"still in {len(left)} places: {left[:5]}"
        print(f"  marker and job id {status} after {gone_s:.2f} s (target ≤ {TARGET_SECONDS:.0f} s)")
        for line in answer.json()["report"]:
            print(f"    {line['store']:<12} {line['deleted']:>6} deleted")
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
