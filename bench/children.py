"""Benchmark: what a child job costs over running it alone, on the local runtime.

    .venv/bin/python bench/children.py [--vendors 3] [--runs 3]

Runs, `--runs` times each: (A) an invoice reconciliation alone (its child step skipped: not asked for), (B) a
dispute-resolution job of that reconciliation alone, (C) the same reconciliation asked to resolve its disputes, which
starts the dispute as its child job and waits for it. Each review is approved as soon as it opens (polled every
50 ms). Prints per case the state transitions (the job's own execution, counted once it ended; C: parent + child) and
the seconds from submission to completion (p50), then the child's overhead: C − (A + B), in transitions and seconds.
The target (issue 47): at most 2 transitions and 1 s. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from disputes import CONTRACT, TERMINAL, Api, invoice  # noqa: E402

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

CONTACT = "ap@vendors.example"


def counted(api: Api, job_id: str) -> dict[str, Any]:
    """The finished job once its transitions are counted."""
    return wait_until(
        lambda: job if (job := api.get(f"/v1/jobs/{job_id}"))["cost"]["orchestration"]["transitions"] else None,
        timeout=120,
        interval=0.1,
        what=f"the transitions of {job_id}",
    )


def approve_when_asked(api: Api, reviewer: Api, job_id: str) -> float:
    """Approve the job's review as soon as it opens; the seconds it waited for the decision after opening."""
    waiting = api.until(job_id, "waiting_for_review", *TERMINAL)
    assert waiting["status"] == "waiting_for_review", waiting
    asked = time.perf_counter()
    reviewer.post(f"/v1/reviews/{waiting['review']['review_id']}/decision", {"decision": "approve"})
    return time.perf_counter() - asked


def reconciliation(invoices: list[dict[str, Any]], *, resolve: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"contract": {"name": "prices.txt", "text": CONTRACT}, "invoices": invoices}
    if resolve:
        body["resolve_disputes"] = {"default_contact": CONTACT}
    return {"workflow": "invoice-reconciliation", "input": body}


def alone(alpha: Api, reviewer: Api, invoices: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(A) and (B): the reconciliation, then its dispute, each timed from submission to completion."""
    started = time.perf_counter()
    recon = alpha.post("/v1/jobs", reconciliation(invoices, resolve=False))["job_id"]
    assert alpha.until(recon, *TERMINAL)["status"] == "completed"
    a = {"seconds": time.perf_counter() - started, "job": recon}
    started = time.perf_counter()
    body = {"workflow": "dispute-resolution", "input": {"reconciliation_job_id": recon, "default_contact": CONTACT}}
    dispute = alpha.post("/v1/jobs", body)["job_id"]
    approve_when_asked(alpha, reviewer, dispute)
    assert alpha.until(dispute, *TERMINAL)["status"] == "completed"
    b = {"seconds": time.perf_counter() - started, "job": dispute}
    return a, b


def with_child(alpha: Api, reviewer: Api, invoices: list[dict[str, Any]]) -> dict[str, Any]:
    """(C): the reconciliation that disputes in a child, timed from submission to the parent's completion."""
    started = time.perf_counter()
    parent = alpha.post("/v1/jobs", reconciliation(invoices, resolve=True))["job_id"]
    child = wait_until(
        lambda: (job["children"] or [None])[0] if (job := alpha.get(f"/v1/jobs/{parent}")) else None,
        timeout=300,
        interval=0.05,
        what="the child job",
    )["job_id"]
    approve_when_asked(alpha, reviewer, child)
    assert alpha.until(parent, *TERMINAL)["status"] == "completed"
    return {"seconds": time.perf_counter() - started, "job": parent, "child": child}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vendors", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT, time_scale=0.1)
    print(f"machine: {os.cpu_count()} cores, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        alpha, reviewer = Api(platform, "alpha"), Api(platform, "alpha-reviewer")
        invoices = [{"name": f"v{v:03d}.txt", "text": invoice(v, wrong=True)} for v in range(args.vendors)]
        invoices.append({"name": "clean.txt", "text": invoice(999, wrong=False)})
        a_runs, b_runs, c_runs = [], [], []
        for _ in range(args.runs):
            a, b = alone(alpha, reviewer, invoices)
            a_runs.append(a)
            b_runs.append(b)
            c_runs.append(with_child(alpha, reviewer, invoices))
        moves = {
            "A": counted(alpha, a_runs[0]["job"])["cost"]["orchestration"]["transitions"],
            "B": counted(alpha, b_runs[0]["job"])["cost"]["orchestration"]["transitions"],
            "C parent": counted(alpha, c_runs[0]["job"])["cost"]["orchestration"]["transitions"],
            "C child": counted(alpha, c_runs[0]["child"])["cost"]["orchestration"]["transitions"],
        }
        seconds = {k: statistics.median(r["seconds"] for r in runs) for k, runs in (("A", a_runs), ("B", b_runs),
                                                                                    ("C", c_runs))}  # fmt: skip
        print(f"child job overhead: {args.vendors} vendors with discrepancies (+1 clean), {args.runs} runs, "
              "time scale 0.1, reviews approved as they open")  # fmt: skip
        print(f"  (A) reconciliation alone (child step skipped) {moves['A']:4d} transitions  p50 {seconds['A']:6.2f}s")
        print(f"  (B) dispute-resolution alone                  {moves['B']:4d} transitions  p50 {seconds['B']:6.2f}s")
        c_moves = moves["C parent"] + moves["C child"]
        print(f"  (C) reconciliation with its dispute as child  {c_moves:4d} transitions  p50 {seconds['C']:6.2f}s"
              f"  (parent {moves['C parent']}, child {moves['C child']})")  # fmt: skip
        print(f"  child overhead C - (A + B): {c_moves - moves['A'] - moves['B']:+d} transitions, "
              f"{seconds['C'] - seconds['A'] - seconds['B']:+.2f}s   (target: <= 2 transitions, <= 1 s)")  # fmt: skip
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
