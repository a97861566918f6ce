"""Benchmark: submit-to-completed time and state transitions per document, for the samples, on the local runtime.

    make bench            # or: .venv/bin/python bench/end_to_end.py --runs 5

Prints figures; asserts nothing. The local runtime is one process (functions run in-process, one warm sandbox
per function), so these figures measure the platform's overhead, not AWS latency.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

SAMPLES = ROOT / "samples"
TEN_DOCUMENTS = 10  # the figure: a 10-document job, submit to completed


def _inline_request(documents: int) -> dict[str, Any]:
    """`documents` small inline contracts (the request `bench/cost.py` prices)."""
    from cost import request_of

    return request_of(documents)


def _pdf_request(platform: LocalPlatform, headers: dict[str, str]) -> dict[str, Any]:
    documents = []
    for pdf in sorted((SAMPLES / "documents").glob("*.pdf")):
        ticket = requests.post(
            f"{platform.api_url}/v1/uploads",
            json={"filename": pdf.name, "media_type": "application/pdf"},
            headers=headers,
            timeout=30,
        ).json()
        requests.put(ticket["upload_url"], data=pdf.read_bytes(), headers=ticket["headers"], timeout=30)
        documents.append({"name": pdf.name, "upload_id": ticket["upload_id"]})
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "What are the liability caps, service credits and termination rights?",
            "documents": documents,
        },
    }


def run_job(platform: LocalPlatform, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=30)
    accepted.raise_for_status()
    job_id = accepted.json()["job_id"]
    accepted_after = time.perf_counter() - started

    def done() -> dict[str, Any] | None:
        job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
        return job if job["status"] in ("completed", "failed", "cancelled", "expired") else None

    job = wait_until(done, timeout=300, interval=0.05, what=job_id)
    elapsed = time.perf_counter() - started
    sfn = platform.client("stepfunctions")
    # the workflow's own machine (its construct is named after the workflow: "document-analysis" → DocumentAnalysis)
    machine = platform.deployment.state_machine("".join(part.title() for part in body["workflow"].split("-")))
    execution = machine.replace(":stateMachine:", ":execution:") + f":{job_id}"
    history = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
    transitions = sum(1 for e in history if e["type"].endswith("StateEntered"))
    return {
        "status": job["status"],
        "accepted_s": accepted_after,
        "completed_s": elapsed,
        "transitions": transitions,
        "documents": len(body["input"]["documents"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="run only the scenarios whose name contains this text")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    boot = time.perf_counter()
    platform = LocalPlatform.start(ROOT)
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in platform.timings.items())
    print(f"platform start: {time.perf_counter() - boot:.1f}s ({phases})")
    headers = platform.auth_header(platform.keys[0].tenant)
    try:
        scenarios: dict[str, Callable[[], dict[str, Any]]] = {
            "samples/request.json (inline text + Markdown)": lambda: json.loads((SAMPLES / "request.json").read_text()),
            f"{TEN_DOCUMENTS} inline contracts (bench/cost.py's request)": lambda: _inline_request(TEN_DOCUMENTS),
            "samples/documents/*.pdf (uploads)": lambda: _pdf_request(platform, headers),
        }
        print(f"{'scenario':<48} {'docs':>4} {'accepted':>9} {'p50 done':>9} {'max done':>9} {'transitions/doc':>16}")
        for name, request in scenarios.items():
            if args.only not in name:
                continue
            body = request()
            results = [run_job(platform, headers, body) for _ in range(args.runs)]
            assert all(r["status"] == "completed" for r in results), results
            done = [r["completed_s"] for r in results]
            docs = results[0]["documents"]
            print(
                f"{name:<48} {docs:>4} {statistics.median(r['accepted_s'] for r in results):>8.3f}s "
                f"{statistics.median(done):>8.2f}s {max(done):>8.2f}s {results[0]['transitions'] / docs:>16.1f}"
            )
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
