"""`python -m longhaul.operations.admin create-key` against a deployed stack (moto): the stack's table output is
found, only the key's hash is stored, and the printed key authenticates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from longhaul.core.auth import key_hash
from longhaul.operations import admin
from longhaul.storage.jobs import JobStore
from tests.unit.aws_env import REGION

STACK = "Longhaul-prod"
ROOT = Path(__file__).resolve().parents[2]
ADMIN = [str(Path(sys.executable)), "-m", "longhaul.operations.admin"]  # the project's interpreter: .venv/bin/python
TEMPLATE = {
    "Resources": {
        "Jobs": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            },
        }
    },
    "Outputs": {admin.TABLE_OUTPUT: {"Value": {"Ref": "Jobs"}}},
}


@pytest.fixture
def stack_table(aws: None) -> Any:
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
    outputs = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]
    (name,) = [o["OutputValue"] for o in outputs if o["OutputKey"] == admin.TABLE_OUTPUT]
    return boto3.resource("dynamodb", region_name=REGION).Table(name)


def _items(table: Any) -> list[dict[str, Any]]:
    return list(table.scan()["Items"])


@pytest.mark.parametrize("role", ["tenant", "operator"])
def test_create_key_stores_only_the_hash_and_the_printed_key_authenticates(
    stack_table: Any, capsys: pytest.CaptureFixture[str], role: str
) -> None:
    code = admin.main(["create-key", "--stack", STACK, "--tenant", "acme", "--role", role])

    out = capsys.readouterr()
    assert code == 0
    (key,) = out.out.split()  # the key alone on stdout, so `KEY=$(…)` works
    assert key.startswith(admin.KEY_PREFIX) and len(key) > 40
    assert "acme" in out.err and key not in out.err
    (item,) = _items(stack_table)
    assert item["pk"] == f"APIKEY#{key_hash(key)}"
    assert key not in json.dumps(item, default=str), "the key itself is never stored"
    principal = JobStore(stack_table).principal_for_key(key)
    assert principal is not None and (principal.tenant_id, principal.role) == ("acme", role)
    assert JobStore(stack_table).principal_for_key(key + "x") is None


def test_each_key_is_new(stack_table: Any) -> None:
    keys = {admin.create_key(stack_table, "acme") for _ in range(3)}

    assert len(keys) == 3
    assert len(_items(stack_table)) == 3


def test_a_stack_without_the_table_output_is_refused(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    template = {**TEMPLATE, "Outputs": {}}
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="Other", TemplateBody=json.dumps(template)
    )

    code = admin.main(["create-key", "--stack", "Other", "--tenant", "acme"])

    assert code == 1
    assert "has no TableName output" in capsys.readouterr().err


def test_an_unknown_stack_is_refused_with_cloudformations_reason(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    code = admin.main(["create-key", "--stack", "Longhaul-nope", "--tenant", "acme"])

    assert code == 1
    assert "Longhaul-nope" in capsys.readouterr().err


def test_the_documented_invocation_works_from_the_checkout_against_the_local_platforms_endpoint(
    tmp_path: Any,
) -> None:
    """`PYTHONPATH=lambdas .venv/bin/python -m longhaul.operations.admin … --endpoint-url …`, as the README says, in a
    shell without AWS credentials or region: the key it prints authenticates against the stack's table."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        endpoint = "http://{}:{}".format(*server.get_host_and_port())
        local = {"region_name": REGION, "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, **local)
        cloudformation.create_stack(StackName="Longhaul-local", TemplateBody=json.dumps(TEMPLATE))
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": "lambdas"}  # no AWS_* at all
        command = [*ADMIN, "create-key", "--endpoint-url", endpoint, "--stack", "Longhaul-local", "--tenant", "acme"]
        ran = subprocess.run([*command, "--role", "reviewer"], cwd=ROOT, env=env, capture_output=True, text=True)

        assert ran.returncode == 0, ran.stderr
        (key,) = ran.stdout.split()
        outputs = cloudformation.describe_stacks(StackName="Longhaul-local")["Stacks"][0]["Outputs"]
        (name,) = [o["OutputValue"] for o in outputs if o["OutputKey"] == admin.TABLE_OUTPUT]
        table = boto3.resource("dynamodb", endpoint_url=endpoint, **local).Table(name)
        principal = JobStore(table).principal_for_key(key)
        assert principal is not None and (principal.tenant_id, principal.role) == ("acme", "reviewer")
    finally:
        server.stop()
