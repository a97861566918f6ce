"""Benchmark: accepted submissions per second (`POST /v1/jobs` → 202) at 1, 8 and 50 concurrent clients, locally.

    make bench            # or: .venv/bin/python bench/submissions.py --requests 40,120,200 [--hold] [--markdown]

The platform runs as `python -m local` in a subprocess (the real HTTP front door on 127.0.0.1, in-memory AWS);
the clients are threads of this process, each with its own keep-alive HTTP session, each submitting small
document-analysis jobs (one inline text document) as fast as it gets answers. By default every accepted job also
starts its execution (up to the tenant policy's default jobs in flight), whose steps run in the platform process
at the same time as the submissions: the figures are what a user sees while the platform works, not an idle API.
After each phase the bench waits for that phase's jobs to finish (so the next phase starts on a quiet platform)
and prints how long they took.

With `--hold` the tenant may run one job at a time: the others are accepted `queued` and wait in the intake queue,
so the figures are the API's own path (authentication, checks, the input written, the job and its admission
recorded) with one workflow running beside it. Each phase's jobs are then cancelled instead of waited for.

Each phase also prints the platform process's CPU per accepted submission and the machine's steal (the share of
its CPU time the hypervisor gave to others): the platform is bound to one core by the interpreter lock, so its rate
is one core's worth of work divided by the CPU a submission costs it. On a shared machine both figures move with the
machine's speed from one run to the next; compare two versions of the code in alternating runs.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import requests
from machine import CpuMeter, machine

ROOT = Path(__file__).resolve().parents[1]
KEY = "lh_bench_alpha_3d9f1c7a5e2b8064"
TERMINAL = frozenset({"completed", "failed", "cancelled", "expired"})
TEXT = (
    "The Supplier's aggregate liability under this Agreement is capped at the Fees paid in the twelve months "
    "before the claim. Either party may terminate on 90 days' written notice. Service credits are the Customer's "
    "sole remedy for missed availability targets."
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_platform(port: int, *, hold: bool) -> subprocess.Popen[bytes]:
    # The bench measures throughput, not the tenant's rate limit: the submissions of a minute stay under it.
    policy = {"submissions_per_minute": 100_000, **({"jobs_in_flight": 1} if hold else {})}
    env = {
        **os.environ,
        "LONGHAUL_PORT": str(port),
        "LONGHAUL_MOTO_PORT": "0",
        "LONGHAUL_LOCAL_KEYS": f"alpha={KEY}",
        "LONGHAUL_TENANT_POLICIES": json.dumps({"alpha": policy}),
        "LONGHAUL_LOG_LEVEL": "WARNING",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300  # a first run synthesizes the stack
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"`python -m local` exited with {process.returncode}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).ok:
                return process
        except requests.RequestException:
            pass
        time.sleep(0.5)
    process.terminate()
    raise RuntimeError("the local platform did not answer within 300 s")


def stop_platform(platform: subprocess.Popen[bytes]) -> None:
    """Stop a platform `start_platform` started: asked first, killed after 30 s."""
    platform.terminate()
    try:
        platform.wait(timeout=30)
    except subprocess.TimeoutExpired:
        platform.kill()


def job_body(n: int) -> dict[str, Any]:
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "What are the liability caps and termination rights?",
            "documents": [{"name": f"contract-{n}.txt", "media_type": "text/plain", "text": TEXT}],
        },
    }


def burst(api: str, clients: int, total: int) -> dict[str, Any]:
    """`total` submissions spread over `clients` threads; returns latencies of the 202s, statuses, job ids."""
    headers = {"Authorization": f"Bearer {KEY}"}
    lock = threading.Lock()
    counter = iter(range(total))
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    job_ids: list[str] = []
    start = threading.Barrier(clients + 1)

    def client() -> None:
        session = requests.Session()  # keep-alive: one connection per client
        start.wait()
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            began = time.perf_counter()
            try:
                response = session.post(f"{api}/v1/jobs", json=job_body(n), headers=headers, timeout=60)
                status = str(response.status_code)
            except requests.RequestException as exc:
                response, status = None, type(exc).__name__
            elapsed = time.perf_counter() - began
            with lock:
                statuses[status] += 1
                if response is not None and response.status_code == 202:
                    latencies.append(elapsed)
                    job_ids.append(response.json()["job_id"])

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return {"wall": time.perf_counter() - began, "latencies": latencies, "statuses": statuses, "job_ids": job_ids}


def drain(api: str, job_ids: list[str], timeout: float) -> tuple[float, Counter[str]]:
    """Wait until every job is terminal (or `timeout`); returns the time waited and the final statuses."""
    headers = {"Authorization": f"Bearer {KEY}"}
    began = time.perf_counter()
    pending = list(job_ids)
    final: Counter[str] = Counter()
    session = requests.Session()
    while pending and time.perf_counter() - began < timeout:
        still = []
        for job_id in pending:
            status = session.get(f"{api}/v1/jobs/{job_id}", headers=headers, timeout=60).json().get("status")
            if status in TERMINAL:
                final[status] += 1
            else:
                still.append(job_id)
        pending = still
        if pending:
            time.sleep(0.5)
    if pending:
        final["unfinished"] = len(pending)
    return time.perf_counter() - began, final


def cancel(api: str, job_ids: list[str]) -> Counter[str]:
    """Cancel every job (a waiting job never starts); the answers' statuses."""
    headers = {"Authorization": f"Bearer {KEY}"}
    session = requests.Session()
    return Counter(
        str(session.post(f"{api}/v1/jobs/{job_id}/cancel", headers=headers, timeout=60).status_code)
        for job_id in job_ids
    )


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))] if ordered else float("nan")


def _per_request(meter: CpuMeter, accepted: int, *, unit: str = "ms") -> str:
    """The platform process's CPU per accepted submission (its jobs' steps and rounds included)."""
    if meter.cpu_seconds is None or not accepted:
        return "n/a"
    return f"{meter.cpu_seconds * 1000 / accepted:.1f}{unit}"


def _share(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction * 100:.0f}%"


def _load() -> str:
    """The machine's 1-minute load average: other processes share the cores, and the figures depend on it."""
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="1,8,50", help="client counts, one phase each")
    parser.add_argument("--requests", default="40,120,200", help="submissions per phase (same order)")
    parser.add_argument("--drain-timeout", type=float, default=300, help="seconds to wait for a phase's jobs")
    parser.add_argument("--no-drain", action="store_true", help="start each phase without waiting for the last")
    parser.add_argument("--hold", action="store_true", help="one job in flight: the others wait queued (API path)")
    parser.add_argument("--markdown", action="store_true", help="the table on stderr, the README's sentence on stdout")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # figures as they come, even when piped
    sentence_to = sys.stdout
    if args.markdown:
        sys.stdout = sys.stderr
    rates: list[tuple[int, float, float]] = []  # (clients, accepted/s, p99 of the 202 in ms)
    cpu_per_202 = "n/a"  # the last phase's
    counts = [int(c) for c in args.clients.split(",")]
    phases = list(zip(counts, (int(r) for r in args.requests.split(",")), strict=True))
    port = _free_port()
    print(f"cores: {os.cpu_count()}; load average {_load()}; platform: `python -m local` subprocess on port {port}")
    booted = time.perf_counter()
    platform = start_platform(port, hold=args.hold)
    api = f"http://127.0.0.1:{port}"
    print(f"platform ready in {time.perf_counter() - booted:.1f}s")
    if args.hold:
        print("one job in flight: the others are accepted queued (the API's own path); each phase's are cancelled")
    else:
        print("each accepted job starts its execution: its workflow runs in the platform during the submissions")
    print(
        f"{'clients':>7} {'requests':>8} {'accepted/s':>10} {'p50 202':>8} {'p99 202':>8} {'errors':>7} "
        f"{'CPU/202':>8} {'steal':>6}  drain"
    )
    meter = CpuMeter(platform.pid)
    try:
        burst(api, 1, 2)  # warm: imports, first clients, first execution
        for clients, total in phases:
            meter.start()
            result = burst(api, clients, total)
            meter.stop()
            latencies = result["latencies"]
            errors = {k: v for k, v in result["statuses"].items() if k != "202"}
            rates.append((clients, len(latencies) / result["wall"], _percentile(latencies, 0.99) * 1000))
            cpu_per_202 = _per_request(meter, len(latencies), unit=" ms")
            line = (
                f"{clients:>7} {total:>8} {len(latencies) / result['wall']:>10.1f} "
                f"{_percentile(latencies, 0.5) * 1000:>6.0f}ms {_percentile(latencies, 0.99) * 1000:>6.0f}ms "
                f"{sum(errors.values()):>7} {_per_request(meter, len(latencies)):>8} {_share(meter.steal):>6}"
            )
            if args.hold:
                cancelled = cancel(api, result["job_ids"])
                print(f"{line}  cancelled: {dict(cancelled)}" + (f"  {errors}" if errors else ""), flush=True)
                continue
            if args.no_drain:
                print(line + "  (not waited)" + (f"  {errors}" if errors else ""), flush=True)
                continue
            waited, final = drain(api, result["job_ids"], args.drain_timeout)
            done = ", ".join(f"{n} {status}" for status, n in sorted(final.items()))
            print(f"{line}  {waited:.1f}s after the burst: {done}; load {_load()}" + (f"  {errors}" if errors else ""))
        if args.markdown:
            counts_text = ", ".join(str(c) for c, _, _ in rates)
            per_second = ", ".join(f"{rate:.0f}" for _, rate, _ in rates)
            what = (
                "the tenant may run one job, so the others are accepted queued: the API's own path"
                if args.hold
                else "every accepted job runs its workflow in the same process meanwhile"
            )
            print(
                f"`.venv/bin/python bench/submissions.py{' --hold' if args.hold else ''}`: {per_second} accepted "
                f"submissions a second at {counts_text} keep-alive clients ({what}; the 202's p99 "
                f"{rates[-1][2]:.0f} ms at {rates[-1][0]} clients, the platform's CPU per accepted submission "
                f"{cpu_per_202}; measured on {machine()}).",
                file=sentence_to,
            )
    finally:
        stop_platform(platform)


if __name__ == "__main__":
    main()
