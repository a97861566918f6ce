"""Benchmark: a route's shared limit after a provider recovers, and what routing interactive jobs to a cheaper route
costs and scores.

    .venv/bin/python bench/route_limits.py                  # both parts
    .venv/bin/python bench/route_limits.py --part limits    # the limiter only (in-memory DynamoDB, ~30 s)
    .venv/bin/python bench/route_limits.py --part routes    # the class routes only (the local platform)

Part `limits`: 200 jobs have been waiting for a provider that was down; at t=0 it is back and every one of them calls
at once on a route limited to 60 requests a minute. Each job is a thread with its own limiter (as each function has
its own; they share the counters in one moto DynamoDB table), calling `RouteLimiter.acquire` as the gateway does;
a call that finds no room within the bounded wait (20 s) fails `rate-limited` and comes back after the Task's retry
backoff (the house policy of `rate-limited`: 5 s doubling, capped at 60 s, full jitter, eight retries), as the state
machine would retry its step; a step whose retries run out fails for good (counted). With
`--throttle N` the provider answers 429 to its first N calls after the recovery (each halves the route's allowance
for 60 s, at most once per 10-second slot). Time runs `--speed` times faster than the wall clock (slots and waits
alike), so three simulated minutes take about twenty seconds. Prints the provider calls in each calendar minute and
the most in any 60 seconds, against what the same 200 callers do without a limit (all at once).

Part `routes`: a 10-document interactive job (the `bench/cost.py` documents) on the local platform, with the offline
model standing in for Bedrock models (the offline model answers the same whatever model id it is given, and each call
is priced as the model id its route names): all on the default route (Claude Sonnet 4, Standard), then with
`LONGHAUL_CLASS_ROUTES` sending interactive jobs to a cheaper route (Claude 3.5 Haiku, Standard, and again at the
Priority tier). Next to each, the small eval set's document-analysis cases run as interactive jobs on the same
configuration: their scores. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import threading
import time
import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lambdas"))

from machine import machine  # noqa: E402

from longhaul.core import limits as limits_policy  # noqa: E402
from longhaul.core import schema  # noqa: E402
from longhaul.core.errors import RateLimitedError  # noqa: E402
from longhaul.storage.route_limits import RouteLimiter, RouteLimits  # noqa: E402

ROUTE = "recovering"


class ScaledClock:
    """Simulated time `speed` times faster than the wall clock, from a fixed start (a minute's beginning)."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.start = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
        self.began = time.monotonic()

    def seconds(self) -> float:
        return (time.monotonic() - self.began) * self.speed

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds())

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds) / self.speed)


class _Counted:
    """A table counting the limiter's requests (every conditional write, admitted or refused, and every read)."""

    def __init__(self, table: Any, counts: Counter[str], lock: threading.Lock) -> None:
        self.table, self.counts, self.lock = table, counts, lock

    def update_item(self, **kwargs: Any) -> Any:
        with self.lock:
            self.counts["update_item"] += 1
        return self.table.update_item(**kwargs)

    def get_item(self, **kwargs: Any) -> Any:
        with self.lock:
            self.counts["get_item"] += 1
        return self.table.get_item(**kwargs)


def limits_part(*, jobs: int, per_minute: int, speed: float, throttle: int) -> None:
    import boto3
    import botocore.session
    from moto import mock_aws

    from local.moto_patches.dynamodb import serialize_dynamodb_operations

    serialize_dynamodb_operations()  # DynamoDB's single-item atomicity, which moto lacks across threads

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="bench-route-limits",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": schema.PK, "KeyType": "HASH"},
                {"AttributeName": schema.SK, "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": schema.PK, "AttributeType": "S"},
                {"AttributeName": schema.SK, "AttributeType": "S"},
            ],
        )
        # Each job's function: its own table resource and limiter (its own copy of the allowance), shared counters.
        shared = botocore.session.get_session()  # (its loaded service models: 200 resources built in seconds)
        writes = Counter[str]()
        lock = threading.Lock()
        tables = [
            _Counted(
                boto3.session.Session(botocore_session=shared, region_name="us-east-1")
                .resource("dynamodb")
                .Table("bench-route-limits"),
                writes,
                lock,
            )
            for _ in range(jobs)
        ]
        clock = ScaledClock(speed)
        limits = RouteLimits(requests_per_minute=per_minute)
        made: list[float] = []  # the simulated second of each provider call
        throttled = [throttle]
        go = threading.Event()

        def job(number: int) -> None:
            limiter = RouteLimiter(tables[number], clock=clock, sleep=clock.sleep, max_wait_seconds=20)
            rng = random.Random(number)
            go.wait()
            retry = 0
            while True:
                asked = clock.seconds()
                try:
                    admitted = limiter.acquire(ROUTE, limits, 2_000)
                except RateLimitedError:  # the step fails; its Task retries it after a backoff, while it may
                    delay = limits_policy.retry_delay_seconds(retry, rate_limited=True)
                    with lock:
                        writes["gave up (the Task retries)" if delay is not None else "failed for good"] += 1
                    if delay is None:
                        return
                    clock.sleep(rng.uniform(0, delay))
                    retry += 1
                    continue
                with lock:  # when the admitting write was sent (the provider call follows it at once; a loaded
                    # machine may run this thread later, which must not move the call into another minute)
                    made.append(asked + admitted.waited_seconds)
                    answer_429 = throttled[0] > 0
                    throttled[0] -= 1 if answer_429 else 0
                if answer_429:  # the provider throttles: the allowance halves, the step retries later
                    limiter.throttled(ROUTE)
                    clock.sleep(rng.uniform(0, limits_policy.retry_delay_seconds(retry, rate_limited=True) or 0))
                    retry += 1
                    continue
                return

        threads = [threading.Thread(target=job, args=(n,), daemon=True) for n in range(jobs)]
        for thread in threads:
            thread.start()
        clock.began = time.monotonic()
        go.set()
        for thread in threads:
            thread.join()
        took = clock.seconds()

    by_minute = Counter(int(second // 60) for second in made)
    made.sort()
    sliding = max(sum(1 for s in made if start <= s < start + 60) for start in made)
    print(f"Route limited to {per_minute} requests/min, {jobs} jobs calling at once after a recovery "
          f"(time x{speed:g}; provider 429s its first {throttle} calls)")  # fmt: skip
    print(f"  without the limit: {jobs} provider calls in the first second")
    for minute in range(max(by_minute) + 1):
        print(f"  minute {minute}: {by_minute.get(minute, 0):4d} provider calls")
    print(f"  most in any 60 s: {sliding}  (target: at most {per_minute} in each minute)")
    print(f"  all {len(made)} calls made within {took / 60:.1f} simulated minutes")
    print(f"  limiter: {writes['update_item'] / len(made):.2f} conditional writes per provider call (refused tries "
          f"included), {writes['get_item']} reads of the allowance; bounded waits that ended rate-limited (the "
          f"Task retried): {writes['gave up (the Task retries)']}; steps failed for good (retries exhausted): "
          f"{writes['failed for good']}")  # fmt: skip


# ---------------------------------------------------------------------------------------------- class routes

SONNET = "anthropic.claude-sonnet-4-20250514-v1:0"
HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
CONFIGURATIONS: dict[str, dict[str, str]] = {
    "default route (Sonnet 4, Standard)": {"LONGHAUL_CLASS_ROUTES": "{}"},
    "class route fast (Haiku 3.5, Standard)": {"LONGHAUL_CLASS_ROUTES": json.dumps({"interactive": "fast"})},
    "class route fast-priority (Haiku 3.5, Priority)": {
        "LONGHAUL_CLASS_ROUTES": json.dumps({"interactive": "fast-priority"})
    },
}
ROUTES = {
    "default": {"provider": "offline", "model_id": SONNET},
    "fast": {"provider": "offline", "model_id": HAIKU, "stronger": "default"},
    "fast-priority": {"provider": "offline", "model_id": HAIKU, "stronger": "default",
                      "service_tier": {"interactive": "priority"}},
}  # fmt: skip


def routes_part() -> None:
    from cost import request_of, run  # (bench/, on the path as this script's folder)

    from evals.run import Api, datasets, score_document_analysis, summarize
    from local import lambda_runtime
    from local.__main__ import _quiet_moto
    from local.platform import LocalPlatform

    _quiet_moto()  # the figures only: no per-request access log
    platform = LocalPlatform.start(ROOT, env_overrides={"LONGHAUL_MODEL_ROUTES": json.dumps(ROUTES)})
    rows = []
    try:
        headers = {**platform.auth_header("alpha"), "Content-Type": "application/json"}
        cases = [c for d in datasets() if d.workflow == "document-analysis" for c in d.cases if c.small]
        before = lambda_runtime.environment_overrides()
        for label, environment in CONFIGURATIONS.items():
            platform.set_function_environment(**environment)
            job = run(platform, headers, 10, {**request_of(10), "sla_class": "interactive"})
            assert isinstance(job, dict), job
            api = Api(platform)
            scores = [score_document_analysis(platform, api, case, "interactive") for case in cases]
            summary = summarize("document-analysis", scores)
            model = job["cost"]["model"]
            rows.append((label, job["status"], model, summary))
            lambda_runtime.configure(environment_overrides=before)
    finally:
        platform.stop()

    print(f"An interactive 10-document job, and the small eval set's {len(cases)} document-analysis cases as "
          "interactive jobs, per routing")  # fmt: skip
    print(f"  {'routing':50s} {'status':10s} {'model $/job':>12s} {'$/1,000 jobs':>13s} {'tiers':>18s}  "
          "eval: success  facts  pages  faithful")  # fmt: skip
    for label, status, model, summary in rows:
        tiers = ",".join(sorted(model.get("tiers") or {})) or "-"
        usd = float(model["usd"])
        print(f"  {label:50s} {status:10s} {usd:12.6f} {usd * 1000:13.2f} {tiers:>18s}  "
              f"       {summary['success_rate']!s:6s} {summary['fact_recall']!s:6s} {summary['page_recall']!s:6s} "
              f"{summary['citation_faithfulness']!s}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("limits", "routes", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--per-minute", type=int, default=60)
    parser.add_argument("--speed", type=float, default=10.0, help="simulated seconds per wall-clock second")
    parser.add_argument("--throttle", type=int, default=0, help="the provider's 429s after the recovery")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore")
    print(f"Measured on {machine()}")
    if args.part in ("limits", "both"):
        limits_part(jobs=args.jobs, per_minute=args.per_minute, speed=args.speed, throttle=args.throttle)
    if args.part in ("routes", "both"):
        routes_part()


if __name__ == "__main__":
    main()
