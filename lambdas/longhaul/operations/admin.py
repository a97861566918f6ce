"""Operator commands against a deployed stack: create an API key for a tenant, a reviewer of a tenant, or an operator.

From the checkout (the package lives under `lambdas/`, its dependencies in `.venv`):

    PYTHONPATH=lambdas .venv/bin/python -m longhaul.operations.admin create-key --stack Longhaul-prod \
        --tenant acme [--role reviewer] [--region eu-west-1]
    PYTHONPATH=lambdas .venv/bin/python -m longhaul.operations.admin create-key --stack Longhaul-local \
        --endpoint-url http://127.0.0.1:8001 --tenant acme --role reviewer      # the platform `make run` started

The jobs table is found from the stack's `TableName` output (CloudFormation DescribeStacks), with the usual AWS
credentials and region; against a loopback `--endpoint-url` (the in-memory AWS of `make run`, which takes any
credentials) with dummy credentials and the local platform's region. The new key is printed once; only its SHA-256
is stored, so a lost key is replaced, not recovered.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from typing import Any, cast, get_args
from urllib.parse import urlsplit

import boto3

from longhaul.core.auth import Role, api_key_item

# The stack output naming the jobs table (stacks/longhaul_stack.py declares it).
TABLE_OUTPUT = "TableName"
KEY_PREFIX = "lh_"
LOCAL_REGION = "us-east-1"  # where the local platform deploys (local/deploy.py)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class AdminError(Exception):
    """A command that cannot proceed; its message says why."""


def table_name(cloudformation: Any, stack: str) -> str:
    """The jobs table of a deployed stack, from its outputs."""
    try:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    except cloudformation.exceptions.ClientError as error:
        raise AdminError(f"stack {stack}: {error.response['Error'].get('Message', error)}") from error
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    if TABLE_OUTPUT not in outputs:
        raise AdminError(f"stack {stack} has no {TABLE_OUTPUT} output: is it a Longhaul stack, fully deployed?")
    return str(outputs[TABLE_OUTPUT])


def new_key() -> str:
    """A random key (256 bits) with a recognisable prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def create_key(table: Any, tenant: str, role: Role = "tenant") -> str:
    """Store a new key's hash for `tenant` with `role`; returns the key (the only time it is seen)."""
    key = new_key()
    # A collision of 256-bit keys is not expected; the condition makes one fail rather than reassign a key.
    table.put_item(Item=api_key_item(key, tenant, role), ConditionExpression="attribute_not_exists(pk)")
    return key


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="PYTHONPATH=lambdas .venv/bin/python -m longhaul.operations.admin", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create-key", help="create an API key; prints it once, stores only its hash")
    create.add_argument("--stack", required=True, help="the deployed stack, e.g. Longhaul-prod")
    create.add_argument("--tenant", required=True, help="tenant id the key acts for")
    create.add_argument("--role", choices=get_args(Role), default="tenant")
    create.add_argument("--region", help="the stack's region (default: the AWS CLI's configured region)")
    create.add_argument(
        "--endpoint-url",
        help="an AWS endpoint of its own, e.g. the in-memory AWS of `make run`: http://127.0.0.1:8001 (on loopback, "
        "dummy credentials and us-east-1 are used)",
    )
    return parser


def session_for(region: str | None, endpoint_url: str | None) -> boto3.session.Session:
    """AWS's usual credentials and region; for a loopback endpoint (moto takes any credentials) dummy ones, so a
    configured AWS identity is never sent there, and the local platform's region."""
    if endpoint_url and urlsplit(endpoint_url).hostname in LOOPBACK_HOSTS:
        return boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=region or LOCAL_REGION
        )
    return boto3.session.Session(region_name=region)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    session = session_for(args.region, args.endpoint_url)
    endpoint = {"endpoint_url": args.endpoint_url} if args.endpoint_url else {}
    try:
        name = table_name(session.client("cloudformation", **endpoint), args.stack)
    except AdminError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    key = create_key(session.resource("dynamodb", **endpoint).Table(name), args.tenant, cast(Role, args.role))
    # The key alone on stdout (`KEY=$(python -m longhaul.operations.admin create-key …)`), the note on stderr.
    print(
        f"created a {args.role} key for tenant {args.tenant!r} in {name}; shown once, only its hash is stored",
        file=sys.stderr,
    )
    print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
