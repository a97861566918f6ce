"""Benchmark: where a 10-document job's CPU goes on the local platform, by layer and by who asked for it.

    make bench            # or: .venv/bin/python bench/where_time_goes.py --jobs 5 --documents 10

The local platform is one process: the API and step functions run in-process, their AWS calls go through botocore to
moto over an in-process WSGI transport, and moto's interpreter runs the state machine. So a job's wall time on the
local platform is, to first order, the CPU its threads spend in one interpreter. This samples every thread of the
process (`--hz` a second) while `--jobs` jobs of `--documents` small inline contracts (`cost.request_of`, the job
`bench/cost.py` prices) run one after the other, after one warm-up job, and charges each thread's CPU time since the
previous sample (Linux's per-thread CPU clocks) to the stack it is in (a thread that worked and then blocked is
charged at the frame it blocks in: the local platform's lock around DynamoDB operations counts as moto's). Two
breakdowns:
- layer: the innermost frame of a known layer (moto's services, its state machine interpreter, the WSGI transport,
  botocore, Powertools, pydantic, Longhaul's own code, the local runtime, this script's client); the standard
  library is charged to its caller's layer;
- asker: whose work it is (a step function, the API function, the interpreter between states, this script's polling
  of the job, the rest of the platform).
Prints figures; asserts nothing. Linux only (per-thread CPU clocks).
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
from pathlib import Path
from types import FrameType

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost import request_of  # noqa: E402
from machine import machine  # noqa: E402

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

# (layer, the path fragment of its files), innermost match wins; more specific fragments first.
LAYERS = (
    ("moto: state machine interpreter", "/moto/stepfunctions/"),
    ("local WSGI transport (werkzeug, Flask)", "/local/moto_patches/transport"),
    ("moto: AWS services (with the local platform's patches)", "/moto/"),
    ("moto: AWS services (with the local platform's patches)", "/local/moto_patches/"),
    ("local WSGI transport (werkzeug, Flask)", "/werkzeug/"),
    ("local WSGI transport (werkzeug, Flask)", "/flask/"),
    ("local runtime (invocations, front door)", "/local/"),
    ("AWS SDK (botocore, boto3)", "/botocore/"),
    ("AWS SDK (botocore, boto3)", "/boto3/"),
    ("Powertools (resolver, logger)", "/aws_lambda_powertools/"),
    ("pydantic", "/pydantic"),
    ("Longhaul: its own code", "/lambdas/"),
    ("this script's HTTP client", "/requests/"),
    ("this script's HTTP client", "/urllib3/"),
)
# (asker, a path fragment and function name of a frame anywhere on the stack), first match wins.
ASKERS = (
    ("step functions (handlers/steps.py)", "/handlers/steps.py", "handler"),
    ("API function (handlers/api.py)", "/handlers/api.py", "handler"),
    ("other functions", "/lambdas/handlers/", "handler"),
    ("state machine interpreter, between states", "/moto/stepfunctions/", ""),
    ("this script (submit, poll the job)", "where_time_goes.py", ""),
)


def _layer(frame: FrameType | None) -> str:
    while frame is not None:
        path = frame.f_code.co_filename
        for layer, fragment in LAYERS:
            if fragment in path:
                return layer
        frame = frame.f_back
    return "other (standard library, threads' own loops)"


def _asker(frame: FrameType | None) -> str:
    stack = []
    while frame is not None:
        stack.append((frame.f_code.co_filename, frame.f_code.co_name))
        frame = frame.f_back
    for asker, fragment, function in ASKERS:
        if any(fragment in path and (not function or name == function) for path, name in stack):
            return asker
    return "rest of the platform (servers, schedules, queues)"


class Sampler(threading.Thread):
    """Charges each thread's CPU time since the last sample to the layer and asker of the stack it is in."""

    def __init__(self, hz: float) -> None:
        super().__init__(daemon=True, name="cpu-sampler")
        self.interval = 1 / hz
        self.layers: Counter[str] = Counter()
        self.askers: Counter[str] = Counter()
        self.cpu = 0.0
        self._seen: dict[int, float] = {}
        self._done = threading.Event()

    def run(self) -> None:
        me = threading.get_ident()
        while not self._done.wait(self.interval):
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                try:
                    now = time.clock_gettime(time.pthread_getcpuclockid(ident))
                except (OSError, ProcessLookupError):  # the thread ended meanwhile
                    continue
                used = now - self._seen.get(ident, now)
                self._seen[ident] = now
                if used > 0:
                    self.cpu += used
                    self.layers[_layer(frame)] += used
                    self.askers[_asker(frame)] += used

    def stop(self) -> None:
        self._done.set()
        self.join()


def run_job(platform: LocalPlatform, headers: dict[str, str], body: dict) -> float:
    started = time.perf_counter()
    accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=30)
    accepted.raise_for_status()
    job_id = accepted.json()["job_id"]

    def done() -> bool | None:
        job = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
        if job["status"] in ("failed", "cancelled", "expired"):
            raise RuntimeError(f"job {job_id} ended {job['status']}")
        return True if job["status"] == "completed" else None

    wait_until(done, timeout=300, interval=0.05, what=job_id)
    return time.perf_counter() - started


def _table(title: str, counts: Counter[str], total: float, jobs: int) -> None:
    print(f"{title:<56} {'CPU s/job':>9} {'share':>6}")
    for name, seconds in counts.most_common():
        print(f"{name:<56} {seconds / jobs:>9.2f} {100 * seconds / total:>5.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=5, help="jobs measured, after one warm-up job")
    parser.add_argument("--documents", type=int, default=10)
    parser.add_argument("--hz", type=float, default=200.0, help="samples a second")
    args = parser.parse_args()
    if not hasattr(time, "pthread_getcpuclockid"):
        sys.exit("this benchmark needs per-thread CPU clocks (Linux)")
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(machine())
    platform = LocalPlatform.start(ROOT)
    try:
        headers = platform.auth_header(platform.keys[0].tenant)
        body = request_of(args.documents)
        run_job(platform, headers, body)  # warm-up: first imports, first model builds, clients
        sampler = Sampler(args.hz)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        sampler.start()
        walls = [run_job(platform, headers, body) for _ in range(args.jobs)]
        sampler.stop()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        platform.stop()
    print(
        f"{args.jobs} jobs of {args.documents} inline documents, one after the other: submit → completed median "
        f"{statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}); the process used "
        f"{cpu / args.jobs:.2f} s of CPU per job ({100 * cpu / wall:.0f}% of one core over the run)"
    )
    print(
        f"sampled {sampler.cpu / args.jobs:.2f} s of CPU per job at {args.hz:.0f} Hz (the rest: this sampler, and "
        "threads that ended between two samples)\n"
    )
    _table("layer (innermost frame of a known layer)", sampler.layers, sampler.cpu, args.jobs)
    print()
    _table("whose work", sampler.askers, sampler.cpu, args.jobs)


if __name__ == "__main__":
    main()
