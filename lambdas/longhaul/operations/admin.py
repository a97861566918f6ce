"""Operator commands against a deployed stack: create an API key for a tenant, a reviewer of a tenant, or an
operator; prune the old versions no live job runs.

    PYTHONPATH=lambdas python -m longhaul.operations.admin create-key --stack Longhaul-prod \
        --tenant acme [--role reviewer]
    PYTHONPATH=lambdas python -m longhaul.operations.admin prune-versions --stack Longhaul-prod [--apply]

The jobs table is found from the stack's `TableName` output (CloudFormation DescribeStacks), the workflows' aliases
from its resources, with the usual AWS credentials and region. The new key is printed once; only its SHA-256 is
stored, so a lost key is replaced, not recovered. `prune-versions` prints what it would delete (every state machine
version no alias routes to and no live job runs, and the step function versions only those invoke) and deletes it
with `--apply`.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from typing import Any, cast, get_args

import boto3

from longhaul.core.auth import Role, api_key_item

# The stack output naming the jobs table (stacks/longhaul_stack.py declares it).
TABLE_OUTPUT = "TableName"
KEY_PREFIX = "lh_"


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


ALIAS_TYPE = "AWS::StepFunctions::StateMachineAlias"


def workflow_aliases(cloudformation: Any, stack: str) -> dict[str, str]:
    """{workflow: its alias ARN} of a deployed stack (a workflow's machine is named `<stack>-<workflow>`)."""
    aliases: dict[str, str] = {}
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack):
        for resource in page["StackResourceSummaries"]:
            if resource.get("ResourceType") == ALIAS_TYPE and resource.get("PhysicalResourceId"):
                arn = str(resource["PhysicalResourceId"])
                machine = arn.split(":")[6]
                aliases[machine.removeprefix(f"{stack}-")] = arn
    return aliases


def prune_versions(session: Any, stack: str, *, apply: bool, out: Any = sys.stdout) -> int:
    """Print the prune plan of the stack's old versions; with `apply`, carry it out. Returns the exit code."""
    from longhaul.adapters.versions import StepFunctionsVersions
    from longhaul.operations.versions import in_use, plan, prune
    from longhaul.storage.jobs import JobStore

    cloudformation = session.client("cloudformation")
    table = session.resource("dynamodb").Table(table_name(cloudformation, stack))
    versions = StepFunctionsVersions(session.client("stepfunctions"), session.client("lambda"))
    planned = plan(versions, workflow_aliases(cloudformation, stack), in_use(JobStore(table)))
    for line in planned.lines():
        print(line, file=out)
    if planned.empty:
        print("nothing to prune", file=out)
    elif apply:
        print(f"pruned {prune(versions, planned)} versions", file=out)
    else:
        print("(a plan: run again with --apply to delete)", file=out)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m longhaul.operations.admin", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create-key", help="create an API key; prints it once, stores only its hash")
    create.add_argument("--stack", required=True, help="the deployed stack, e.g. Longhaul-prod")
    create.add_argument("--tenant", required=True, help="tenant id the key acts for")
    create.add_argument("--role", choices=get_args(Role), default="tenant")
    create.add_argument("--region", help="the stack's region (default: the AWS CLI's configured region)")
    versions = commands.add_parser(
        "prune-versions", help="delete the state machine and step function versions no live job runs (a plan first)"
    )
    versions.add_argument("--stack", required=True, help="the deployed stack, e.g. Longhaul-prod")
    versions.add_argument("--apply", action="store_true", help="delete what the plan lists (default: print it only)")
    versions.add_argument("--region", help="the stack's region (default: the AWS CLI's configured region)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    session = boto3.session.Session(region_name=args.region)
    if args.command == "prune-versions":
        try:
            return prune_versions(session, args.stack, apply=args.apply)
        except AdminError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    try:
        name = table_name(session.client("cloudformation"), args.stack)
    except AdminError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    key = create_key(session.resource("dynamodb").Table(name), args.tenant, cast(Role, args.role))
    # The key alone on stdout (`KEY=$(python -m longhaul.operations.admin create-key …)`), the note on stderr.
    print(
        f"created a {args.role} key for tenant {args.tenant!r} in {name}; shown once, only its hash is stored",
        file=sys.stderr,
    )
    print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
