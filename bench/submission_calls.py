"""Benchmark: the AWS calls one `POST /v1/jobs` makes, for a submission that starts at once and one that queues.

    make bench            # or: .venv/bin/python bench/submission_calls.py

The platform runs in this process (`LocalPlatform`); a botocore hook on the functions' clients (the one that meters
steps, `longhaul.core.metering`) also notes each call made while this bench's own thread is serving a request, and
the request is served on this thread (the front door's `handle`, as its server thread would). Each tenant's first
submission warms the API function (its clients, its cache of keys and policies) and is not counted; tenant `alpha`
may run many jobs (its next submission starts), tenant `beta` one (its second waits, `queued`, behind its first).
On AWS each call is a network round trip too.

It also prints the CPU a queued submission costs the thread that serves it (`--cpu N`: N more of tenant `beta`'s
submissions, each timed with `time.thread_time`; default 100). The local platform runs on one interpreter core, so
one second divided by that figure bounds the submissions it accepts a second. It leaves out what many clients add
(the HTTP front door, the workflows running beside, the threads' contention for the interpreter, see
`bench/submissions.py`), and it moves with the machine's speed like any time, though less than a throughput does.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lambdas"))

from werkzeug.test import EnvironBuilder  # noqa: E402
from werkzeug.wrappers import Request  # noqa: E402

from local.platform import LocalPlatform  # noqa: E402
from longhaul.core import metering  # noqa: E402

TEXT = "The Supplier's aggregate liability is capped at the Fees paid in the twelve months before the claim."
KEYS = {"alpha": "lh_calls_alpha_6b1f0e2d9c8a7354", "beta": "lh_calls_beta_0a9e8d7c6b5f4132"}
POLICIES = {"alpha": {"jobs_in_flight": 50}, "beta": {"jobs_in_flight": 1}}

_noted = threading.local()


def _install_counter() -> None:
    """Note every call of the current thread while it counts (`counting`), then meter it as before."""
    metered = metering._on_call

    def on_call(params: Any, model: Any, context: Any = None, **kwargs: Any) -> None:
        calls: list[str] | None = getattr(_noted, "calls", None)
        if calls is not None and not (context or {}).get("is_presign_request"):
            calls.append(f"{model.service_model.service_name}:{model.name}")
        metered(params, model, context, **kwargs)

    metering._on_call = on_call  # before the platform creates its clients: `instrument` registers this one


@contextmanager
def counting() -> Iterator[list[str]]:
    calls: list[str] = []
    _noted.calls = calls
    try:
        yield calls
    finally:
        _noted.calls = None


def _submit(platform: LocalPlatform, tenant: str, n: int) -> dict[str, Any]:
    """A submission served on this thread by the platform's front door; the 202's body."""
    door = platform._servers.front_door if platform._servers else None
    assert door is not None, "the platform serves no API"
    body = {
        "workflow": "document-analysis",
        "input": {
            "question": "What is the liability cap?",
            "documents": [{"name": f"contract-{n}.txt", "media_type": "text/plain", "text": TEXT}],
        },
    }
    builder = EnvironBuilder(
        path="/v1/jobs",
        method="POST",
        base_url=platform.api_url,
        data=json.dumps(body),
        headers={"Authorization": f"Bearer {KEYS[tenant]}", "Content-Type": "application/json"},
    )
    response = door.handle(Request(builder.get_environ()))
    answer: dict[str, Any] = json.loads(response.get_data())
    if response.status_code != 202:
        raise RuntimeError(f"submission refused: {response.status_code} {answer}")
    return answer


def measure(cpu_samples: int = 0) -> tuple[dict[str, list[str]], list[float]]:
    """The calls of a warm submission that starts (`starts`) and of one that queues (`queues`), on a platform of
    its own in this process; and the thread CPU (ms) of each of `cpu_samples` more queued submissions."""
    _install_counter()
    platform = LocalPlatform.start(ROOT, keys=KEYS, env_overrides={"LONGHAUL_TENANT_POLICIES": json.dumps(POLICIES)})
    try:
        _submit(platform, "alpha", 0)  # warm: clients, the key and the policy
        with counting() as starts:
            started = _submit(platform, "alpha", 1)
        _submit(platform, "beta", 2)  # warm, and beta's one job in flight
        with counting() as queues:
            queued = _submit(platform, "beta", 3)
        if started["status"] != "queued" or started["estimated_start_seconds"] != 0:
            raise RuntimeError(f"the first measured submission did not start at once: {started}")
        if queued["estimated_start_seconds"] == 0:
            raise RuntimeError(f"the second measured submission did not queue: {queued}")
        return {"starts": starts, "queues": queues}, [_thread_cpu_ms(platform, 4 + n) for n in range(cpu_samples)]
    finally:
        platform.stop()


def _thread_cpu_ms(platform: LocalPlatform, n: int) -> float:
    began = time.thread_time()
    if _submit(platform, "beta", n)["estimated_start_seconds"] == 0:
        raise RuntimeError("a timed submission did not queue")
    return (time.thread_time() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=100, help="queued submissions to time (0: none)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    calls, cpu = measure(cpu_samples=args.cpu)
    print("AWS calls of one warm POST /v1/jobs (each a round trip on AWS)")
    for kind, made in calls.items():
        print(f"{kind:>7}: {len(made):>2}  {', '.join(made)}")
    if cpu:
        cpu.sort()
        median = statistics.median(cpu)
        print(
            f"thread CPU of a queued submission ({len(cpu)}): median {median:.1f} ms, "
            f"p90 {cpu[int(0.9 * (len(cpu) - 1))]:.1f} ms; one core's worth: {1000 / median:.0f} a second"
        )


if __name__ == "__main__":
    main()
