"""Benchmark: a 1,000-document job (small inline texts) on the local runtime: time to completion, the parent
execution's history size and its state transitions per document; then, per step, its invocations' longest duration
against the function's timeout and largest memory against its memory size.

    .venv/bin/python bench/large_job.py --documents 1000     # part of `make bench`
    .venv/bin/python bench/large_job.py --documents 5000 --memory   # the largest job a submission may hold

Prints figures; asserts nothing. Above `INLINE_MAP_MAX_ITEMS` documents, parsing runs as a Distributed Map over
the job's batched manifest: child executions (one per batch) keep their own histories, so the parent's history
counts batches, not documents. Local figures measure the platform's overhead in one process, not AWS latency.

Per invocation (a middleware of the local runtime around every step invocation): its wall-clock duration, its
thread's CPU time, and with `--memory` its memory: the peak of the Python allocations traced (`tracemalloc`) while it
ran, above what was allocated when it started. The runtime runs handlers in-process and in threads, so to attribute a
peak to one invocation `--memory` runs step invocations one at a time: completion time is then longer than the
platform's own. Traced memory is the handler's Python
objects, not the Lambda sandbox's RSS (the interpreter and imported modules, some 100-150 MB, come on top).
Durations on a loaded machine are long by the load's factor: the figures print the load.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
import tracemalloc
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local import lambda_runtime  # noqa: E402
from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from longhaul.workflows import REGISTRY  # noqa: E402

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


@dataclass
class StepFigures:
    """The largest figures of one step's invocations."""

    timeout_s: float
    memory_mb: int
    invocations: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    traced_mb: float | None = None


@dataclass
class PerInvocation:
    """A local-runtime middleware measuring every step invocation (see the module's docstring)."""

    memory: bool
    steps: dict[str, StepFigures] = field(default_factory=dict)
    _one_at_a_time: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        if not lambda_runtime.is_step_event(invocation.event):
            return call_next()
        step = str(invocation.event["step"])
        with self._one_at_a_time if self.memory else nullcontext():
            if self.memory:
                tracemalloc.reset_peak()
                at_start = tracemalloc.get_traced_memory()[0]
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return call_next()
            finally:
                wall, used = time.perf_counter() - started, time.thread_time() - cpu
                figures = self.steps.setdefault(
                    step, StepFigures(invocation.timeout, invocation.context.memory_limit_in_mb)
                )
                figures.invocations += 1
                figures.wall_s, figures.cpu_s = max(figures.wall_s, wall), max(figures.cpu_s, used)
                if self.memory:
                    peak = (tracemalloc.get_traced_memory()[1] - at_start) / 2**20
                    figures.traced_mb = max(figures.traced_mb or 0.0, peak)

    def report(self, order: list[str]) -> None:
        print(
            f"per invocation, the largest of each step (load {' '.join(f'{x:.1f}' for x in os.getloadavg())}, "
            f"{os.cpu_count()} cores; memory: Python allocations traced while it ran):"
        )
        print(f"  {'step':<20} {'calls':>6} {'wall s':>8} {'of timeout':>11} {'cpu s':>7} {'MB':>8} {'of memory':>10}")
        for step in sorted(self.steps, key=lambda s: order.index(s) if s in order else len(order)):
            f = self.steps[step]
            memory = f"{f.traced_mb:8.1f} {f.traced_mb / f.memory_mb:10.1%}" if f.traced_mb is not None else ""
            print(
                f"  {step:<20} {f.invocations:>6} {f.wall_s:8.2f} {f.wall_s / f.timeout_s:11.1%} {f.cpu_s:7.2f} "
                f"{memory}  (timeout {f.timeout_s:.0f} s, memory {f.memory_mb} MB)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument(
        "--memory", action="store_true", help="trace each step invocation's memory (invocations run one at a time)"
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    measure = PerInvocation(memory=args.memory)
    if measure.memory:
        tracemalloc.start()
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    remove = lambda_runtime.add_middleware(measure)
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
        measure.report(list(REGISTRY[WORKFLOW].step_names))
    finally:
        remove()
        platform.stop()


if __name__ == "__main__":
    main()
