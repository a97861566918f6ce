"""Benchmark: what the local IAM enforcement costs per request, against the same requests unchecked.

    .venv/bin/python bench/iam_enforcement.py --requests 2000

In-process moto (no server): a role with the step functions' kind of policy (item actions on a table and its
indexes, objects under prefixes), its assumed credentials, and `--requests` DynamoDB `GetItem`s, `TransactWriteItems`
of two items and S3 `GetObject`s, first unchecked (moto's default), then with `local.moto_patches.iam.enforce_iam`
(signature check, principal lookup, resource resolution, policy evaluation). Prints the CPU microseconds per request
of each and the difference, with the machine's cores and load. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "lambdas")]

os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
os.environ.pop("AWS_ENDPOINT_URL", None)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from local.moto_patches import iam  # noqa: E402

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
            "Resource": [TABLE_ARN, f"{TABLE_ARN}/index/*"],
        },
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::bench-artifacts/work/*"},
        {"Effect": "Allow", "Action": "xray:PutTraceSegments", "Resource": "*"},
    ],
}


def _timed(calls: int, call: object) -> float:
    assert callable(call)
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(
            TableName="jobs",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName="jobs", Item={"pk": {"S": "job"}})
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="bench-artifacts")
        s3.put_object(Bucket="bench-artifacts", Key="work/job/input.json", Body=b"{}")
        assume = {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        trust = {"Version": "2012-10-17", "Statement": [assume]}
        client = boto3.client("iam")
        role = client.create_role(RoleName="step", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        client.put_role_policy(RoleName="step", PolicyName="grants", PolicyDocument=json.dumps(POLICY))
        creds = iam.role_credentials(role)
        session = boto3.session.Session(
            aws_access_key_id=creds.access_key_id,
            aws_secret_access_key=creds.secret_access_key,
            aws_session_token=creds.session_token,
        )
        role_dynamodb, role_s3 = session.client("dynamodb"), session.client("s3")
        put = {"Update": {"TableName": "jobs", "Key": {"pk": {"S": "job"}}, "UpdateExpression": "SET n = :n",
                          "ExpressionAttributeValues": {":n": {"N": "1"}}}}  # fmt: skip
        calls = {
            "GetItem": lambda: role_dynamodb.get_item(TableName="jobs", Key={"pk": {"S": "job"}}),
            "TransactWriteItems (2 items)": lambda: role_dynamodb.transact_write_items(
                TransactItems=[put, {"Put": {"TableName": "jobs", "Item": {"pk": {"S": "other"}}}}]
            ),
            "S3 GetObject": lambda: role_s3.get_object(Bucket="bench-artifacts", Key="work/job/input.json"),
        }
        for call in calls.values():  # warm-up: clients, models, caches
            call()
        results = []
        for name, call in calls.items():
            unchecked = _timed(args.requests, call)
            iam.enforce_iam(["testing"])
            try:
                checked = _timed(args.requests, call)
            finally:
                iam.relax_iam()
            results.append((name, unchecked, checked))
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'request':<30} {'unchecked µs':>13} {'enforced µs':>12} {'added µs':>9}")
    for name, unchecked, checked in results:
        print(f"{name:<30} {unchecked:>13.0f} {checked:>12.0f} {checked - unchecked:>9.0f}")


if __name__ == "__main__":
    main()
