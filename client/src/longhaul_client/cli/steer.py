"""Steering a job that has not finished: `longhaul update` (deadline, budget, class, review, instructions, agent
limits); a corrected submission replaces a job with `longhaul submit --supersedes <job_id>`."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

import typer

from longhaul.core.limits import MAX_INSTRUCTIONS_CHARS
from longhaul_client.cli.common import CommandError, Key, Output, OutputFormat, Url, session
from longhaul_client.cli.render import job_panel

app = typer.Typer()


@app.command()
def update(
    job_id: Annotated[str, typer.Argument(help="The job's id (job_…).", show_default=False)],
    deadline_seconds: Annotated[
        int | None, typer.Option(help="A new deadline, this many seconds from now.", show_default=False)
    ] = None,
    budget_usd: Annotated[
        str | None, typer.Option(help='A new cost limit in US dollars, e.g. "12.50".', show_default=False)
    ] = None,
    budget_tokens: Annotated[int | None, typer.Option(help="A new token limit.", show_default=False)] = None,
    sla_class: Annotated[str | None, typer.Option(help="interactive, standard or batch.", show_default=False)] = None,
    review_mode: Annotated[str | None, typer.Option(help="always, never or auto.", show_default=False)] = None,
    instructions: Annotated[
        str | None,
        typer.Option(
            help=f"Instructions (up to {MAX_INSTRUCTIONS_CHARS} characters) for the model calls of the steps that "
            "start from now on; @file reads them from a file.",
            show_default=False,
        ),
    ] = None,
    max_turns: Annotated[int | None, typer.Option(help="Turns of each agent step.", show_default=False)] = None,
    max_tool_calls: Annotated[
        int | None, typer.Option(help="Tool calls of each agent step.", show_default=False)
    ] = None,
    operator: Annotated[
        bool, typer.Option("--operator", help="Any tenant's job, with an operator key (/v1/ops/jobs/…).")
    ] = False,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Change a job that has not finished, within its tenant's policy; prints the job as updated."""
    with session(url, key, output) as (client, out):
        change = _change(
            deadline_seconds=deadline_seconds,
            budget_usd=budget_usd,
            budget_tokens=budget_tokens,
            sla_class=sla_class,
            review_mode=review_mode,
            instructions=_instructions(instructions),
            max_turns=max_turns,
            max_tool_calls=max_tool_calls,
        )
        job = client.update(job_id, change, operator=operator)
        if out.json:
            out.document(job)
        else:
            out.console.print(job_panel(job))
            out.note(f"updated: {', '.join(sorted(change))}")


def _instructions(given: str | None) -> str | None:
    if given is None or not given.startswith("@"):
        return given
    path = Path(given[1:])
    try:
        return path.read_text()
    except OSError as error:
        raise CommandError(f"instructions {path}: {error.strerror or error}") from None


def _change(
    *,
    deadline_seconds: int | None,
    budget_usd: str | None,
    budget_tokens: int | None,
    sla_class: str | None,
    review_mode: str | None,
    instructions: str | None,
    max_turns: int | None,
    max_tool_calls: int | None,
) -> dict[str, Any]:
    """The PATCH body of the options given (the API judges each; a usage error when none is)."""
    change: dict[str, Any] = {}
    if deadline_seconds is not None:
        change["deadline_seconds"] = deadline_seconds
    budget: dict[str, Any] = {}
    if budget_usd is not None:
        try:
            Decimal(budget_usd)
        except InvalidOperation:
            raise CommandError(f"--budget-usd {budget_usd!r} is not an amount of dollars") from None
        budget["max_cost_usd"] = budget_usd
    if budget_tokens is not None:
        budget["max_tokens"] = budget_tokens
    if budget:
        change["budget"] = budget
    if sla_class is not None:
        change["sla_class"] = sla_class
    if review_mode is not None:
        change["review"] = {"mode": review_mode}
    if instructions is not None:
        change["instructions"] = instructions
    agent = {name: value for name, value in (("max_turns", max_turns), ("max_tool_calls", max_tool_calls)) if value}
    if agent:
        change["agent"] = agent
    if not change:
        raise CommandError("name something to change (see longhaul update --help)")
    return change
