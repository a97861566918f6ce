"""Benchmark: what one trace per job holds and costs, on the local platform.

    make bench            # or: .venv/bin/python bench/tracing.py --jobs 8 --documents 10

Jobs of `--documents` small inline contracts (`cost.request_of`, the job `bench/cost.py` prices) run one after the
other, after one warm-up job. Three figures:
- the time a step invocation takes with tracing and without (`LONGHAUL_TRACING=off` in its environment): in each of
  `--jobs` jobs, a local-runtime middleware runs each step's invocations with tracing on or off, alternately
  within a job and starting the other way in the next (see `Interleaved`), and measures each (wall, and the
  invocation thread's CPU, which includes the in-process AWS it calls); per step, the median both ways; then the
  steps weighted by how often they ran, on over off (the target: tracing adds ≤ 5%). The process's botocore
  instrumentation stays installed in both arms (an AWS call outside a job's trace opens a span the sampler drops),
  as in the local runtime with tracing off; on AWS a function with tracing off never installs it;
- the spans of one more job, wholly traced, read back by the operators' trace route (`GET /v1/ops/jobs/{id}/trace`):
  the count by name, whether every span is in the job's trace (the id derived from its correlation id; no span
  finished meanwhile in another trace of the span store) and none is orphaned (each `parent_id` a span of the
  trace, one root); `--inject` gives that job a fault (e.g. `extract_evidence#0=transientx1`: an item that fails
  once and is retried, so a failed span and its retry);
- its model-call spans (`gen_ai.operation.name` chat) whose token attributes equal their charge in the job's usage
  ledger (`GET /v1/ops/jobs/{id}/calls`, matched by the span's `longhaul.call_id`): the percentage (target 100%).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost import request_of  # noqa: E402
from machine import machine  # noqa: E402
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai  # noqa: E402

from local import lambda_runtime, traces  # noqa: E402
from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from longhaul.core import faults  # noqa: E402
from longhaul.core.correlation import trace_id_for  # noqa: E402
from longhaul.core.genai import CALL_ID  # noqa: E402
from longhaul.core.tracing import TRACING_ENV  # noqa: E402

TARGET_ADDED = 0.05  # tracing adds at most 5% to a step invocation
TERMINAL = ("completed", "failed", "cancelled", "expired")


class Interleaved:
    """A local-runtime middleware: each step invocation runs with tracing on or off, and its wall and thread CPU
    seconds are kept by step and arm. A step's invocations within a job alternate (a fan-out's items: the same work
    at nearly the same time), starting on in one job and off in the next, so over the jobs every step runs both ways
    about equally often, interleaved with the other arm's: the pairing a machine whose load drifts blurs least."""

    def __init__(self) -> None:
        self.active = False
        self.samples: dict[tuple[str, bool], list[tuple[float, float]]] = {}
        self._jobs: dict[str, int] = {}
        self._seen: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        if not self.active or not lambda_runtime.is_step_event(invocation.event):
            return call_next()
        job, step = str(invocation.event["input"]["job_id"]), str(invocation.event["step"])
        with self._lock:
            index = self._jobs.setdefault(job, len(self._jobs))
            on = (self._seen[(job, step)] + index) % 2 == 0
            self._seen[(job, step)] += 1
        invocation.environment = {**invocation.environment, TRACING_ENV: "on" if on else "off"}
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return call_next()
        finally:
            sample = (time.perf_counter() - started, time.thread_time() - cpu)
            with self._lock:
                self.samples.setdefault((step, on), []).append(sample)

    def steps(self) -> list[tuple[str, int, int, float, float, float, float]]:
        """Per step that ran both ways: (step, invocations on, off, median wall on, off, median CPU on, off)."""
        rows = []
        for step in sorted({s for s, _ in self.samples}):
            on, off = self.samples.get((step, True), []), self.samples.get((step, False), [])
            if on and off:
                rows.append(
                    (
                        step,
                        len(on),
                        len(off),
                        statistics.median(w for w, _ in on),
                        statistics.median(w for w, _ in off),
                        statistics.median(c for _, c in on),
                        statistics.median(c for _, c in off),
                    )
                )
        return rows


def run_job(platform: LocalPlatform, headers: dict[str, str], body: dict[str, Any], request_id: str) -> str:
    accepted = requests.post(
        f"{platform.api_url}/v1/jobs", json=body, headers={**headers, "X-Request-Id": request_id}, timeout=60
    )
    accepted.raise_for_status()
    job_id = str(accepted.json()["job_id"])

    def done() -> dict[str, Any] | None:
        job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
        return job if job["status"] in TERMINAL else None

    job = wait_until(done, timeout=600, interval=0.05, what=job_id)
    if job["status"] != "completed":
        raise RuntimeError(f"job {job_id} ended {job['status']}: {job.get('error')}")
    return job_id


def _kept() -> dict[str, int]:
    """Spans kept per trace id by the local span store."""
    store = traces.store()
    if store is None:
        return {}
    return {trace_id: len(store.spans(trace_id)) for trace_id in store.trace_ids()}


def examine_trace(
    platform: LocalPlatform,
    ops: dict[str, str],
    job_id: str,
    request_id: str,
    before: dict[str, int],
    after: dict[str, int],
) -> None:
    """Print the job's spans by name, whether they are all in its trace and none orphaned, and the model-call spans
    that match the job's ledger."""
    trace = requests.get(f"{platform.api_url}/v1/ops/jobs/{job_id}/trace", headers=ops, timeout=30).json()
    spans = trace["spans"]
    ids = {s["span_id"] for s in spans}
    roots = [s["name"] for s in spans if s["parent_id"] is None]
    orphans = [s["name"] for s in spans if s["parent_id"] is not None and s["parent_id"] not in ids]
    elsewhere = {t: n - before.get(t, 0) for t, n in after.items() if t != trace["trace_id"]}
    elsewhere = {t: n for t, n in elsewhere.items() if n > 0}
    print(
        f"job {job_id}: {len(spans)} spans, trace {trace['trace_id']} "
        f"({'the' if trace['trace_id'] == trace_id_for(request_id) else 'NOT the'} id derived from its correlation id)"
    )
    print(
        f"  roots: {roots}; orphaned spans: {len(orphans)}{' ' + str(sorted(set(orphans))) if orphans else ''}; "
        f"spans finished meanwhile in other traces: {sum(elsewhere.values())}"
    )
    by_name = Counter(s["name"] for s in spans)
    print(f"  {'span name':<40} {'count':>6}")
    for name, count in sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {name:<40} {count:>6}")
    calls = requests.get(f"{platform.api_url}/v1/ops/jobs/{job_id}/calls", headers=ops, timeout=30).json()["calls"]
    ledger = {c["charge_id"]: (c["input_tokens"], c["output_tokens"]) for c in calls}
    model_spans = [s for s in spans if s["attributes"].get(gen_ai.GEN_AI_OPERATION_NAME) == "chat"]
    answered = [s for s in model_spans if gen_ai.GEN_AI_USAGE_INPUT_TOKENS in s["attributes"]]
    matching = [
        s
        for s in answered
        if ledger.get(s["attributes"].get(CALL_ID))
        == (s["attributes"][gen_ai.GEN_AI_USAGE_INPUT_TOKENS], s["attributes"][gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS])
    ]
    share = 100 * len(matching) / len(answered) if answered else float("nan")
    print(
        f"  model-call spans: {len(model_spans)} ({len(answered)} with usage); their token attributes equal the "
        f"usage ledger's charge: {len(matching)}/{len(answered)} = {share:.0f}% (target 100%); ledger charges "
        f"{len(ledger)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=8, help="jobs whose step invocations alternate tracing on and off")
    parser.add_argument("--documents", type=int, default=10)
    parser.add_argument("--inject", default="", help="a fault specification for the examined job (LONGHAUL_FAULTS)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(machine())
    platform = LocalPlatform.start(ROOT)
    interleaved = Interleaved()
    remove = lambda_runtime.add_middleware(interleaved)
    try:
        headers = platform.auth_header(platform.keys[0].tenant)
        ops = platform.auth_header("ops")
        body = request_of(args.documents)
        stamp = f"{time.time_ns():x}"
        run_job(platform, headers, body, f"bench-tracing-{stamp}-warm-up")  # first imports, clients, model builds
        interleaved.active = True
        for n in range(args.jobs):
            run_job(platform, headers, body, f"bench-tracing-{stamp}-{n}")
        interleaved.active = False
        before = _kept()  # then one more job, wholly traced (with the fault when one is given), read back
        faults.install(faults.FaultInjector(args.inject))
        request_id = f"bench-tracing-{stamp}-examined"
        job_id = run_job(platform, headers, body, request_id)
        after = _kept()
        faults.install(faults.FaultInjector(""))
        if args.inject:
            print(f"the examined job met the fault {args.inject!r}")
        examine_trace(platform, ops, job_id, request_id, before, after)
    finally:
        remove()
        platform.stop()
    rows = interleaved.steps()
    print(
        f"\nstep invocations of {args.jobs} jobs of {args.documents} documents, with tracing on and off interleaved "
        "(median per step, ms):"
    )
    print(f"  {'step':<20} {'on':>4} {'off':>4} {'wall on':>9} {'wall off':>9} {'CPU on':>8} {'CPU off':>8}")
    for step, n_on, n_off, wall_on, wall_off, cpu_on, cpu_off in rows:
        print(
            f"  {step:<20} {n_on:>4} {n_off:>4} {wall_on * 1000:>9.1f} {wall_off * 1000:>9.1f} "
            f"{cpu_on * 1000:>8.1f} {cpu_off * 1000:>8.1f}"
        )
    # Each step weighted by how often it runs: what a job's step invocations take, both ways.
    weight = {r[0]: r[1] + r[2] for r in rows}
    wall_ratio = sum(weight[r[0]] * r[3] for r in rows) / sum(weight[r[0]] * r[4] for r in rows)
    cpu_ratio = sum(weight[r[0]] * r[5] for r in rows) / sum(weight[r[0]] * r[6] for r in rows)
    print(
        f"  on/off, the steps' medians weighted by their invocations: wall {wall_ratio:.3f} "
        f"({100 * (wall_ratio - 1):+.1f}%), CPU {cpu_ratio:.3f} ({100 * (cpu_ratio - 1):+.1f}%)"
    )
    met = cpu_ratio - 1 <= TARGET_ADDED
    print(f"target: tracing adds ≤ {TARGET_ADDED:.0%} per step invocation (CPU): {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
