"""`longhaul local`: what only the local platform (`make run`) offers.

`longhaul local token` asks the running platform's OIDC issuer (its front door, `POST /local/token` at `LONGHAUL_URL`)
for a signed JWT and prints it alone on stdout, so it goes where a key goes:

    export LONGHAUL_API_KEY=$(longhaul local token --tenant alpha --role tenant)
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

import httpx
import typer

from longhaul_client.cli.common import URL_ENV, CommandError, Out, Output, OutputFormat, handled

app = typer.Typer(no_args_is_help=True, help="The local platform (make run): sign in with a JWT of its own issuer.")
#: Where `make run` serves, when neither `--url` nor `LONGHAUL_URL` says.
DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_PATH = "/local/token"
_SPAN = re.compile(r"^(\d+)\s*([smhd]?)$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class TokenRole(StrEnum):
    TENANT = "tenant"
    REVIEWER = "reviewer"
    PII_REVIEWER = "pii_reviewer"
    OPERATOR = "operator"


def ttl_seconds(value: str) -> int:
    """`90s`, `15m`, `2h`, `1d` or plain seconds → seconds (positive)."""
    found = _SPAN.match(value.strip().lower())
    if found is None or int(found[1]) == 0:
        raise typer.BadParameter(f"{value!r} is not a positive span like 90s, 15m, 2h or 1d")
    return int(found[1]) * _SECONDS[found[2]]


@app.command("token")
def token(
    tenant: Annotated[str, typer.Option(help="The tenant the token acts for.", show_default=False)],
    role: Annotated[TokenRole, typer.Option(help="tenant, reviewer, pii_reviewer or operator.")] = TokenRole.TENANT,
    groups: Annotated[
        str | None,
        typer.Option(
            help="A reviewer's groups, comma-separated (e.g. analysts,analysis-leads): it sees and decides only the "
            "reviews assigned to one of them. Without it, a reviewer token reviews every group of its tenant.",
            show_default=False,
        ),
    ] = None,
    ttl: Annotated[str, typer.Option(help="How long the token lives: 90s, 15m, 2h, 1d (at most 1d).")] = "15m",
    subject: Annotated[
        str | None,
        typer.Option(
            help="The token's subject (`sub`), as audit records name it (default: local-<role>@<tenant>).",
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", envvar=URL_ENV, show_envvar=True, help=f"The local platform's API (default {DEFAULT_URL})."
        ),
    ] = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Print a JWT of the local platform's issuer: use it as `Authorization: Bearer <token>`, where a key goes."""
    out = Out(output)
    with handled(out):
        chosen = [g.strip() for g in groups.split(",") if g.strip()] if groups is not None else None
        if chosen is not None and role not in (TokenRole.REVIEWER, TokenRole.PII_REVIEWER):
            raise CommandError("--groups is for a reviewer's token (--role reviewer)")
        body: dict[str, Any] = {"tenant": tenant, "role": role.value, "ttl_seconds": ttl_seconds(ttl)}
        if chosen is not None:
            body["groups"] = chosen
        if subject:
            body["subject"] = subject
        base = (url or DEFAULT_URL).rstrip("/")
        try:
            answer = httpx.post(base + TOKEN_PATH, json=body, timeout=30)
        except httpx.HTTPError as unreachable:
            raise CommandError(
                f"the local platform at {base} did not answer ({unreachable}); is `make run` up?"
            ) from None
        if answer.status_code == 404:
            raise CommandError(f"{base} has no local issuer: `longhaul local token` is for the local platform only")
        if answer.status_code != 200:
            detail = answer.json().get("detail") if answer.headers.get("content-type", "").endswith("json") else ""
            raise CommandError(f"the local issuer refused: {detail or answer.text}")
        minted = answer.json()
        if out.json:
            out.document(minted)
            return
        out.line(str(minted["token"]))  # alone on stdout: TOKEN=$(longhaul local token …)
        scope = f" (groups: {', '.join(chosen)})" if chosen is not None else ""
        out.note(f"a {role.value} token{scope} of tenant {tenant!r} for {minted['subject']}, expiring at Unix "
                 f"{minted['expires_at']}")  # fmt: skip
