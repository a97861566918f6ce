"""A tool call's credentials: the stack's tool role (`LONGHAUL_TOOL_ROLE`) assumed through STS with a session policy
scoped to the call's job, for `TOOL_SESSION_SECONDS` (900 s, the least STS allows).

What the session policy names (`session_policy`), and nothing else:

- S3 objects of the artifacts bucket: read under `work/<job>/` and `uploads/<tenant>/`, write under `work/<job>/`;
- DynamoDB items of the jobs table (not its indexes) whose partition key (`dynamodb:LeadingKeys`) is the job's
  (`JOB#<job>`) or its tenant's memory (`MEMORY#<tenant>`): get, query, put, update, condition checks; deletes of the
  tenant's memory items only when the step's tools may `forget`;
- `ses:SendEmail` from the platform's sender only when the step's tools send e-mail (`email`).

The effective permissions are the tool role's own policy (what any tool may do, on every job) intersected with that
session policy: a call outside the job is refused by STS's own evaluation on AWS, and by the local platform's IAM
enforcement locally (`local/moto_patches/iam.py` evaluates session policies). The session is named after the job
(`tool-<job id>`) and tagged with its job, tenant and step, so CloudTrail names the job of every call.

Credentials are kept per scope (job, tenant, step, capabilities) while they remain valid for `REFRESH_MARGIN_SECONDS`
more, and forgotten once they expire (never per process forever): a turn's tool calls share one AssumeRole, the next
turn of the same job in the same sandbox reuses it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from longhaul.core import schema
from longhaul.core.ports import ToolCredentials, ToolScope

#: The session's duration: the least STS allows (and the tool role's `MaxSessionDuration` is set to it).
TOOL_SESSION_SECONDS = 900
#: Credentials this close to their expiration are not handed out again (a tool call may last that long).
REFRESH_MARGIN_SECONDS = 300
#: Sessions kept at once (jobs whose tool calls one sandbox makes within 15 minutes); the oldest go first.
MAX_KEPT = 256
#: Capability names (`longhaul.engine.spec.EMAIL`, `FORGET`: the spec's vocabulary, repeated here below it).
EMAIL, FORGET = "email", "forget"
#: The item actions every tool call may make on its job's and tenant's partitions.
ITEM_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:ConditionCheckItem",
)


def session_name(job_id: str) -> str:
    """The STS session name: `tool-<job id>` (at most 64 characters of `[\\w+=,.@-]`)."""
    return f"tool-{job_id}"[:64]


def leading_keys(scope: ToolScope) -> list[str]:
    """The partition keys a tool call of the job may touch: the job's and its tenant's memory."""
    return [schema.job_pk(scope.job_id), schema.memory_pk(scope.tenant_id)]


def session_policy(
    scope: ToolScope,
    *,
    bucket: str,
    table_arn: str,
    email_identities: tuple[str, ...] = (),
    partition: str = "aws",
) -> dict[str, Any]:
    """The session policy of a tool call of `scope`'s job (see the module docstring): a pure function of the job, its
    tenant and its step's capabilities."""
    objects = f"arn:{partition}:s3:::{bucket}"
    work = f"{objects}/{schema.WORK_PREFIX}{scope.job_id}/*"
    uploads = f"{objects}/{schema.UPLOADS_PREFIX}{scope.tenant_id}/*"
    statements: list[dict[str, Any]] = [
        {"Sid": "JobObjectsRead", "Effect": "Allow", "Action": "s3:GetObject", "Resource": [work, uploads]},
        {"Sid": "JobObjectsWrite", "Effect": "Allow", "Action": "s3:PutObject", "Resource": [work]},
        {
            "Sid": "JobItems",
            "Effect": "Allow",
            "Action": list(ITEM_ACTIONS),
            "Resource": [table_arn],
            "Condition": {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": leading_keys(scope)}},
        },
    ]
    if FORGET in scope.capabilities:
        statements.append(
            {
                "Sid": "TenantMemoryDeletes",
                "Effect": "Allow",
                "Action": "dynamodb:DeleteItem",
                "Resource": [table_arn],
                "Condition": {
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [schema.memory_pk(scope.tenant_id)]}
                },
            }
        )
    if EMAIL in scope.capabilities and email_identities:
        statements.append(
            {"Sid": "SendFromSender", "Effect": "Allow", "Action": "ses:SendEmail", "Resource": list(email_identities)}
        )
    return {"Version": "2012-10-17", "Statement": statements}


def identity_arns(sender: str | None, *, region: str, account: str, partition: str = "aws") -> tuple[str, ...]:
    """The SES identities a send from `sender` is authorized on: the address's and its domain's."""
    if not sender:
        return ()
    address = sender.rpartition("<")[2].rstrip(">").strip()
    names = [address, address.partition("@")[2]] if "@" in address else [address]
    return tuple(f"arn:{partition}:ses:{region}:{account}:identity/{name}" for name in names if name)


class AssumedToolRole:
    """`ToolCredentialSource` by STS AssumeRole of the tool role, credentials kept per (job, scope) while valid."""

    def __init__(
        self,
        sts: Any,
        role_arn: str,
        *,
        bucket: str,
        table_name: str,
        region: str,
        email_sender: str | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.sts = sts
        self.role_arn = role_arn
        self.partition, self.account = role_arn.split(":")[1], role_arn.split(":")[4]
        self.bucket = bucket
        self.table_arn = f"arn:{self.partition}:dynamodb:{region}:{self.account}:table/{table_name}"
        self.identities = identity_arns(email_sender, region=region, account=self.account, partition=self.partition)
        self._now = now
        self._kept: OrderedDict[ToolScope, ToolCredentials] = OrderedDict()
        self._lock = threading.Lock()
        self.assumed = 0  # AssumeRole calls made (what the cache saved is visible to tests and the bench)

    def policy(self, scope: ToolScope) -> dict[str, Any]:
        return session_policy(
            scope,
            bucket=self.bucket,
            table_arn=self.table_arn,
            email_identities=self.identities,
            partition=self.partition,
        )

    def credentials(self, scope: ToolScope) -> ToolCredentials:
        key = scope  # the session policy is a function of the scope (and of this adapter's fixed names)
        now = self._now()
        with self._lock:
            for stale in [k for k, c in self._kept.items() if c.expiration <= now]:
                del self._kept[stale]
            kept = self._kept.get(key)
            if kept is not None and kept.expiration - now > timedelta(seconds=REFRESH_MARGIN_SECONDS):
                self._kept.move_to_end(key)
                return kept
        document = json.dumps(self.policy(scope), sort_keys=True, separators=(",", ":"))
        answer = self.sts.assume_role(
            RoleArn=self.role_arn,
            RoleSessionName=session_name(scope.job_id),
            Policy=document,
            DurationSeconds=TOOL_SESSION_SECONDS,
            Tags=[
                {"Key": "job_id", "Value": scope.job_id},
                {"Key": "tenant_id", "Value": scope.tenant_id},
                {"Key": "step", "Value": scope.step},
            ],
        )["Credentials"]
        expiration = answer["Expiration"]
        if isinstance(expiration, str):
            expiration = datetime.fromisoformat(expiration.replace("Z", "+00:00"))
        if expiration.tzinfo is None:
            expiration = expiration.replace(tzinfo=UTC)
        got = ToolCredentials(answer["AccessKeyId"], answer["SecretAccessKey"], answer["SessionToken"], expiration)
        with self._lock:
            self.assumed += 1
            self._kept[key] = got
            while len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
        return got
