"""Benchmark: one document-analysis job over an uploaded ZIP archive of many documents, on the local runtime.

    .venv/bin/python bench/archive_job.py --documents 1000 [--fail 17,45,90 | --cancel-at 300] [--markdown]

Zips `--documents` short text documents in folders, uploads the archive with its presigned PUT, submits
`{"archive": {"upload_id"}}` and waits for the job. Prints the upload size, the time to 202 (the archive check) and
submit-to-completed time, the job's progress, its parent execution's history size, and the number of citations.
With `--fail`, those documents (0-based indexes) fail to parse on every attempt (`parse_documents#N=invalid-input`):
the job fails after every other document was parsed; the bench prints its progress and dead letters, then clears the
faults, replays from `parse_documents` as an operator and prints how many documents were parsed again and the time
to completed. With `--cancel-at N`, the job is cancelled once N documents are parsed; the bench prints how soon it
ended and how many documents started after the cancel was recorded. The archive check reads its document limit at
run time; it is lifted to `--documents` for the run (the `documents` list keeps the contract's own bound). The local
runtime is one process: figures measure the platform's overhead, not AWS. `--markdown` prints the sentence the
README quotes, with the machine it was measured on (`make figures` pastes it). Prints figures; asserts nothing.
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

from machine import machine  # noqa: E402

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from longhaul.core import faults, limits  # noqa: E402
from longhaul.workflows import REGISTRY  # noqa: E402

TERMINAL = ("completed", "failed", "cancelled", "expired")


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
    parser.add_argument("--fail", default="", help="document indexes that fail to parse, e.g. 17,45,90")
    parser.add_argument("--cancel-at", type=int, help="cancel the job once this many documents are parsed")
    parser.add_argument("--markdown", action="store_true", help="print the README's sentence only")
    args = parser.parse_args()
    failing = [int(n) for n in args.fail.split(",") if n.strip()]
    limits.MAX_DOCUMENTS = max(limits.MAX_DOCUMENTS, args.documents)
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    api = platform.api_url

    def wait_for(job_id: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            job: dict[str, Any] = requests.get(f"{api}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
            return job if job["status"] in TERMINAL else None

        return wait_until(done, timeout=args.timeout, interval=0.5, what=job_id)

    def job_events(job_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = requests.get(
                f"{api}/v1/jobs/{job_id}/events",
                headers=headers,
                params={"cursor": cursor} if cursor else {},
                timeout=60,
            ).json()
            events.extend(page["events"])
            cursor = page["next_cursor"]
            if not cursor:
                return events

    def parse_starts_after(job_id: str, event_type: str) -> int:
        """How many documents started parsing after the job's last event of `event_type`."""
        events = job_events(job_id)
        last = max(i for i, e in enumerate(events) if e["type"] == event_type)
        return sum(e["type"] == "step_started" and e["step"] == "parse_documents" for e in events[last:])

    def cancel_when_parsed(job_id: str, documents: int) -> None:
        """Cancel the job once `documents` are parsed; print how it stopped."""

        def parsed() -> int | None:
            job = requests.get(f"{api}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
            message = job["progress"]["message"]
            done = message.startswith("parse_documents: ") and int(message.split()[1].replace(",", "")) >= documents
            return job["progress"]["completed"] if done or job["status"] in TERMINAL else None

        count = wait_until(parsed, timeout=args.timeout, interval=0.2, what="documents to be parsed")
        asked = time.perf_counter()
        answer = requests.post(f"{api}/v1/jobs/{job_id}/cancel", headers=headers, timeout=60)
        job = wait_for(job_id)
        execution = platform.client("stepfunctions").describe_execution(
            executionArn=platform.deployment.state_machine("DocumentAnalysis").replace(":stateMachine:", ":execution:")
            + f":{job_id}"
        )
        print(
            f"cancel asked after {count} documents parsed: {answer.status_code}; {job['status']} after "
            f"{time.perf_counter() - asked:.1f}s; {parse_starts_after(job_id, 'cancel_requested')} documents started "
            f"after the cancel was recorded; execution {execution['status']}; progress {job['progress']['message']!r}"
        )

    try:
        faults.install(faults.FaultInjector(",".join(f"parse_documents#{n}=invalid-input" for n in failing), REGISTRY))
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
        if args.cancel_at is not None:
            cancel_when_parsed(job_id, args.cancel_at)
            return

        job = wait_for(job_id)
        elapsed = time.perf_counter() - started
        history = len(platform.execution_history("DocumentAnalysis", job_id))
        if args.markdown:
            print(
                f"`.venv/bin/python bench/archive_job.py --documents {args.documents}` runs a whole job over an "
                f"archive (here: {args.documents:,} documents accepted in {accepted_s:.1f} s, {job['status']} in "
                f"{elapsed:.0f} s on the local runtime; measured on {machine()})."
            )
            return
        print(
            f"{args.documents} documents, archive {len(data) / 1024:.0f} KiB: accepted in {accepted_s:.2f}s, "
            f"{job['status']} in {elapsed:.1f}s; progress {job['progress']['message']!r}; "
            f"parent execution history {history} events"
        )
        if failing:
            listed = requests.get(
                f"{api}/v1/ops/dead-letters",
                headers=platform.auth_header("ops"),
                params={"step": "parse_documents", "limit": 100},
                timeout=60,
            ).json()["dead_letters"]
            named = sorted((d["item"], d["item_name"]) for d in listed if d["job_id"] == job_id)
            print(f"failed documents {job.get('error', {}).get('items')}; dead letters name {named}")
            faults.install(faults.FaultInjector(""))
            replayed_at = time.perf_counter()
            replay = requests.post(
                f"{api}/v1/ops/jobs/{job_id}/replay",
                json={"from_step": "parse_documents", "reason": "parser fixed"},
                headers=platform.auth_header("ops"),
                timeout=120,
            ).json()
            print(f"replay reruns {replay.get('rerun_named')}")
            job = wait_for(job_id)
            print(
                f"after the replay: {job['status']} in {time.perf_counter() - replayed_at:.1f}s; "
                f"{parse_starts_after(job_id, 'job_replayed')} documents parsed again; "
                f"progress {job['progress']['message']!r}"
            )
        result = requests.get(f"{platform.api_url}/v1/jobs/{job_id}/result", headers=headers, timeout=60)
        citations = len(result.json().get("citations", [])) if result.status_code == 200 else 0
        documents = len(result.json().get("documents", [])) if result.status_code == 200 else 0
        print(f"result lists {documents} documents, {citations} citations")
        if job.get("error"):
            print(f"error: {job['error']}")
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
