"""Benchmark: a job's live output on the local runtime (offline model, time scale 1).

    .venv/bin/python bench/streaming.py [--trials 3]

Prints, over the trials: how long after the draft's step starts its first streamed text reaches a client reading
`GET …/stream` (target ≤ 1 s); for a 10-document job, when its first useful output (the first streamed piece of its
answer) reaches the client and when the job completes, both from the submission (target: ≥ 30% earlier); and the
stream records per job and per model call, with their TTL (bounded by coalescing). Asserts nothing; the machine's
cores and load are printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.platform import LocalPlatform  # noqa: E402
from longhaul.core.streams import COALESCE_CHARS, COALESCE_SECONDS, STREAM_TTL_SECONDS  # noqa: E402


def _load() -> str:
    return f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}"


def ten_documents() -> dict[str, Any]:
    body = json.loads((ROOT / "samples" / "request.json").read_text())
    documents = body["input"]["documents"]
    body["input"]["documents"] = [
        {**documents[i % len(documents)], "name": f"{i:02d}_{documents[i % len(documents)]['name']}"} for i in range(10)
    ]
    return body


def follow(platform: LocalPlatform, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """Submit `body`, read its stream to `end`; when each thing reached the client (seconds after submission)."""
    started = time.monotonic()
    job_id = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=30).json()["job_id"]
    submitted_at = datetime.now(UTC)
    first_draft: float | None = None
    records, calls = 0, set()
    with requests.get(
        f"{platform.api_url}/v1/jobs/{job_id}/stream",
        headers={**headers, "Accept": "text/event-stream"},
        stream=True,
        timeout=300,
    ) as answer:
        event: dict[str, str] = {}
        for raw in answer.iter_lines():
            line = raw.decode("utf-8")
            if line:
                name, _, value = line.partition(": ")
                event[name] = value
                continue
            kind = event.get("event")
            if kind == "end":
                break
            if kind in ("output_delta", "call_finished"):
                records += 1
                data = json.loads(event["data"])
                calls.add(data["call_id"])
                if kind == "output_delta" and data["step"] == "draft_answer" and first_draft is None:
                    first_draft = time.monotonic() - started
            event = {}
    ended = time.monotonic() - started
    job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
    events = requests.get(f"{platform.api_url}/v1/jobs/{job_id}/events", headers=headers, timeout=30).json()["events"]
    draft_started = next(e["at"] for e in events if e["type"] == "step_started" and e["step"] == "draft_answer")
    draft_start = (datetime.fromisoformat(draft_started.replace("Z", "+00:00")) - submitted_at).total_seconds()
    completed = (datetime.fromisoformat(job["finished_at"].replace("Z", "+00:00")) - submitted_at).total_seconds()
    assert first_draft is not None, "no streamed text of the draft"
    return {
        "status": job["status"],
        "first_draft": first_draft,
        "draft_start": draft_start,
        "completed": max(completed, 0.0),
        "stream_end": ended,
        "records": records,
        "calls": len(calls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    trials = parser.parse_args().trials
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    platform = LocalPlatform.start(ROOT)
    try:
        headers = platform.auth_header("alpha")
        follow(platform, headers, json.loads((ROOT / "samples" / "request.json").read_text()))  # warm
        runs = [follow(platform, headers, ten_documents()) for _ in range(trials)]
    finally:
        platform.stop()
    first_text = [r["first_draft"] - r["draft_start"] for r in runs]
    print(f"machine: {_load()}; {trials} trial(s) of a 10-document document-analysis job, offline model, scale 1")
    print(f"first streamed text of the draft after its step starts: median {statistics.median(first_text):.2f} s, "
          f"max {max(first_text):.2f} s (target ≤ 1 s)")  # fmt: skip
    for i, r in enumerate(runs, 1):
        earlier = 1 - r["first_draft"] / r["completed"] if r["completed"] else 0.0
        print(
            f"  trial {i}: first streamed piece of the answer {r['first_draft']:.2f} s, completed "
            f"{r['completed']:.2f} s after submission: {earlier:.0%} earlier (target ≥ 30%); {r['records']} records, "
            f"{r['calls']} calls, {r['records'] / max(r['calls'], 1):.1f} per call; status {r['status']}"
        )
    earliest = [1 - r["first_draft"] / r["completed"] for r in runs if r["completed"]]
    print(f"first useful output vs completion: median {statistics.median(earliest):.0%} earlier")
    print(f"stream records per job: median {statistics.median(r['records'] for r in runs)}, per call: median "
          f"{statistics.median(r['records'] / max(r['calls'], 1) for r in runs):.1f}; coalesced every "
          f"{COALESCE_SECONDS * 1000:.0f} ms or {COALESCE_CHARS} characters; TTL {STREAM_TTL_SECONDS} s "
          f"({STREAM_TTL_SECONDS / 3600:.0f} h, at most a day)")  # fmt: skip


if __name__ == "__main__":
    main()
