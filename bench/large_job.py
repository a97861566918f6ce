"""Benchmark: a 1,000-document job (small inline texts) on the local runtime: time to completion, the parent
execution's history size and its state transitions per document.

    .venv/bin/python bench/large_job.py --documents 1000     # part of `make bench`

Prints figures; asserts nothing. Above `INLINE_MAP_MAX_ITEMS` documents, parsing runs as a Distributed Map over
the job's batched manifest: child executions (one per batch) keep their own histories, so the parent's history
counts batches, not documents. Local figures measure the platform's overhead in one process, not AWS latency.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

WORKFLOW = "document-analysis"
MACHINE = "DocumentAnalysis"  # its construct path


def request(documents: int) -> dict[str, Any]:
    return {
        "workflow": WORKFLOW,
        "input": {
            "question": "Which supplier caps the liability for service 7?",
            "documents": [
                {
                    "name": f"contract-{n + 1:04d}.txt",
                    "text": f"Contract {n + 1}. The supplier caps the liability for service {n % 10} at {n} euros.",
                }
                for n in range(documents)
            ],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    try:
        body = request(args.documents)
        started = time.perf_counter()
        accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=600)
        accepted.raise_for_status()
        job_id = accepted.json()["job_id"]
        accepted_s = time.perf_counter() - started
        seen: list[str] = []

        def done() -> dict[str, Any] | None:
            job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
            message = job["progress"]["message"]
            if message and message not in seen[-1:]:
                seen.append(message)
            return job if job["status"] in ("completed", "failed", "cancelled", "expired") else None

        job = wait_until(done, timeout=3600, interval=0.5, what=job_id)
        elapsed = time.perf_counter() - started
        print(f"job {job_id}: {job['status']} after {elapsed:.1f}s; progress {job['progress']}", flush=True)
        events = platform.execution_history(MACHINE, job_id)
        transitions = sum(1 for e in events if e["type"].endswith("StateEntered"))
        counted = [m for m in seen if m.startswith("parse_documents: ")]
        print(f"documents: {args.documents}  status: {job['status']}  body: {len(accepted.request.body or b'')} bytes")
        print(
            f"accepted after {accepted_s:.2f}s; completed after {elapsed:.1f}s "
            f"({elapsed / args.documents * 1000:.0f} ms per document)"
        )
        print(
            f"parent execution history: {len(events)} events (limit 25,000); {transitions} state transitions, "
            f"{transitions / args.documents:.3f} per document (child executions keep their own)"
        )
        print(f"progress seen while parsing: {counted[:1]} ... {counted[-1:]} ({len(counted)} distinct readings)")
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
