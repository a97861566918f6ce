"""Benchmark: how long a revoked API key keeps working on the AWS path (API Gateway's cached authorizer answer, then
the API function).

    .venv/bin/python bench/revocation.py                  # revocations at 21 phases of the key caches, 0.1 s apart
    .venv/bin/python bench/revocation.py --interval 0.05 --gateway-ttl 300

In-process on moto: the real authorizer handler (`handlers.authorizer`) answers REQUEST authorizer events, its
answer is kept as API Gateway keeps it (by the `Authorization` header, for `--gateway-ttl` seconds: the stack's
`results_cache_ttl`), and the real API handler (`handlers.api`) gets each request as a proxy event carrying that
answer in `requestContext.authorizer`. A client sends `GET /v1/jobs` every `--interval` seconds of a simulated clock
(the key caches' own); the key is revoked at a different phase of the caches in each trial. Prints the last
accepted request after the revocation (worst and median over the trials) against the stated bound
(`LOOKUP_CACHE_SECONDS`) and the target (60 s), and the key lookups a warm API function makes per key and minute.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "lambdas")]

TARGET_SECONDS = 60.0
TABLE = "longhaul-bench"


class SimulatedClock:
    def __init__(self) -> None:
        self.current = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current


def _table() -> Any:
    import aws_cdk as cdk
    import boto3
    from aws_cdk import RemovalPolicy

    from stacks.storage import Storage

    app = cdk.App()
    stack = cdk.Stack(app, "StorageOnly")
    Storage(stack, "Storage", removal_policy=RemovalPolicy.DESTROY)
    template = app.synth().get_stack_by_name("StorageOnly").template
    (properties,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    return boto3.resource("dynamodb").create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=properties["AttributeDefinitions"],
        KeySchema=properties["KeySchema"],
        GlobalSecondaryIndexes=[
            {k: v for k, v in index.items() if k in ("IndexName", "KeySchema", "Projection")}
            for index in properties.get("GlobalSecondaryIndexes", [])
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between the client's requests")
    parser.add_argument("--gateway-ttl", type=int, default=300, help="API Gateway's authorizer cache (stacks/api.py)")
    parser.add_argument("--trials", type=int, default=21)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(name, None)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")

    from moto import mock_aws

    with mock_aws():
        figures = run(_table(), args.interval, args.gateway_ttl, args.trials)
    print_figures(figures, args)


class Gateway:
    """One client's requests through API Gateway: the authorizer's answer kept by the header for `ttl` seconds."""

    METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/GET/v1/jobs"

    def __init__(self, clock: SimulatedClock, ttl: int, headers: dict[str, str]) -> None:
        self.clock, self.ttl, self.headers = clock, ttl, headers
        self.kept: tuple[datetime, dict[str, Any]] | None = None

    def request(self) -> int:
        from handlers import api, authorizer
        from tests.unit.conftest import LambdaContext, rest_event

        if self.kept is None or self.clock.current >= self.kept[0]:
            event = {
                "type": "REQUEST",
                "methodArn": self.METHOD_ARN,
                **rest_event("GET", "/v1/jobs", headers=self.headers),
            }
            try:
                answer = authorizer.handler(event, LambdaContext(function_name="authorizer"))
            except authorizer.Unauthorized:
                return 401
            self.kept = (self.clock.current + timedelta(seconds=self.ttl), answer)
        proxy = rest_event("GET", "/v1/jobs", headers=self.headers)
        answer = self.kept[1]
        proxy["requestContext"]["authorizer"] = {**answer["context"], "principalId": answer["principalId"]}
        return int(api.handler(proxy, LambdaContext())["statusCode"])


def run(table: Any, interval: float, gateway_ttl: int, trials: int) -> dict[str, Any]:
    from longhaul.core.settings import function_environment
    from longhaul.operations import admin
    from longhaul.services import services
    from longhaul.storage.cache import LOOKUP_CACHE_SECONDS

    clock = SimulatedClock()
    env = {"LONGHAUL_TABLE": TABLE, "LONGHAUL_BUCKET": "unused", "LONGHAUL_WORKFLOWS": "{}"}
    last_accepted: list[float] = []
    lookups = 0
    with function_environment(env):
        jobs = services().jobs
        jobs._keys.clock = clock
        read = jobs._principal

        def counted(digest: str) -> Any:
            nonlocal lookups
            lookups += 1
            return read(digest)

        jobs._principal = counted  # type: ignore[method-assign]
        for trial in range(trials):
            key = admin.create_key(table, f"tenant-{trial}")
            gateway = Gateway(clock, gateway_ttl, {"Authorization": f"Bearer {key}"})
            request = gateway.request
            assert request() == 200
            # The revocation falls at a different phase of the API function's key cache in each trial.
            clock.current += timedelta(seconds=LOOKUP_CACHE_SECONDS * trial / max(1, trials - 1))
            assert request() == 200
            admin.revoke_key(table, key=key)
            revoked_at, last = clock.current, 0.0
            while True:
                clock.current += timedelta(seconds=interval)
                if request() != 200:
                    break
                last = (clock.current - revoked_at).total_seconds()
            last_accepted.append(last)
        # A warm function's lookups of one key over a simulated minute of requests every `interval` seconds.
        key = admin.create_key(table, "steady")
        lookups = 0
        for _ in range(round(60 / interval)):
            clock.current += timedelta(seconds=interval)
            jobs.principal_for_key(key)
    return {
        "bound": LOOKUP_CACHE_SECONDS,
        "worst": max(last_accepted),
        "median": statistics.median(last_accepted),
        "lookups_per_minute": lookups,
        "requests_per_minute": round(60 / interval),
    }


def print_figures(figures: dict[str, Any], args: argparse.Namespace) -> None:
    worst, bound = figures["worst"], figures["bound"]
    print(
        f"revoked key, last accepted request after revocation (AWS path: authorizer answer cached "
        f"{args.gateway_ttl} s + API handler; {args.trials} phases, a request every {args.interval} s): "
        f"worst {worst:.1f} s, median {figures['median']:.1f} s"
    )
    print(
        f"  stated bound {bound:.0f} s (LOOKUP_CACHE_SECONDS), target <= {TARGET_SECONDS:.0f} s: "
        f"{'within' if worst <= min(bound, TARGET_SECONDS) else 'OVER'}; trusting the gateway's answer alone would "
        f"be up to {args.gateway_ttl} s"
    )
    print(
        f"  key lookups of a warm API function: {figures['lookups_per_minute']} GetItem per key per minute "
        f"({figures['requests_per_minute']} requests)"
    )


if __name__ == "__main__":
    main()
