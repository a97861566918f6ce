"""Benchmark: a job you can watch — its ETA at 25% progress, and its provisional result vs its completion.

    .venv/bin/python bench/live_job.py [--documents 10] [--warm 4] [--trials 3]

On the local runtime: `--warm` jobs of one shape (`--documents` inline contracts, `bench/cost.py`'s request) fill
the workflow's history; then each trial job of the same shape is watched (its view read every ~20 ms) and, at the
read nearest 25% of its submit-to-completed time, its ETA is compared with the time it actually had left: the ETA
the job view gives now (`progress.eta_seconds`, from history) and the one the old formula gave (the job's elapsed
time divided by the current fan-out's fraction of items, `elapsed / done * (total - done)`, only inside a fan-out).
Then, per SLA class: when the provisional result (the draft before citation verification) became readable, and
when the job completed. Routes may be chosen per class (`LONGHAUL_CLASS_ROUTES`), but this benchmark configures
none: an `interactive` job's draft goes through the same route as a `standard` one's (the local platform's one offline
model; its retrieval is shallower, `retrieval.DEPTHS`); the figure is printed for both classes as they are.
Asserts nothing; the machine's cores and load are printed with the figures.
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "bench"))

from cost import request_of  # noqa: E402

from local.platform import LocalPlatform  # noqa: E402

TERMINAL = ("completed", "failed", "cancelled", "expired")


def _load() -> str:
    return f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}"


def watch(platform: LocalPlatform, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """Submit and read the job's view until it ends: every read with its time since submission."""
    started = time.perf_counter()
    accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=30).json()
    job_id = accepted["job_id"]
    reads: list[tuple[float, dict[str, Any], datetime]] = []
    while True:
        view = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()
        reads.append((time.perf_counter() - started, view, datetime.now(UTC)))
        if view["status"] in TERMINAL:
            break
        time.sleep(0.02)
    return {"accepted": accepted, "reads": reads, "took": reads[-1][0], "status": reads[-1][1]["status"]}


def old_eta(view: dict[str, Any], at: datetime) -> float | None:
    """The formula the job view used to give: elapsed / done * (total - done), inside a fan-out only."""
    progress, started = view["progress"], view.get("started_at")
    done, total = progress["completed"], progress["total"]
    if view["status"] not in ("running", "retrying") or not started or not 0 < done < total:
        return None
    elapsed = (at - datetime.fromisoformat(started)).total_seconds()
    return elapsed / done * (total - done)


def eta_errors(run: dict[str, Any]) -> tuple[float | None, float | None, str | None]:
    """At the read nearest 25% of the job's time: (new ETA's error, old formula's error) as fractions of the time it
    actually had left, and the new one's basis."""
    took = run["took"]
    moment, view, at = min(run["reads"], key=lambda read: abs(read[0] - 0.25 * took))
    left = took - moment

    def error(estimate: float | None) -> float | None:
        return None if estimate is None or left <= 0 else (estimate - left) / left

    finish = view["progress"].get("estimated_finish_at")  # `eta_seconds` is whole seconds: too coarse for 1 s jobs
    new = (datetime.fromisoformat(finish) - at).total_seconds() if finish else None
    return error(new), error(old_eta(view, at)), view["progress"].get("eta_basis")


def provisional_at(run: dict[str, Any]) -> float | None:
    return next((moment for moment, view, _ in run["reads"] if view.get("provisional")), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=10)
    parser.add_argument("--warm", type=int, default=4)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    body = request_of(args.documents)
    try:
        print(f"machine: {_load()}; {args.documents}-document jobs, {args.warm} to fill the history")
        first = watch(platform, headers, body)
        new0, old0, basis0 = eta_errors(first)
        for _ in range(args.warm - 1):
            watch(platform, headers, body)
        trials = [watch(platform, headers, body) for _ in range(args.trials)]
        assert all(t["status"] == "completed" for t in [first, *trials]), [t["status"] for t in trials]

        def pct(value: float | None) -> str:
            return "   n/a" if value is None else f"{value * 100:+6.0f}%"

        print("ETA error at 25% of the job's time (estimate - actual time left) / actual time left:")
        print(f"  job 1 (no history, basis {basis0}): now {pct(new0)}   old formula {pct(old0)}")
        for n, trial in enumerate(trials, start=args.warm + 1):
            new, old, basis = eta_errors(trial)
            sla = trial["accepted"]["estimated_sla_seconds"]
            print(
                f"  job {n} (basis {basis}): now {pct(new)}   old formula {pct(old)}   "
                f"submission's estimated_sla_seconds {sla} s vs took {trial['took']:.2f} s"
            )
        news = [abs(e) for e in (eta_errors(t)[0] for t in trials) if e is not None]
        olds = [abs(e) for e in (eta_errors(t)[1] for t in trials) if e is not None]
        print(
            f"  median |error| over jobs {args.warm + 1}..{args.warm + args.trials}: "
            f"now {statistics.median(news) * 100 if news else float('nan'):.0f}%, "
            f"old formula {statistics.median(olds) * 100 if olds else float('nan'):.0f}% "
            f"({len(olds)} of {len(trials)} reads inside a fan-out)"
        )
        print("provisional result (the draft, before verification) vs completion, per SLA class:")
        for sla_class in ("standard", "interactive"):
            runs = [watch(platform, headers, {**body, "sla_class": sla_class}) for _ in range(args.trials)]
            drafts = [p for p in (provisional_at(r) for r in runs) if p is not None]
            done = [r["took"] for r in runs]
            draft = statistics.median(drafts) if drafts else float("nan")
            finished = statistics.median(done)
            print(
                f"  {sla_class:<11} provisional at {draft:.2f} s, completed at {finished:.2f} s "
                f"({(1 - draft / finished) * 100:.0f}% earlier; {len(drafts)} of {len(runs)} seen)"
            )
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
