"""`longhaul admin …` against a deployed stack (moto, through Typer's runner): the stack's outputs name the table and
the webhook secrets' prefix; a created key is printed once, only its hash stored, and authenticates; a revoked key
does not; a rotated webhook secret signs beside the previous one for the grace period; what cannot be done says why
(exit 2, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from longhaul.adapters.secrets import SecretsManagerWebhookSecrets
from longhaul.core.auth import key_hash
from longhaul.operations import admin
from longhaul.storage.jobs import JobStore
from longhaul_client.cli import app
from tests.unit.aws_env import REGION

STACK = "Longhaul-prod"
PREFIX = f"{STACK}/webhooks/"
ROOT = Path(__file__).resolve().parents[2]
LONGHAUL = str(Path(sys.executable).with_name("longhaul"))  # the installed command, beside .venv/bin/python
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
    "Outputs": {
        admin.TABLE_OUTPUT: {"Value": {"Ref": "Jobs"}},
        admin.WEBHOOK_SECRETS_OUTPUT: {"Value": PREFIX},
    },
}
runner = CliRunner()


def longhaul(*args: str) -> Any:
    return runner.invoke(app, [*args, "--region", REGION], catch_exceptions=False)


@pytest.fixture
def stack_table(aws: None) -> Any:
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
    outputs = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]
    (name,) = [o["OutputValue"] for o in outputs if o["OutputKey"] == admin.TABLE_OUTPUT]
    return boto3.resource("dynamodb", region_name=REGION).Table(name)


def _items(table: Any) -> list[dict[str, Any]]:
    """The table's items but the audit trail's (each command records itself there)."""
    return [item for item in table.scan()["Items"] if item["pk"] != "AUDIT"]


def _keys(table: Any) -> list[dict[str, Any]]:
    return [item for item in _items(table) if item["pk"].startswith("APIKEY#")]


@pytest.mark.parametrize("role", ["tenant", "operator", "reviewer", "pii_reviewer"])
def test_create_key_stores_only_the_hash_and_the_printed_key_authenticates(stack_table: Any, role: str) -> None:
    done = longhaul("admin", "create-key", "--stack", STACK, "--tenant", "acme", "--role", role)

    assert done.exit_code == 0, done.stderr
    (key,) = done.stdout.split()  # the key alone on stdout, so `KEY=$(…)` works
    assert key.startswith(admin.KEY_PREFIX) and len(key) > 40
    assert "acme" in done.stderr and key not in done.stderr
    (item,) = _keys(stack_table)
    assert item["pk"] == f"APIKEY#{key_hash(key)}"
    assert key not in json.dumps(_items(stack_table), default=str), "the key itself is never stored"
    # a tenant's or reviewer's key makes its tenant exist; an operator's belongs to no tenant
    tenants = [i["pk"] for i in _items(stack_table) if not i["pk"].startswith("APIKEY#")]
    assert tenants == ([] if role == "operator" else ["TENANT#acme"])
    principal = JobStore(stack_table).principal_for_key(key)
    assert principal is not None and (principal.tenant_id, principal.role) == ("acme", role)
    assert JobStore(stack_table).principal_for_key(key + "x") is None


def test_a_reviewer_key_is_made_with_its_groups_and_groups_are_for_reviewers_only(stack_table: Any) -> None:
    reviewer = ("admin", "create-key", "--stack", STACK, "--tenant", "acme", "--role", "reviewer")
    made = longhaul(*reviewer, "--groups", "analysts, leads", "--output", "json")
    tenant = longhaul("admin", "create-key", "--stack", STACK, "--tenant", "acme", "--groups", "analysts")
    bad = longhaul(*reviewer, "--groups", "a b")
    every = admin.create_key(stack_table, "acme", "reviewer")

    assert made.exit_code == 0, made.stderr
    document = json.loads(made.stdout)
    assert document["groups"] == ["analysts", "leads"]
    principal = JobStore(stack_table).principal_for_key(document["key"])
    assert principal is not None and principal.groups == ["analysts", "leads"]
    everyone = JobStore(stack_table).principal_for_key(every)
    assert everyone is not None and everyone.groups is None  # no groups: every group of the tenant
    assert tenant.exit_code == 2 and "reviewer" in tenant.stderr
    assert bad.exit_code == 2 and "groups must be" in bad.stderr
    assert len(_keys(stack_table)) == 2


def test_each_key_is_new(stack_table: Any) -> None:
    keys = {admin.create_key(stack_table, "acme") for _ in range(3)}

    assert len(keys) == 3
    assert len(_keys(stack_table)) == 3
    assert [i["pk"] for i in _items(stack_table) if not i["pk"].startswith("APIKEY#")] == ["TENANT#acme"]  # once


def test_a_revoked_key_no_longer_authenticates(stack_table: Any) -> None:
    kept, revoked = admin.create_key(stack_table, "acme"), admin.create_key(stack_table, "acme", "operator")

    done = longhaul("admin", "revoke-key", "--stack", STACK, "--key", revoked, "--output", "json")
    by_hash = longhaul("admin", "revoke-key", "--stack", STACK, "--key-hash", key_hash(kept))
    again = longhaul("admin", "revoke-key", "--stack", STACK, "--key", revoked)

    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == {"key_id": key_hash(revoked)[:12], "tenant_id": "acme", "role": "operator"}
    assert by_hash.exit_code == 0 and "acme" in by_hash.stdout
    assert _keys(stack_table) == []
    assert [i["pk"] for i in _items(stack_table)] == ["TENANT#acme"]  # revoking its keys does not unmake a tenant
    assert JobStore(stack_table).principal_for_key(revoked) is None
    assert again.exit_code == 2 and "no API key" in again.stderr


def test_a_rotated_webhook_secret_signs_beside_the_previous_one_for_the_grace_period(stack_table: Any) -> None:
    client = boto3.client("secretsmanager", region_name=REGION)
    first = longhaul("admin", "rotate-webhook-secret", "--stack", STACK, "--tenant", "acme")
    second = longhaul("admin", "rotate-webhook-secret", "--stack", STACK, "--tenant", "acme", "--grace-hours", "2")

    assert first.exit_code == 0 and second.exit_code == 0, first.stderr + second.stderr
    old, fresh = first.stdout.strip(), second.stdout.strip()
    assert old.startswith("whsec_") and fresh.startswith("whsec_") and old != fresh
    stored = json.loads(client.get_secret_value(SecretId=f"{PREFIX}acme")["SecretString"])
    assert (stored["current"], stored["previous"]) == (fresh, old)
    secrets = SecretsManagerWebhookSecrets(client, PREFIX)
    assert secrets.signing_secrets("acme") == [fresh, old], "both sign during the grace period"
    later = SecretsManagerWebhookSecrets(client, PREFIX, clock=_At(datetime.now(UTC) + timedelta(hours=3)))
    assert later.signing_secrets("acme") == [fresh], "then only the new one"


def test_a_stack_without_the_table_output_is_refused(aws: None) -> None:
    template = {**TEMPLATE, "Outputs": {}}
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="Other", TemplateBody=json.dumps(template)
    )

    done = longhaul("admin", "create-key", "--stack", "Other", "--tenant", "acme")

    assert done.exit_code == 2
    assert "has no TableName output" in done.stderr and "Traceback" not in done.output


def test_an_unknown_stack_is_refused_with_cloudformations_reason(aws: None) -> None:
    done = longhaul("admin", "create-key", "--stack", "Longhaul-nope", "--tenant", "acme")

    assert done.exit_code == 2
    assert "Longhaul-nope" in done.stderr and "Traceback" not in done.output


class _At:
    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


def test_the_documented_invocation_works_from_the_checkout_against_the_local_platforms_endpoint(
    tmp_path: Any,
) -> None:
    """`.venv/bin/longhaul admin create-key … --endpoint-url …`, as the README says, in a shell without AWS
    credentials or region: the key it prints authenticates against the stack's table."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        endpoint = "http://{}:{}".format(*server.get_host_and_port())
        local = {"region_name": REGION, "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, **local)
        cloudformation.create_stack(StackName="Longhaul-local", TemplateBody=json.dumps(TEMPLATE))
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # no AWS_* at all
        command = [LONGHAUL, "admin", "create-key", "--endpoint-url", endpoint, "--stack", "Longhaul-local"]
        command += ["--tenant", "acme"]
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


def test_a_rotated_key_keeps_working_for_the_overlap_then_is_refused(stack_table: Any) -> None:
    old = admin.create_key(stack_table, "acme", "reviewer", groups=["analysts"])

    done = longhaul("admin", "rotate-key", "--stack", STACK, "--key", old, "--overlap-hours", "1", "--output", "json")
    again = admin.rotate_key(stack_table, key=old, overlap=timedelta(hours=5))  # never extends the old key
    missing = longhaul("admin", "rotate-key", "--stack", STACK, "--key", "lh_nope")

    assert done.exit_code == 0, done.stderr
    rotated = json.loads(done.stdout)
    assert (rotated["tenant_id"], rotated["role"], rotated["previous_key_id"]) == (
        "acme",
        "reviewer",
        key_hash(old)[:12],
    )
    ends = datetime.fromisoformat(rotated["previous_expires_at"])
    assert again.previous_expires_at == ends
    new = JobStore(stack_table).principal_for_key(rotated["key"])
    assert new is not None and new.groups == ["analysts"] and new.tenant_id == "acme"

    class At:
        def __init__(self, when: datetime) -> None:
            self.when = when

        def now(self) -> datetime:
            return self.when

    within = JobStore(stack_table, clock=At(ends - timedelta(seconds=1))).principal_for_key(old)
    after = JobStore(stack_table, clock=At(ends)).principal_for_key(old)
    assert within is not None and within.tenant_id == "acme"
    assert after is None
    assert JobStore(stack_table, clock=At(ends)).principal_for_key(rotated["key"]) is not None
    assert missing.exit_code == 2 and "no API key" in missing.stderr


def test_each_command_records_itself_in_the_audit_trail(stack_table: Any) -> None:
    from longhaul.storage.audit import AuditStore

    key = longhaul("admin", "create-key", "--stack", STACK, "--tenant", "acme").stdout.strip()
    longhaul("admin", "revoke-key", "--stack", STACK, "--key", key)
    longhaul("admin", "rotate-webhook-secret", "--stack", STACK, "--tenant", "acme")

    entries = list(AuditStore(stack_table).entries())
    assert [(e["action"], e["tenant_id"], e["actor"]["role"]) for e in entries] == [
        ("admin create-key", "acme", "admin"),
        ("admin revoke-key", "acme", "admin"),
        ("admin rotate-webhook-secret", "acme", "admin"),
    ]
    assert entries[0]["target"] == entries[1]["target"] == f"key {key_hash(key)[:12]}"
    assert entries[0]["actor"]["subject"].startswith("arn:aws:")  # who ran it, as AWS knows them
    assert AuditStore(stack_table).verify().ok
