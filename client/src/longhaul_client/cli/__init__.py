"""`longhaul`, the command line: submit a job and watch it live, review, cancel, replay; against the local platform
(`make run`) and a deployed stack alike.

    export LONGHAUL_URL=http://127.0.0.1:8000 LONGHAUL_API_KEY=lh_local_alpha_5f3a9c2e7b1d4068
    longhaul submit samples/request.json --watch

The API's address and key come from `LONGHAUL_URL` and `LONGHAUL_API_KEY` (`--url`, `--key` override them); every
command takes `--output json`. Exit codes: 0 done, 1 a watched job did not complete, 2 a usage or API error (the
problem's title and detail on stderr, never a traceback; `LONGHAUL_DEBUG=1` shows one for a fault of this command).
"""

from __future__ import annotations

import os
import sys

import typer

from longhaul_client.cli import admin, jobs, local, mcp, ops, report, reviews, steer, triggers
from longhaul_client.cli.common import EXIT_ERROR

#: `1`: an unforeseen fault of the command shows its traceback (otherwise one line on stderr, exit 2).
DEBUG_ENV = "LONGHAUL_DEBUG"

app = typer.Typer(
    name="longhaul",
    help="Longhaul: submit long-running LLM jobs, watch them live, review, cancel and replay them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.registered_commands += jobs.app.registered_commands
app.registered_commands += steer.app.registered_commands
app.command("reviews")(reviews.reviews)
app.add_typer(reviews.app, name="review")
app.add_typer(ops.app, name="ops")
app.command("usage")(report.usage)
app.command("verify-webhook")(admin.verify_webhook)
app.add_typer(admin.app, name="admin")
app.add_typer(local.app, name="local")
app.command("mcp")(mcp.mcp)
app.add_typer(triggers.schedules, name="schedules")
app.add_typer(triggers.triggers, name="triggers")


def main() -> None:
    """The console script: an unforeseen fault is one line on stderr and exit 2, not a traceback."""
    try:
        app(prog_name="longhaul")
    except Exception as error:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: unexpected {type(error).__name__}: {error} (LONGHAUL_DEBUG=1 shows where)", file=sys.stderr)
        sys.exit(EXIT_ERROR)
