"""Benchmark: one document-analysis job over an uploaded ZIP archive of many documents, on the local runtime.

    .venv/bin/python bench/archive_job.py --documents 1000

Zips `--documents` short text documents in folders, uploads the archive with its presigned PUT, submits
`{"archive": {"upload_id"}}` and waits for the job. Prints the upload size, the time to 202 (the archive check) and
submit-to-completed time, and the number of citations. The archive check reads its document limit at run time; it
is lifted to `--documents` for the run (the `documents` list keeps the contract's own bound). The local runtime is
one process: figures measure the platform's overhead, not AWS. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import logging
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from longhaul import limits  # noqa: E402


def archive_of(documents: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for n in range(documents):
            text = (
                f"Supply agreement {n}\n\nThe supplier's liability under agreement {n} is capped at {1000 + n} EUR. "
                f"Either party may terminate with {30 + n % 60} days written notice.\n"
            )
            archive.writestr(f"agreements/{n // 100:02d}/agreement-{n:05d}.txt", text)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    limits.MAX_DOCUMENTS = max(limits.MAX_DOCUMENTS, args.documents)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    try:
        data = archive_of(args.documents)
        ticket = requests.post(
            f"{platform.api_url}/v1/uploads",
            json={"filename": "agreements.zip", "media_type": "application/zip"},
            headers=headers,
            timeout=30,
        ).json()
        requests.put(ticket["upload_url"], data=data, headers=ticket["headers"], timeout=60).raise_for_status()
        body = {
            "workflow": "document-analysis",
            "input": {"question": "What is the liability cap?", "archive": {"upload_id": ticket["upload_id"]}},
        }
        started = time.perf_counter()
        accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=120)
        accepted.raise_for_status()
        accepted_s = time.perf_counter() - started
        job_id = accepted.json()["job_id"]

        def done() -> dict[str, Any] | None:
            job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
            return job if job["status"] in ("completed", "failed", "cancelled", "expired") else None

        job = wait_until(done, timeout=args.timeout, interval=0.5, what=job_id)
        elapsed = time.perf_counter() - started
        result = requests.get(f"{platform.api_url}/v1/jobs/{job_id}/result", headers=headers, timeout=60)
        citations = len(result.json().get("citations", [])) if result.status_code == 200 else 0
        documents = len(result.json().get("documents", [])) if result.status_code == 200 else 0
        print(
            f"{args.documents} documents, archive {len(data) / 1024:.0f} KiB: accepted in {accepted_s:.2f}s, "
            f"{job['status']} in {elapsed:.1f}s; result lists {documents} documents, {citations} citations"
        )
        if job.get("error"):
            print(f"error: {job['error']}")
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
