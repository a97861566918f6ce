"""Benchmark: what running a tool call with its job's own credentials adds, locally.

    .venv/bin/python bench/tool_credentials.py --jobs 200 --calls 2000

In-process moto under the local IAM enforcement (`local.moto_patches.iam`): a step function's role that may assume
the tool role, the tool role (its own policy as the stack grants it) and a tool call's work, one S3 `GetObject` of
the job's own object. Measured, in CPU and wall microseconds:

- `function's credentials`: the call signed as the function (what a tool did before);
- `first call of a job`: `services.for_tool` for a job not seen yet (STS AssumeRole with the job's session policy,
  through the enforcement, a boto3 session and its clients) and the call;
- `later calls of the job`: `for_tool` answering from its cache (the credentials are kept while valid) and the call,
  now evaluated against the role's policy and the session policy.

Prints each and what it adds over the function's own credentials, with the machine's cores and load. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "lambdas")]

os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
os.environ.pop("AWS_ENDPOINT_URL", None)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from local.moto_patches import iam  # noqa: E402

BUCKET, TABLE = "bench-artifacts", "jobs"


def _policy(*statements: dict[str, object]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _timed(calls: int, call: Callable[[int], object]) -> tuple[float, float]:
    """(CPU µs, wall µs) per call of `call(i)`."""
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(calls):
        call(i)
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200, help="jobs whose first tool call is measured")
    parser.add_argument("--calls", type=int, default=2000, help="calls of one job measured")
    args = parser.parse_args()
    with mock_aws():
        from longhaul import services as wiring
        from longhaul.adapters import aws
        from longhaul.core.ports import ToolScope
        from longhaul.core.settings import Settings, function_environment

        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        jobs = [f"job_{n:028x}" for n in range(args.jobs + 1)]
        for job in jobs:
            s3.put_object(Bucket=BUCKET, Key=f"work/{job}/case.json", Body=b"{}")
        client = boto3.client("iam")
        lambda_trust = _policy(
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        )
        step = client.create_role(RoleName="step", AssumeRolePolicyDocument=lambda_trust)["Role"]["Arn"]
        tools_trust = _policy(
            {"Effect": "Allow", "Principal": {"AWS": step}, "Action": ["sts:AssumeRole", "sts:TagSession"]}
        )
        tools = client.create_role(RoleName="tools", AssumeRolePolicyDocument=tools_trust)["Role"]["Arn"]
        objects = f"arn:aws:s3:::{BUCKET}"
        client.put_role_policy(
            RoleName="step",
            PolicyName="grants",
            PolicyDocument=_policy(
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{objects}/work/*"},
                {"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"], "Resource": tools},
            ),
        )
        client.put_role_policy(
            RoleName="tools",
            PolicyName="grants",
            PolicyDocument=_policy(
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": [f"{objects}/work/*", f"{objects}/uploads/*"],
                },
                {"Effect": "Allow", "Action": "s3:PutObject", "Resource": f"{objects}/work/*"},
            ),
        )
        iam.enforce_iam(["testing"])
        try:
            environment = {
                **iam.role_credentials(step).environment(),
                "LONGHAUL_TABLE": TABLE,
                "LONGHAUL_BUCKET": BUCKET,
                "LONGHAUL_TOOL_ROLE": tools,
                "AWS_REGION": "us-east-1",
            }
            with function_environment(environment):
                services = wiring._build(Settings.model_validate(environment))
                own = aws.client("s3")

                def direct(i: int) -> None:
                    own.get_object(Bucket=BUCKET, Key=f"work/{jobs[0]}/case.json")["Body"].read()

                def call(job: str) -> None:
                    scoped = wiring.for_tool(services, ToolScope(job, "tenant-a", "draft_notices"))
                    scoped.artifacts.get_bytes(f"work/{job}/case.json")

                for warm_up in (direct, lambda i: call(jobs[0])):
                    warm_up(0)
                baseline = _timed(args.calls, direct)
                first = _timed(args.jobs, lambda i: call(jobs[i + 1]))
                later = _timed(args.calls, lambda i: call(jobs[0]))
        finally:
            iam.relax_iam()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    header = f"{'a tool call (one S3 GetObject)':<34} {'CPU µs':>8} {'wall µs':>8}"
    print(f"{header} {'added CPU µs':>13} {'added wall µs':>14}")
    for name, (cpu, wall) in (
        ("with the function's credentials", baseline),
        ("first call of a job (AssumeRole)", first),
        ("later calls of the job (cached)", later),
    ):
        print(f"{name:<34} {cpu:>8.0f} {wall:>8.0f} {cpu - baseline[0]:>13.0f} {wall - baseline[1]:>14.0f}")


if __name__ == "__main__":
    main()
