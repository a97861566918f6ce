"""Per step of the jobs a benchmark runs on the local platform: invocations, S3 requests and memory, as `bench/cost.py`
prints them (`StepFigures`).

S3 requests are counted where the job's own meter counts them (`longhaul.core.metering`), attributed to the step whose
invocation made them. Memory is what sizes a function (`memory_mb` in the workflow's spec): a fresh interpreter that
imports the function's handler (its resident set, as Lambda's "Max Memory Used" counts the runtime and its imports)
plus the invocation's peak of Python allocations (`tracemalloc`, from the invocation's start). Allocations are
process-wide, so while memory is measured (`measuring_memory()`) the step invocations run one at a time: each peak is
one invocation's own. Measuring slows the steps down: the cost figures come from a run that does not measure memory.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local import lambda_runtime
from longhaul.core import metering

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024
_step: ContextVar[str | None] = ContextVar("bench_step", default=None)


@dataclass
class StepFigure:
    """One step's figures over the invocations seen."""

    invocations: int = 0
    s3_requests: int = 0
    s3_class_a: int = 0
    configured_mb: int = 0
    handler: str = ""
    workflow: str = ""
    peak_mb: float = 0.0  # the largest invocation's peak of Python allocations (only while measuring memory)
    gb_seconds: float = 0.0  # its invocations' local time x the function's configured memory


@dataclass
class StepFigures:
    """What each step's invocations did while installed (`install`), by step name, in the order steps first ran."""

    steps: dict[str, StepFigure] = field(default_factory=dict)
    measure_memory: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _one_at_a_time: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self._lock:
            self.steps.clear()

    @contextmanager
    def installed(self) -> Iterator[StepFigures]:
        """Count while in the block: a middleware around every invocation, and the meter's request counts."""
        counts = metering.request_counts

        def counted(service: str, operation: str, params: Any) -> dict[str, int]:
            found = counts(service, operation, params)
            step = _step.get()
            if step is not None and service == "s3":
                with self._lock:
                    figure = self.steps.setdefault(step, StepFigure())
                    figure.s3_requests += 1
                    figure.s3_class_a += found.get("s3_class_a", 0)
            return found

        metering.request_counts = counted  # type: ignore[assignment]
        remove = lambda_runtime.add_middleware(self._middleware)
        try:
            yield self
        finally:
            remove()
            metering.request_counts = counts  # type: ignore[assignment]

    def _middleware(self, invocation: Any, call_next: Callable[[], Any]) -> Any:
        event = invocation.event
        if not lambda_runtime.is_step_event(event):
            return call_next()
        step = str(event["step"])
        with self._lock:
            figure = self.steps.setdefault(step, StepFigure())
            figure.invocations += 1
            figure.configured_mb = int(invocation.context.memory_limit_in_mb)
            figure.handler = invocation.handler
            figure.workflow = str((event.get("input") or {}).get("workflow") or "")
        token = _step.set(step)
        started = time.monotonic()
        try:
            if not self.measure_memory:
                return call_next()
            with self._one_at_a_time:
                tracemalloc.reset_peak()
                before, _ = tracemalloc.get_traced_memory()
                try:
                    return call_next()
                finally:
                    _, peak = tracemalloc.get_traced_memory()
                    with self._lock:
                        figure.peak_mb = max(figure.peak_mb, (peak - before) / MB)
        finally:
            _step.reset(token)
            with self._lock:
                figure.gb_seconds += (time.monotonic() - started) * figure.configured_mb / 1024

    @contextmanager
    def measuring_memory(self) -> Iterator[None]:
        """Measure each step invocation's peak allocations in the block (invocations one at a time)."""
        tracemalloc.start()
        self.measure_memory = True
        try:
            yield
        finally:
            self.measure_memory = False
            tracemalloc.stop()

    def table(self, documents: int, *, baselines: dict[str, float] | None = None) -> list[str]:
        """Lines: per step, its invocations, S3 requests (and per document; `PUT+`: of them in S3's dearer class),
        and its memory: configured, and used when measured (`baselines`, by step: its import baseline, plus its
        largest invocation's peak); and its Lambda GB-seconds (local time, as the job's cost counts it)."""
        baselines = baselines or {}
        lines = [
            f"  {'step':<22} {'invocations':>11} {'S3 req':>7} {'PUT+':>5} {'per doc':>8} "
            f"{'MB configured':>13} {'MB used':>8} {'import':>7} {'peak':>6} {'GB-s':>6}"
        ]
        for name, figure in self.steps.items():
            used, base = "", ""
            if name in baselines and figure.peak_mb:
                base = f"{baselines[name]:.0f}"
                used = f"{baselines[name] + figure.peak_mb:.0f}"
            peak = f"{figure.peak_mb:.0f}" if figure.peak_mb else ""
            lines.append(
                f"  {name:<22} {figure.invocations:>11} {figure.s3_requests:>7} {figure.s3_class_a:>5} "
                f"{figure.s3_requests / documents:>8.2f} {figure.configured_mb:>13} {used:>8} {base:>7} {peak:>6} "
                f"{figure.gb_seconds:>6.2f}"
            )
        return lines


#: Imported lazily by steps (kept out of other functions' cold starts): counted in every step's baseline, an upper
#: bound for the steps that never import them.
LAZY_MODULES = ("numpy", "bm25s", "pypdf")
#: The AWS clients a step's services build on its first invocation (botocore's service models stay in memory).
CLIENTS = ("s3", "dynamodb", "stepfunctions", "sqs", "events")


def baselines(figures: StepFigures) -> dict[str, float]:
    """Each step's import baseline (`import_baseline_mb`), measured once per handler and domain."""
    from longhaul.engine.spec import registry

    measured: dict[tuple[str, str], float] = {}
    found = {}
    for name, figure in figures.steps.items():
        if not figure.handler or figure.workflow not in registry():
            continue
        basis = (figure.handler, registry()[figure.workflow].domain)
        if basis not in measured:
            measured[basis] = import_baseline_mb(*basis)
        found[name] = measured[basis]
    return found


def import_baseline_mb(handler: str, domain: str) -> float:
    """The resident set (MB) of a fresh interpreter once it has imported `handler`'s module, the workflow's domain
    module and `LAZY_MODULES`, and built `CLIENTS`: what a warm sandbox holds before its work (the runtime, the
    function's imports, its clients)."""
    code = (
        "import sys, importlib, boto3\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "for name in sys.argv[2].split(','): importlib.import_module(name)\n"
        "for name in sys.argv[3].split(','): boto3.client(name, region_name='us-east-1')\n"
        "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))"
    )
    modules = ",".join([handler.rpartition(".")[0], domain, *LAZY_MODULES])
    found = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "lambdas"), modules, ",".join(CLIENTS)],
        capture_output=True,
        text=True,
        check=True,
    )
    # the peak resident set of the process (kB): not `ru_maxrss`, which Linux carries over from the parent at fork
    return int(found.stdout.strip().splitlines()[-1]) / 1024
