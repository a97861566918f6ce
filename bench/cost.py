"""Benchmark: what a document-analysis job costs on AWS at 10, 100 and 1,000 documents, from the local runtime.

    make bench            # or: .venv/bin/python bench/cost.py --documents 10,100,1000
    .venv/bin/python bench/cost.py --sample --markdown   # the sample job's cost as the README shows it
    .venv/bin/python bench/cost.py --sla batch           # model dollars by lane: a batch-class job vs on demand

Runs one job per size with small inline documents, reads each job's cost from its status (the transitions of its
execution history, the Lambda time and AWS requests its steps recorded, the model tokens of its budget ledger) and
prints per size: state transitions (and per document), the parent execution's history events (a Standard execution
may hold 25,000), Lambda GB-seconds, requests, orchestration and model dollars per job, and per 1,000 jobs.

Model dollars are the offline model's token counts priced as the Bedrock model the stack deploys by default (read
from `app.py`): the offline model costs nothing, but its token counts are what a real one would roughly be billed.
A size the platform refuses (its document limit) is skipped with the problem it answered. `--sample --markdown`
runs `samples/request.json` instead and prints its `cost` as a JSON block with the machine it was measured on
(`make figures` pastes it into the README). Prints figures; asserts nothing.

`--sla batch` or `--sla interactive` prints the model dollars of a job of that class per job and per 1,000 jobs by
lane (`on_demand`, `batch`: each model call's tokens, from its `model_called` event, at its lane's price), next to
today's all-on-demand figure (the same tokens at the on-demand price) and the same job run with
`"model_lane": "on_demand"`. Each job retrieves at its class's depth (a batch-class job: two passages a document, up
to 400, two an evidence item, so a few hundred documents reach Bedrock's minimum of 100 records per batch), unless
`--passages N` sets N passages, one an item.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lambdas"))

from machine import machine  # noqa: E402
from steps import StepFigures, baselines  # noqa: E402

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from longhaul.core.budgets import PRICES, cost_micro, price_of  # noqa: E402
from longhaul.core.pricing import AWS_PRICES  # noqa: E402

HISTORY_LIMIT = 25_000  # events in one Standard execution's history
TERMINAL = {"completed", "failed", "cancelled", "expired"}


def bedrock_model() -> str:
    """The Bedrock model `app.py` deploys by default (read, not imported: importing it synthesizes)."""
    found = re.search(r'^DEFAULT_BEDROCK_MODEL = "([^"]+)"', (ROOT / "app.py").read_text(), re.MULTILINE)
    return found.group(1) if found else "anthropic.claude-sonnet-4-20250514-v1:0"


def request_of(documents: int) -> dict[str, Any]:
    """A job over `documents` small contracts, each with a liability cap and a notice period to find."""
    docs = [
        {
            "name": f"contract_{i:04d}.txt",
            "media_type": "text/plain",
            "text": f"Supply agreement {i} between Northwind Analytics Ltd and customer {i}.\n\n"
            f"Liability. The Supplier's aggregate liability is capped at {1000 + i * 10} GBP per year.\n\n"
            f"Termination. Either party may terminate on {30 + i % 60} days' written notice.\n",
        }
        for i in range(documents)
    ]
    return {
        "workflow": "document-analysis",
        "input": {"question": "What are the liability caps and the termination notice periods?", "documents": docs},
    }


def run(
    platform: LocalPlatform, headers: dict[str, str], documents: int, body: dict[str, Any] | None = None
) -> dict[str, Any] | str:
    """The job's status once its transitions are counted, or why the platform refused the size."""
    body = body or request_of(documents)
    accepted = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=60)
    if accepted.status_code != 202:
        problem = accepted.json() if accepted.headers.get("content-type", "").endswith("json") else {}
        errors = "; ".join(str(e.get("msg")) for e in problem.get("errors") or [])
        detail = errors or problem.get("detail") or problem.get("title") or accepted.text[:200]
        return f"refused it: {accepted.status_code} {detail}"
    job_id = accepted.json()["job_id"]

    def counted() -> dict[str, Any] | None:
        job: dict[str, Any] = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=60).json()
        if job["status"] not in TERMINAL:
            return None
        return job if job["cost"]["orchestration"]["transitions"] is not None else None

    return wait_until(counted, timeout=120 + documents * 3, interval=0.5, what=f"{job_id} to finish and be counted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", default="10,100,1000", help="comma-separated document counts")
    parser.add_argument("--sample", action="store_true", help="run samples/request.json instead")
    parser.add_argument("--markdown", action="store_true", help="with --sample: the README's cost block")
    parser.add_argument("--sla", choices=["batch", "interactive"], help="model dollars by lane for this SLA class")
    parser.add_argument("--passages", type=int, help="with --sla: passages retrieved, one an item (default: by class)")
    parser.add_argument(
        "--no-steps", action="store_true", help="skip the per-step table of the largest size (and its memory pass)"
    )
    args = parser.parse_args()
    if args.sample:
        sample(markdown=args.markdown)
        return
    sizes = [int(n) for n in args.documents.split(",") if n.strip()]
    if args.sla:
        by_lane(sizes, args.sla, passages=args.passages)
        return
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    model = bedrock_model()
    price = price_of(model, PRICES)
    print(
        f"cost per job, {AWS_PRICES.region} list prices as of {AWS_PRICES.as_of}; model tokens of the offline model "
        f"priced as {model} (${price.input}/${price.output} per million input/output tokens)"
    )
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    header = (
        f"{'docs':>5} {'status':>9} {'transitions':>11} {'per doc':>8} {'history':>8} {'GB-s':>8} "
        f"{'DDB req':>8} {'S3 req':>7} {'SQS':>4} {'orch $/job':>11} {'model $/job':>12} {'$/1,000 jobs':>13} {'s':>6}"
    )
    print(header)
    # Lambda time is the local runtime's (in-process, sharing the machine's cores with the in-memory AWS): an upper
    # bound of what the same steps take on AWS.
    by_size: dict[int, StepFigures] = {}
    try:
        for documents in sizes:
            started = time.perf_counter()
            with StepFigures().installed() as figures:
                job = run(platform, headers, documents)
            by_size[documents] = figures
            if isinstance(job, str):
                print(f"{documents:>5} skipped: the platform {job}")
                continue
            cost = job["cost"]
            orchestration, usage = cost["orchestration"], cost["orchestration"]["requests"]
            tokens = cost["model"]
            cached = {k: tokens.get(k, 0) for k in ("cache_read_tokens", "cache_write_tokens")}  # at their prices
            model_usd = Decimal(cost_micro(tokens["input_tokens"], tokens["output_tokens"], price, **cached))
            model_usd /= 1_000_000
            per_thousand = (Decimal(orchestration["usd"]) + model_usd) * 1000
            history = orchestration["history_events"]
            print(
                f"{documents:>5} {job['status']:>9} {orchestration['transitions']:>11} "
                f"{orchestration['transitions'] / documents:>8.1f} {history:>8} "
                f"{orchestration['lambda_gb_seconds']:>8.2f} {usage['dynamodb']:>8} {usage['s3']:>7} "
                f"{usage['sqs']:>4} {orchestration['usd']:>11} {model_usd:>12.6f} {per_thousand:>13.2f} "
                f"{time.perf_counter() - started:>6.1f}"
            )
            if history > HISTORY_LIMIT * 0.8:
                print(f"      the parent history holds {history} events: {history / HISTORY_LIMIT:.0%} of the limit")
            print_s3_per_document(usage, documents)
        if not args.no_steps and by_size:
            print_steps(platform, headers, max(by_size), by_size[max(by_size)])
    finally:
        platform.stop()


def _events(platform: LocalPlatform, headers: dict[str, str], job_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = requests.get(
            f"{platform.api_url}/v1/jobs/{job_id}/events",
            headers=headers,
            params={"cursor": cursor} if cursor else {},
            timeout=60,
        ).json()
        events.extend(page["events"])
        cursor = page["next_cursor"]
        if not cursor:
            return events


def _lane_usd(platform: LocalPlatform, headers: dict[str, str], job_id: str, model: str) -> dict[str, Decimal]:
    """The job's model dollars by lane (each call at its lane's price) and all on demand (`all_on_demand`)."""
    on_demand = price_of(model, PRICES)
    usd = {"on_demand": Decimal(0), "batch": Decimal(0), "all_on_demand": Decimal(0)}
    for event in _events(platform, headers, job_id):
        if event["type"] != "model_called":
            continue
        detail = event["detail"]
        lane = detail.get("lane", "on_demand")
        tokens = (int(detail["input_tokens"]), int(detail["output_tokens"]))
        usd[lane] += Decimal(cost_micro(*tokens, on_demand.in_lane(lane))) / 1_000_000
        usd["all_on_demand"] += Decimal(cost_micro(*tokens, on_demand)) / 1_000_000
    return usd


LANES = ("auto", "on_demand")  # the class's own lane, and the same job all on demand


def by_lane(sizes: list[int], sla: str, *, passages: int | None) -> None:
    """Model dollars of a job of class `sla` by lane, against the same tokens all on demand."""
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    model = bedrock_model()
    price = price_of(model, PRICES)
    print(
        f"model cost of a {sla}-class job by lane; tokens of the offline model priced as {model} "
        f"(${price.input}/${price.output} per million input/output tokens on demand, x{price.batch} in batch); "
        f"measured on {machine()}"
    )
    platform = LocalPlatform.start(ROOT)
    headers = platform.auth_header(platform.keys[0].tenant)
    print(
        f"{'docs':>5} {'records':>7} {'on_demand $':>12} {'batch $':>10} {'job $':>10} {'all on demand $':>16} "
        f"{'share':>6} {'$/1,000 jobs':>13} {'on demand $/1,000':>18} {'same answer':>12}"
    )
    try:
        for documents in sizes:
            body: dict[str, Any] = {**request_of(documents), "sla_class": sla}
            if passages is not None:
                body["input"] = {**body["input"], "max_passages": passages, "passages_per_group": 1}
            jobs = {lane: run(platform, headers, documents, {**body, "model_lane": lane}) for lane in LANES}
            if any(isinstance(job, str) for job in jobs.values()):
                print(f"{documents:>5} skipped: the platform {next(j for j in jobs.values() if isinstance(j, str))}")
                continue
            ids = {lane: str(job["job_id"]) for lane, job in jobs.items() if not isinstance(job, str)}
            usd = _lane_usd(platform, headers, ids["auto"], model)
            baseline = _lane_usd(platform, headers, ids["on_demand"], model)["all_on_demand"]
            submitted = [e for e in _events(platform, headers, ids["auto"]) if e["type"] == "model_batch_submitted"]
            records = sum(int(e["detail"]["records"]) for e in submitted)
            results = [
                requests.get(f"{platform.api_url}/v1/jobs/{ids[lane]}/result", headers=headers, timeout=60).json()
                for lane in ("auto", "on_demand")
            ]
            same = results[0].get("answer") == results[1].get("answer")
            total = usd["on_demand"] + usd["batch"]
            share = total / baseline if baseline else Decimal(0)
            print(
                f"{documents:>5} {records:>7} {usd['on_demand']:>12.6f} {usd['batch']:>10.6f} {total:>10.6f} "
                f"{baseline:>16.6f} {share:>6.0%} {total * 1000:>13.2f} {baseline * 1000:>18.2f} {same!s:>12}"
            )
    finally:
        platform.stop()


def print_s3_per_document(usage: dict[str, Any], documents: int) -> None:
    """The line under a size's row: its S3 requests per document (all of the job's, `requests.s3`)."""
    print(f"{'':>5} S3 requests per document: {usage['s3'] / documents:.2f}")


def print_steps(platform: LocalPlatform, headers: dict[str, str], documents: int, figures: StepFigures) -> None:
    """Per step of the largest size's job: its invocations and S3 requests (from the cost run), and its memory,
    configured and used (from one more job of that size, measured: `bench/steps.py`)."""
    with StepFigures().installed() as measured, measured.measuring_memory():
        job = run(platform, headers, documents)
    for name, figure in figures.steps.items():
        if name in measured.steps:
            figure.peak_mb = measured.steps[name].peak_mb
    status = job if isinstance(job, str) else job["status"]
    print(
        f"per step of the {documents}-document job (S3 requests of the cost run; memory of one more job, measured: "
        f"{status}); MB used = the handler's imports and clients in a fresh interpreter + the invocation's peak "
        f"allocations"
    )
    for line in figures.table(documents, baselines=baselines(figures)):
        print(line)


def sample(*, markdown: bool) -> None:
    """The sample job's cost, once its executions have ended (as `GET /v1/jobs/{id}` shows it)."""
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    platform = LocalPlatform.start(ROOT)
    try:
        body = json.loads((ROOT / "samples" / "request.json").read_text())
        job = run(platform, platform.auth_header(platform.keys[0].tenant), 2, body)
    finally:
        platform.stop()
    if isinstance(job, str):
        raise SystemExit(f"the sample job: the platform {job}")
    cost = json.dumps(job["cost"], indent=2)
    if not markdown:
        print(cost)
        return
    print(f"```json\n{cost}\n```\n")
    print(
        f"(`samples/request.json` on the local platform, {job['status']}: the offline model's notional price; Lambda "
        f"time measured in-process, an upper bound; measured on {machine()}.)"
    )


if __name__ == "__main__":
    main()
