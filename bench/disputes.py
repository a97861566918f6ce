"""Benchmark: a dispute-resolution job on the local runtime: the agents' turns, tool calls and model tokens, the time
each phase takes (drafting until the review, sending after the approval), the state transitions and what the job
cost, and the time a cancelled job's saga takes to retract what was sent.

    .venv/bin/python bench/disputes.py [--vendors 3] [--runs 3]

Prints figures; asserts nothing. The reconciliation disputed is generated (`--vendors` vendors with one invoice of
three lines each, one of them wrong, and one clean vendor); the offline model plays the workflow's scripted policy,
so the figures are the platform's overhead per turn, not a model's latency.
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

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

CONTRACT = "PRICE AGREEMENT\nCurrency: USD\n\nProduct Code   Description      Agreed Unit Price\n" + "".join(
    f"BX-{n:03d}         Item {n:03d}                    {10 + n}.00\n" for n in range(1, 10)
)
TERMINAL = ("completed", "failed", "cancelled", "expired")


def invoice(vendor: int, *, wrong: bool) -> str:
    lines = [(1, 2, 11.0), (2, 3, 12.0), (3, 1, 13.0)]
    if wrong:
        lines[1] = (2, 3, 12.5)  # a price above the agreed one
    rows = "".join(f"BX-{c:03d}   Item {c:03d}   {q}   {p:.2f}   {q * p:.2f}\n" for c, q, p in lines)
    total = sum(q * p for _, q, p in lines)
    return (
        f"Supplier: Vendor {vendor:03d} Ltd\nInvoice No: V{vendor:03d}-1\nCurrency: USD\n\n"
        f"Code     Description   Qty   Unit Price   Amount\n{rows}\nSubtotal   {total:.2f}\nTotal   {total:.2f}\n"
    )


class Api:
    def __init__(self, platform: LocalPlatform, name: str) -> None:
        self.base, self.headers = platform.api_url, platform.auth_header(name)

    def get(self, path: str) -> Any:
        return requests.get(f"{self.base}{path}", headers=self.headers, timeout=30).json()

    def post(self, path: str, body: Any) -> Any:
        response = requests.post(f"{self.base}{path}", json=body, headers=self.headers, timeout=30)
        response.raise_for_status()
        return response.json()

    def until(self, job_id: str, *statuses: str) -> dict[str, Any]:
        return wait_until(
            lambda: job if (job := self.get(f"/v1/jobs/{job_id}"))["status"] in statuses else None,
            timeout=600,
            interval=0.05,
            what=f"{job_id} {statuses}",
        )

    def events(self, job_id: str) -> list[dict[str, Any]]:
        found, cursor = [], ""
        while True:
            page = self.get(f"/v1/jobs/{job_id}/events?limit=200" + (f"&cursor={cursor}" if cursor else ""))
            found += page["events"]
            cursor = page["next_cursor"]
            if not cursor:
                return found


def dispute(alpha: Api, reviewer: Api, reconciliation: str, *, cancel: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    body = {"workflow": "dispute-resolution", "input": {"reconciliation_job_id": reconciliation,
                                                          "default_contact": "ap@vendors.example"}}  # fmt: skip
    job_id = alpha.post("/v1/jobs", body)["job_id"]
    waiting = alpha.until(job_id, "waiting_for_review", *TERMINAL)
    drafted = time.perf_counter() - started
    approved_at = time.perf_counter()
    reviewer.post(f"/v1/reviews/{waiting['review']['review_id']}/decision", {"decision": "approve"})
    if cancel:  # as soon as the notices went out
        wait_until(
            lambda: True if any(e["type"] == "effect_done" for e in alpha.events(job_id)) else None,
            timeout=300,
            interval=0.05,
        )
        cancelled_at = time.perf_counter()
        alpha.post(f"/v1/jobs/{job_id}/cancel", {})
        job = wait_until(
            lambda: j if ((j := alpha.get(f"/v1/jobs/{job_id}")).get("compensation") or {}).get("status")
            in ("finished", "incomplete") else None,
            timeout=300,
            interval=0.05,
        )  # fmt: skip
        return {"job": job, "saga_s": time.perf_counter() - cancelled_at, "undone": len(job["compensation"]["undone"])}
    job = alpha.until(job_id, *TERMINAL)
    sent = time.perf_counter() - approved_at
    events = alpha.events(job_id)
    turns = [e for e in events if e["type"] == "agent_turn"]
    started_at = {(e["step"], e.get("item")): e["at"] for e in events if e["type"] == "step_started"}
    durations = [e["detail"]["duration_ms"] for e in events if e["type"] == "step_finished" and
                 (e["step"], e.get("item")) in started_at and e.get("item") is not None]  # fmt: skip
    return {
        "job": job,
        "drafted_s": drafted,
        "sent_s": sent,
        "turns": {s: sum(1 for t in turns if t["step"] == s) for s in ("draft_notices", "send_notices")},
        "tool_calls": sum(t["detail"]["tool_calls"] for t in turns),
        "tokens": sum(t["detail"]["tokens"]["input"] + t["detail"]["tokens"]["output"] for t in turns),
        "turn_ms": statistics.median(durations) if durations else 0,
    }


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
        recon = alpha.post(
            "/v1/jobs",
            {"workflow": "invoice-reconciliation",
             "input": {"contract": {"name": "prices.txt", "text": CONTRACT}, "invoices": invoices}},
        )["job_id"]  # fmt: skip
        assert alpha.until(recon, *TERMINAL)["status"] == "completed"
        runs = [dispute(alpha, reviewer, recon) for _ in range(args.runs)]
        assert all(r["job"]["status"] == "completed" for r in runs), [r["job"]["error"] for r in runs]
        first = runs[0]
        cost = first["job"]["cost"]
        print(f"dispute of {args.vendors} vendors with discrepancies (+1 clean), {args.runs} runs, time scale 0.1")
        print(f"  drafting until review  p50 {statistics.median(r['drafted_s'] for r in runs):6.2f}s")
        print(f"  sending after approval p50 {statistics.median(r['sent_s'] for r in runs):6.2f}s")
        print(f"  turns {first['turns']}, tool calls {first['tool_calls']}, model tokens {first['tokens']}")
        print(f"  a turn's invocation p50 {statistics.median(r['turn_ms'] for r in runs):.0f} ms")
        print(f"  transitions {cost['orchestration']['transitions']}, job cost {cost['total']} USD "
              f"(orchestration {cost['orchestration']['usd']}, model {cost['model']['usd']})")  # fmt: skip
        saga = dispute(alpha, reviewer, recon, cancel=True)
        print(f"  cancel after the sends: {saga['undone']} effects undone in {saga['saga_s']:.2f}s")
    finally:
        platform.stop()


if __name__ == "__main__":
    main()
