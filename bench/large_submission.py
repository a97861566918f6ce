"""Benchmark: how long one submission takes to answer 202 as its count of inline documents grows, locally.

    .venv/bin/python bench/large_submission.py                       # 1, 100, 1,000 and 5,000 documents
    .venv/bin/python bench/large_submission.py --documents 5000 --repeat 5

The platform runs as `python -m local` in a subprocess (the real HTTP front door on 127.0.0.1, in-memory AWS). Each
submission is one document-analysis job whose documents are all inline texts (as many as fit the 1 MiB body limit
at 5,000: about 130 characters each); the time is from sending the request to the 202, as a client sees it. Each
accepted job is cancelled at once, so its workflow does not run beside the next measurement. Prints the median and
the worst of the repeats per document count, the machine's cores and load; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import requests

# the bench next to this one (same folder)
from submissions import KEY, _free_port, _load, start_platform, stop_platform

TEXT = (
    "Clause {n}. The Supplier's liability is capped at the fees of the last twelve months; either party may "
    "terminate on notice."
)


def job_body(documents: int, run: int) -> dict[str, Any]:
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "What are the liability caps and termination rights?",
            "documents": [{"name": f"d{run}-{n:04d}.txt", "text": TEXT.format(n=n)} for n in range(documents)],
        },
    }


def measure(api: str, documents: int, repeat: int) -> list[float]:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {KEY}"}
    times = []
    for run in range(repeat):
        body = job_body(documents, run)
        began = time.perf_counter()
        response = session.post(f"{api}/v1/jobs", json=body, headers=headers, timeout=300)
        elapsed = time.perf_counter() - began
        if response.status_code != 202:
            raise RuntimeError(f"{documents} documents: {response.status_code} {response.text[:300]}")
        times.append(elapsed)
        session.post(f"{api}/v1/jobs/{response.json()['job_id']}/cancel", headers=headers, timeout=60)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", default="1,100,1000,5000", help="comma-separated document counts")
    parser.add_argument("--repeat", type=int, default=3, help="submissions per document count")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    port = _free_port()
    print(f"cores: {os.cpu_count()}; load average {_load()}; platform: `python -m local` on port {port}")
    platform = start_platform(port, hold=False)
    api = f"http://127.0.0.1:{port}"
    try:
        measure(api, 1, 1)  # warm: imports, first clients, first execution
        print(f"{'documents':>9} {'body':>9} {'median 202':>10} {'worst 202':>9}  load")
        for documents in (int(d) for d in args.documents.split(",")):
            size = len(json.dumps(job_body(documents, 0)).encode())
            times = measure(api, documents, args.repeat)
            print(
                f"{documents:>9} {size / 1024:>7.0f}KB {statistics.median(times) * 1000:>8.0f}ms "
                f"{max(times) * 1000:>7.0f}ms  {_load()}"
            )
    finally:
        stop_platform(platform)


if __name__ == "__main__":
    main()
