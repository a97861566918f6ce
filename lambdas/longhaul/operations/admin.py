"""What an operator does to a deployed stack directly, not through its API: create and revoke API keys, rotate a
tenant's webhook signing secret, prune the old versions no live job runs. `longhaul admin …` (the command line,
`client/`) runs these:

    longhaul admin create-key --stack Longhaul-prod --tenant acme [--role reviewer [--groups analysts,leads]]
    longhaul admin prune-versions --stack Longhaul-prod [--apply]
    longhaul admin create-key --stack Longhaul-local --endpoint-url http://127.0.0.1:8001 --tenant acme  # make run's

The stack's resources are found from its outputs (CloudFormation DescribeStacks: `TableName`, the jobs table where
API keys live; `WebhookSecretsPrefix`, the prefix of the tenants' secrets in Secrets Manager) and the workflows'
aliases from its resources, with the usual AWS credentials and region. A new key is returned once; only its SHA-256
is stored, so a lost key is replaced, not recovered. `prune-versions` prints what it would delete (every state machine
version no alias routes to and no live job runs, and the step function versions only those invoke) and deletes it
with `--apply`.
Against a loopback `--endpoint-url` (the in-memory AWS of `make run`, which takes any credentials) with dummy
credentials and the local platform's region.
"""

from __future__ import annotations

import re
import secrets
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from urllib.parse import urlsplit

from longhaul.adapters.secrets import DEFAULT_GRACE, SecretsManagerWebhookSecrets
from longhaul.core.auth import REVIEWER_ROLES, Role, api_key_item, key_hash
from longhaul.core.schema import api_key_key
from longhaul.storage.tenants import TenantStore
from longhaul.webhooks.signing import new_secret

# The stack outputs naming the jobs table and the webhook secrets' prefix (stacks/longhaul_stack.py declares them).
TABLE_OUTPUT = "TableName"
WEBHOOK_SECRETS_OUTPUT = "WebhookSecretsPrefix"
KEY_PREFIX = "lh_"
LOCAL_REGION = "us-east-1"  # where the local platform deploys (local/deploy.py)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# The key the commands sign with on a loopback endpoint: the local platform takes it for its account's administrator.
LOCAL_ADMIN_ACCESS_KEY = "local"


class AdminError(Exception):
    """A command that cannot proceed; its message says why."""


@dataclass(frozen=True)
class StackOutputs:
    """What the admin commands need of a deployed stack."""

    stack: str
    table_name: str
    webhook_secrets_prefix: str | None


def stack_outputs(cloudformation: Any, stack: str) -> StackOutputs:
    """The jobs table and the webhook secrets' prefix of a deployed stack, from its outputs."""
    try:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    except cloudformation.exceptions.ClientError as error:
        raise AdminError(f"stack {stack}: {error.response['Error'].get('Message', error)}") from error
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    if TABLE_OUTPUT not in outputs:
        raise AdminError(f"stack {stack} has no {TABLE_OUTPUT} output: is it a Longhaul stack, fully deployed?")
    prefix = outputs.get(WEBHOOK_SECRETS_OUTPUT)
    return StackOutputs(stack, str(outputs[TABLE_OUTPUT]), str(prefix) if prefix else None)


def table_name(cloudformation: Any, stack: str) -> str:
    """The jobs table of a deployed stack, from its outputs."""
    return stack_outputs(cloudformation, stack).table_name


def new_key() -> str:
    """A random key (256 bits) with a recognisable prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def parse_groups(text: str) -> list[str]:
    """`analysts,analysis-leads` → the reviewer groups (names of letters, digits, `.`, `_`, `-`; at least one)."""
    groups = list(dict.fromkeys(g.strip() for g in text.split(",") if g.strip()))
    bad = [g for g in groups if not GROUP.match(g)]
    if not groups or bad:
        raise AdminError(f"groups must be comma-separated names of letters, digits, '.', '_' or '-' (got {text!r})")
    return groups


def create_key(table: Any, tenant: str, role: Role = "tenant", *, groups: list[str] | None = None) -> str:
    """Store a new key's hash for `tenant` with `role`; returns the key (the only time it is seen). A tenant's or
    reviewer's key makes the tenant exist (`longhaul.storage.tenants`); an operator's belongs to no tenant. `groups`:
    a reviewer's groups (it sees and decides the reviews assigned to one of them); None: every group."""
    if groups is not None and role not in REVIEWER_ROLES:
        raise AdminError("groups are for a reviewer key")
    key = new_key()
    if role != "operator":
        TenantStore(table).register(tenant)
    # A collision of 256-bit keys is not expected; the condition makes one fail rather than reassign a key.
    table.put_item(Item=api_key_item(key, tenant, role, groups), ConditionExpression="attribute_not_exists(pk)")
    return key


@dataclass(frozen=True)
class RevokedKey:
    key_id: str  # a prefix of the key's hash, as audit records name it
    tenant_id: str
    role: str


def revoke_key(table: Any, *, key: str | None = None, digest: str | None = None) -> RevokedKey:
    """Delete an API key (given as the key itself or its SHA-256): its requests are 401s once the API function's
    cache of keys lets it go, within `LOOKUP_CACHE_SECONDS` (`storage/cache.py`)."""
    if (key is None) == (digest is None):
        raise AdminError("give the key or its SHA-256 hash")
    digest = key_hash(key) if key is not None else str(digest).lower()
    found = table.delete_item(Key=api_key_key(digest), ReturnValues="ALL_OLD").get("Attributes")
    if not found:
        raise AdminError(f"no API key with hash {digest[:12]}… in {table.name}")
    return RevokedKey(key_id=digest[:12], tenant_id=str(found["tenant_id"]), role=str(found.get("role", "tenant")))


DEFAULT_OVERLAP = timedelta(hours=24)


@dataclass(frozen=True)
class RotatedKey:
    key: str  # the new key (the only time it is seen)
    key_id: str
    tenant_id: str
    role: str
    previous_key_id: str
    previous_expires_at: datetime  # the old key authenticates until then (and is refused within 10 s after)


def rotate_key(
    table: Any,
    *,
    key: str | None = None,
    digest: str | None = None,
    overlap: timedelta = DEFAULT_OVERLAP,
    now: datetime | None = None,
) -> RotatedKey:
    """A new key for the old key's tenant, role and groups; the old one keeps working for `overlap`, then is refused
    (`JobStore.principal_for_key` checks its `expires_at`; DynamoDB's TTL deletes the item later). The old key's
    expiry only ever moves earlier: rotating it again does not extend it."""
    if (key is None) == (digest is None):
        raise AdminError("give the key or its SHA-256 hash")
    digest = key_hash(key) if key is not None else str(digest).lower()
    old = table.get_item(Key=api_key_key(digest), ConsistentRead=True).get("Item")
    if not old:
        raise AdminError(f"no API key with hash {digest[:12]}… in {table.name}")
    ends = int(((now or datetime.now(UTC)) + overlap).timestamp())
    if "expires_at" in old:
        ends = min(ends, int(old["expires_at"]))
    role = str(old.get("role", "tenant"))
    groups = [str(g) for g in old["groups"]] if "groups" in old else None
    new = new_key()
    item = {**api_key_item(new, str(old["tenant_id"]), cast(Role, role), groups), "rotated_from": digest[:12]}
    table.put_item(Item=item, ConditionExpression="attribute_not_exists(pk)")
    table.update_item(
        Key=api_key_key(digest),
        UpdateExpression="SET #expires = :ends, rotated_to = :new",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeNames={"#expires": "expires_at"},
        ExpressionAttributeValues={":ends": ends, ":new": key_hash(new)[:12]},
    )
    return RotatedKey(
        key=new,
        key_id=key_hash(new)[:12],
        tenant_id=str(old["tenant_id"]),
        role=role,
        previous_key_id=digest[:12],
        previous_expires_at=datetime.fromtimestamp(ends, UTC),
    )


def record_command(
    session: Any,
    table: Any,
    command: str,
    *,
    target: str,
    tenant_id: str | None,
    before: Any = None,
    after: Any = None,
) -> None:
    """Append a command's action to the stack's audit trail (the API never sees these commands, so they record
    themselves): the actor is the AWS identity that ran it (STS GetCallerIdentity's ARN), in the role `admin`."""
    from longhaul.core.audit import AuditActor
    from longhaul.operations.audit import command_action
    from longhaul.storage.audit import AuditStore

    try:
        subject = str(session.client("sts").get_caller_identity()["Arn"])
    except Exception:  # an identity we cannot name is still recorded, as such
        subject = "unknown"
    actor = AuditActor(role="admin", subject=subject)
    AuditStore(table).append(command_action(actor, command, target, tenant_id=tenant_id, before=before, after=after))


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


class AwsAccess:
    """boto3 clients and resources of one session, at one endpoint (None: AWS's own)."""

    def __init__(self, session: Any, endpoint_url: str | None = None) -> None:
        self._session = session
        self._endpoint = {"endpoint_url": endpoint_url} if endpoint_url else {}

    def client(self, name: str) -> Any:
        return self._session.client(name, **self._endpoint)

    def resource(self, name: str) -> Any:
        return self._session.resource(name, **self._endpoint)


def session_for(region: str | None, endpoint_url: str | None = None) -> AwsAccess:
    """AWS's usual credentials and region; for a loopback endpoint (moto takes any credentials) dummy ones, so a
    configured AWS identity is never sent there, and the local platform's region."""
    import boto3

    if endpoint_url and urlsplit(endpoint_url).hostname in LOOPBACK_HOSTS:
        local = boto3.session.Session(
            aws_access_key_id=LOCAL_ADMIN_ACCESS_KEY,
            aws_secret_access_key=LOCAL_ADMIN_ACCESS_KEY,
            region_name=region or LOCAL_REGION,
        )
        return AwsAccess(local, endpoint_url)
    return AwsAccess(boto3.session.Session(region_name=region), endpoint_url)


def rotate_webhook_secret(
    secretsmanager: Any, outputs: StackOutputs, tenant: str, *, grace: timedelta = DEFAULT_GRACE
) -> str:
    """A new signing secret for `tenant`'s webhooks; the previous one keeps signing for `grace` (receivers accept
    either meanwhile). Returns the new secret, the only time it is shown. A tenant without one gets its first."""
    if outputs.webhook_secrets_prefix is None:
        raise AdminError(
            f"stack {outputs.stack} has no {WEBHOOK_SECRETS_OUTPUT} output: deploy this version of Longhaul first"
        )
    store = SecretsManagerWebhookSecrets(secretsmanager, outputs.webhook_secrets_prefix)
    return store.rotate(tenant, secret=new_secret(), grace=grace)
