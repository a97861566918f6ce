"""Commands that need no API key: what an operator does to a deployed stack with AWS credentials (`admin`), and the
reference verifier of webhook deliveries (`verify-webhook`).

`admin` finds the stack's table and webhook secrets from its outputs (`longhaul.operations.admin`), with the usual
AWS credentials and region (`--region` overrides it); a new key or secret is printed alone on stdout, once.
"""

from __future__ import annotations

import http.client
import io
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from longhaul.webhooks.signing import TOLERANCE_SECONDS, VerificationFailed, verify
from longhaul_client.cli.common import EXIT_JOB_NOT_COMPLETED, CommandError, Out, Output, OutputFormat, handled

app = typer.Typer(
    no_args_is_help=True, help="A deployed stack, with AWS credentials: API keys, webhook secrets, old versions."
)
Stack = Annotated[str, typer.Option(help="The deployed stack's name, e.g. Longhaul-prod.", show_default=False)]
TenantOption = Annotated[str, typer.Option(help="The tenant's id.", show_default=False)]
Region = Annotated[str | None, typer.Option(help="The stack's region (default: your AWS configuration's).")]
EndpointUrl = Annotated[
    str | None,
    typer.Option(
        help="An AWS endpoint of its own, e.g. the in-memory AWS of `make run`: http://127.0.0.1:8001 (on loopback, "
        "dummy credentials and us-east-1 are used).",
        show_default=False,
    ),
]


class KeyRole(StrEnum):
    TENANT = "tenant"
    REVIEWER = "reviewer"
    PII_REVIEWER = "pii_reviewer"  # a reviewer who sees personal data unredacted
    OPERATOR = "operator"


_REQUEST_LINE = re.compile(rb"^[A-Z]+ \S+ HTTP/\d(\.\d)?\r?$")


@contextmanager
def _aws(output: OutputFormat) -> Iterator[Out]:
    """The command's output; AWS and stack errors end it with their message (exit 2)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from longhaul.operations.admin import AdminError

    out = Out(output)
    with handled(out):
        try:
            yield out
        except (AdminError, BotoCoreError, ClientError) as error:
            raise CommandError(str(error)) from None


def _session(region: str | None, endpoint_url: str | None) -> Any:
    from longhaul.operations.admin import session_for

    return session_for(region, endpoint_url)


@app.command("create-key")
def create_key(
    stack: Stack,
    tenant: TenantOption,
    role: Annotated[
        KeyRole,
        typer.Option(
            help="A reviewer acts for the tenant's reviews only; a pii_reviewer also sees their personal data "
            "unredacted (the tenant's policy `redact`)."
        ),
    ] = KeyRole.TENANT,
    groups: Annotated[
        str | None,
        typer.Option(
            help="A reviewer's groups, comma-separated (e.g. analysts,analysis-leads): it sees and decides only the "
            "reviews assigned to one of them. Without it, a reviewer key reviews every group of its tenant.",
            show_default=False,
        ),
    ] = None,
    region: Region = None,
    endpoint_url: EndpointUrl = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Create an API key: printed once (only its hash is stored)."""
    from longhaul.core.auth import key_hash
    from longhaul.operations import admin

    with _aws(output) as out:
        chosen = admin.parse_groups(groups) if groups is not None else None
        if chosen is not None and role not in (KeyRole.REVIEWER, KeyRole.PII_REVIEWER):
            raise CommandError("--groups is for a reviewer key (--role reviewer)")
        session = _session(region, endpoint_url)
        outputs = admin.stack_outputs(session.client("cloudformation"), stack)
        table = session.resource("dynamodb").Table(outputs.table_name)
        key = admin.create_key(table, tenant, role.value, groups=chosen)
        key_id = key_hash(key)[:12]
        created = {"key_id": key_id, "tenant_id": tenant, "role": role.value}
        admin.record_command(session, table, "create-key", target=f"key {key_id}", tenant_id=tenant, after=created)
        if out.json:
            document: dict[str, Any] = {"key": key, "tenant_id": tenant, "role": role.value, "stack": stack}
            if role in (KeyRole.REVIEWER, KeyRole.PII_REVIEWER):
                document["groups"] = chosen
            out.document(document)
            return
        out.line(key)  # alone on stdout: KEY=$(longhaul admin create-key …)
        scope = ""
        if role in (KeyRole.REVIEWER, KeyRole.PII_REVIEWER):
            scope = f" (groups: {', '.join(chosen)})" if chosen is not None else " (every group of the tenant)"
        out.note(
            f"created a {role.value} key{scope} for tenant {tenant!r} in {stack}; shown once, only its hash is stored"
        )


@app.command("revoke-key")
def revoke_key(
    stack: Stack,
    key: Annotated[str | None, typer.Option("--key", help="The key to revoke.", show_default=False)] = None,
    key_hash: Annotated[
        str | None, typer.Option(help="Or its SHA-256 (hex), when the key itself is lost.", show_default=False)
    ] = None,
    region: Region = None,
    endpoint_url: EndpointUrl = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Revoke an API key: its next request is refused (401)."""
    from longhaul.operations import admin

    if (key is None) == (key_hash is None):
        raise typer.BadParameter("give --key or --key-hash", param_hint="--key")
    with _aws(output) as out:
        session = _session(region, endpoint_url)
        outputs = admin.stack_outputs(session.client("cloudformation"), stack)
        table = session.resource("dynamodb").Table(outputs.table_name)
        revoked = admin.revoke_key(table, key=key, digest=key_hash)
        before = {"key_id": revoked.key_id, "tenant_id": revoked.tenant_id, "role": revoked.role}
        admin.record_command(
            session, table, "revoke-key", target=f"key {revoked.key_id}", tenant_id=revoked.tenant_id, before=before
        )
        if out.json:
            out.document({"key_id": revoked.key_id, "tenant_id": revoked.tenant_id, "role": revoked.role})
        else:
            out.line(f"revoked the {revoked.role} key {revoked.key_id}… of tenant {revoked.tenant_id!r} in {stack}")


@app.command("rotate-key")
def rotate_key(
    stack: Stack,
    key: Annotated[str | None, typer.Option("--key", help="The key to replace.", show_default=False)] = None,
    key_hash: Annotated[
        str | None, typer.Option(help="Or its SHA-256 (hex), when the key itself is lost.", show_default=False)
    ] = None,
    overlap_hours: Annotated[
        float, typer.Option(min=0, help="How long the old key keeps working beside the new one.")
    ] = 24,
    region: Region = None,
    endpoint_url: EndpointUrl = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Replace an API key with a new one of the same tenant, role and groups: printed once; the old key keeps working
    for the overlap, then is refused (401) within 10 s."""
    from longhaul.operations import admin

    if (key is None) == (key_hash is None):
        raise typer.BadParameter("give --key or --key-hash", param_hint="--key")
    with _aws(output) as out:
        session = _session(region, endpoint_url)
        outputs = admin.stack_outputs(session.client("cloudformation"), stack)
        table = session.resource("dynamodb").Table(outputs.table_name)
        rotated = admin.rotate_key(table, key=key, digest=key_hash, overlap=timedelta(hours=overlap_hours))
        admin.record_command(
            session,
            table,
            "rotate-key",
            target=f"key {rotated.previous_key_id}",
            tenant_id=rotated.tenant_id,
            after={
                "key_id": rotated.key_id,
                "role": rotated.role,
                "previous_expires_at": rotated.previous_expires_at.isoformat(),
            },
        )
        if out.json:
            out.document(
                {
                    "key": rotated.key,
                    "key_id": rotated.key_id,
                    "tenant_id": rotated.tenant_id,
                    "role": rotated.role,
                    "previous_key_id": rotated.previous_key_id,
                    "previous_expires_at": rotated.previous_expires_at.isoformat(),
                }
            )
            return
        out.line(rotated.key)  # alone on stdout: NEW=$(longhaul admin rotate-key …)
        out.note(
            f"created a {rotated.role} key for tenant {rotated.tenant_id!r} in {stack}, shown once; the old key "
            f"{rotated.previous_key_id}… works until {rotated.previous_expires_at:%Y-%m-%d %H:%M:%S} UTC"
        )


@app.command("rotate-webhook-secret")
def rotate_webhook_secret(
    stack: Stack,
    tenant: TenantOption,
    grace_hours: Annotated[
        float, typer.Option(min=0, help="How long the previous secret keeps signing beside the new one.")
    ] = 24,
    region: Region = None,
    endpoint_url: EndpointUrl = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Make a new webhook signing secret for a tenant (printed once); the previous one keeps signing for the grace
    period, so receivers can switch at their pace."""
    from longhaul.operations import admin

    with _aws(output) as out:
        session = _session(region, endpoint_url)
        outputs = admin.stack_outputs(session.client("cloudformation"), stack)
        secret = admin.rotate_webhook_secret(
            session.client("secretsmanager"), outputs, tenant, grace=timedelta(hours=grace_hours)
        )
        admin.record_command(
            session,
            session.resource("dynamodb").Table(outputs.table_name),
            "rotate-webhook-secret",
            target=f"webhook secret of {tenant}",
            tenant_id=tenant,
            after={"tenant_id": tenant, "grace_hours": grace_hours},  # never the secret
        )
        if out.json:
            out.document({"secret": secret, "tenant_id": tenant, "grace_hours": grace_hours})
            return
        out.line(secret)
        out.note(f"new webhook secret of tenant {tenant!r}; the previous one also signs for {grace_hours:g} h")


@app.command("prune-versions")
def prune_versions(
    stack: Stack,
    apply: Annotated[
        bool, typer.Option("--apply", help="Delete what the plan lists (default: only print it).")
    ] = False,
    region: Region = None,
    endpoint_url: EndpointUrl = None,
) -> None:
    """Print the state machine and step function versions no alias routes to and no live job runs; delete them with
    --apply."""
    from longhaul.operations import admin

    with _aws(OutputFormat.TEXT):
        admin.prune_versions(_session(region, endpoint_url), stack, apply=apply, out=sys.stdout)


def verify_webhook(
    secret: Annotated[
        list[str],
        typer.Option(help="The tenant's whsec_… secret (repeat it during a rotation).", show_default=False),
    ],
    delivery: Annotated[
        Path | None,
        typer.Argument(help="The delivery as an HTTP message (headers, a blank line, the body); default stdin."),
    ] = None,
    tolerance: Annotated[int, typer.Option(min=0, help="Seconds a timestamp may be away from now.")] = (
        TOLERANCE_SECONDS
    ),
    output: Output = OutputFormat.TEXT,
) -> None:
    """Verify a webhook delivery (Standard Webhooks): prints its webhook-id (deduplicate by it), exit 0; or why it
    was rejected, exit 1.

        longhaul verify-webhook --secret whsec_… < delivery.http
    """
    out = Out(output)
    with handled(out):
        try:
            raw = delivery.read_bytes() if delivery is not None else sys.stdin.buffer.read()
        except OSError as error:
            raise CommandError(f"{delivery}: {error.strerror or error}") from None
        headers, body = parse_delivery(raw)
        try:
            webhook_id = verify(body, headers, secret, tolerance_seconds=tolerance)
        except (VerificationFailed, ValueError) as failed:
            if out.json:
                out.document({"verified": False, "reason": str(failed)})
            out.error(f"rejected: {failed}")
            raise typer.Exit(EXIT_JOB_NOT_COMPLETED) from None
    if out.json:
        out.document({"verified": True, "webhook_id": webhook_id})
    else:
        out.line(webhook_id)


def parse_delivery(raw: bytes) -> tuple[dict[str, str], bytes]:
    """A delivery saved as an HTTP message: an optional request line (`POST /hooks HTTP/1.1`), the headers, a blank
    line, then the body exactly as received (cut at `Content-Length` when there is one: an editor's final newline is
    not part of what was signed)."""
    stream = io.BytesIO(raw)
    first = stream.readline()
    if not _REQUEST_LINE.match(first):
        stream.seek(0)
    try:
        message = http.client.parse_headers(stream)
    except http.client.HTTPException as error:
        raise CommandError(f"the delivery's headers cannot be read: {error}") from None
    body = stream.read()
    length = message.get("Content-Length")
    if length is not None and length.strip().isdigit():
        body = body[: int(length)]
    return {name.lower(): value for name, value in message.items()}, body
