"""A tenant's commands: submit a job (and watch it), watch, status, list, events, result, cancel, pause, resume,
signal, upload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markdown import Markdown

from longhaul.core.contracts import JobStatus, SteerOutcome
from longhaul_client.cli.common import (
    CommandError,
    Key,
    Out,
    Output,
    OutputFormat,
    SearchOption,
    SinceOption,
    SlaClassOption,
    UntilOption,
    Url,
    WorkflowOption,
    read_json,
    session,
)
from longhaul_client.cli.render import event_line, job_panel, jobs_table
from longhaul_client.cli.watch import stopped_watching
from longhaul_client.cli.watch import watch as follow
from longhaul_client.client import LonghaulClient

app = typer.Typer()
JobId = Annotated[str, typer.Argument(help="The job's id (job_…).", show_default=False)]


@app.command()
def submit(
    request: Annotated[
        Path,
        typer.Argument(help="The job request (JSON), e.g. samples/request.json; - reads stdin.", show_default=False),
    ],
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="Submitting again with the same key and request answers the same job (default: a new key)."),
    ] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Then follow the job to its end (see `watch`).")] = False,
    supersedes: Annotated[
        str | None,
        typer.Option(
            help="A job this one replaces: cancelled (reason superseded) if it has not finished, else marked "
            "superseded_by this one.",
            show_default=False,
        ),
    ] = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Submit a job; prints its id (with --watch, then follows it: exit 0 when it completes, 1 when it does not)."""
    with session(url, key, output) as (client, out):
        accepted = client.submit(read_json(request, "request"), idempotency_key=idempotency_key, supersedes=supersedes)
        if not watch:
            if out.json:
                out.document(accepted)
            else:
                out.line(accepted.job_id)
                queued = (
                    f", about {accepted.estimated_start_seconds} s to start" if accepted.estimated_start_seconds else ""
                )
                out.note(f"accepted: {accepted.status.value}{queued} (longhaul watch {accepted.job_id})")
            return
        if not out.json:
            out.line(accepted.job_id)
        code = _follow(client, accepted.job_id, out)
    raise typer.Exit(code)


@app.command()
def watch(job_id: JobId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Follow a job live until it ends: step, progress, elapsed time and ETA, tokens and cost, review, webhook.

    Exit 0 when it completes, 1 when it fails, is cancelled or expires. Piped, one line per event."""
    with session(url, key, output) as (client, out):
        code = _follow(client, job_id, out)
    raise typer.Exit(code)


def _follow(client: LonghaulClient, job_id: str, out: Out) -> int:
    try:
        return follow(client, job_id, out)
    except KeyboardInterrupt:
        out.notes.print(stopped_watching(job_id))
        return 130


@app.command()
def status(job_id: JobId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """A job's status, current step, progress, usage, review and webhook."""
    with session(url, key, output) as (client, out):
        job = client.job(job_id)
        if out.json:
            out.document(job)
        else:
            out.console.print(job_panel(job))


@app.command("jobs")
def list_jobs(
    status: Annotated[JobStatus | None, typer.Option(help="Only jobs in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (newest first).")] = 20,
    workflow: WorkflowOption = None,
    sla_class: SlaClassOption = None,
    created_since: SinceOption = None,
    created_until: UntilOption = None,
    search: SearchOption = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Your jobs, newest first; narrowed by status, workflow, SLA class, creation time, or found by id prefix or
    words of the question (--search)."""
    with session(url, key, output) as (client, out):
        jobs = list(
            client.jobs(
                status=status,
                limit=limit,
                workflow=workflow,
                sla_class=sla_class,
                created_since=created_since,
                created_until=created_until,
                q=search,
            )
        )
        if out.json:
            out.document({"jobs": jobs})
        else:
            out.console.print(jobs_table(jobs))


@app.command()
def events(job_id: JobId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """A job's events so far, oldest first (`watch` follows them as they come)."""
    with session(url, key, output) as (client, out):
        found = list(client.events(job_id, follow=False))
        if out.json:
            out.document({"events": found})
        else:
            for event in found:
                out.line(event_line(event))


@app.command()
def result(
    job_id: JobId,
    markdown: Annotated[bool, typer.Option("--markdown", help="The Markdown rendering as it is stored.")] = False,
    provisional: Annotated[
        bool,
        typer.Option(
            "--provisional", help="Before the job completes, its provisional result (e.g. an unverified draft)."
        ),
    ] = False,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """A completed job's result (shown as its Markdown rendering; --output json for the whole result); with
    --provisional, before it completes, its provisional result."""
    with session(url, key, output) as (client, out):
        if provisional:
            found = client.result(job_id, provisional=True)
            if out.json or found.provisional:
                body = found.result.model_dump(mode="json")
                marks = {"provisional": found.provisional, "as_of_step": found.as_of_step}
                if not out.json:
                    out.line(f"provisional result as of {found.as_of_step} (the job has not completed):")
                out.document({**body, "budget": found.budget, **marks})
                return
        if out.json:
            found = client.result(job_id)
            out.document({**found.result.model_dump(mode="json"), "budget": found.budget})
        elif markdown or not out.console.is_terminal:
            out.line(client.result_markdown(job_id).rstrip("\n"))
        else:
            out.console.print(Markdown(client.result_markdown(job_id)))


@app.command()
def cancel(job_id: JobId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Cancel a job: its execution stops, its completed steps are kept."""
    with session(url, key, output) as (client, out):
        outcome = client.cancel(job_id)
        if out.json:
            out.document(outcome)
            return
        out.line(f"{outcome.job_id} {outcome.status.value}: {outcome.message}")
        if outcome.completed_steps:
            out.line(f"  kept: {', '.join(outcome.completed_steps)}")
        for effect in outcome.side_effects:
            out.line(f"  {effect}")


def _steered(outcome: SteerOutcome, out: Out) -> None:
    if out.json:
        out.document(outcome)
        return
    out.line(f"{outcome.job_id} {outcome.status.value}: {outcome.message}")
    pause = outcome.pause
    if pause is not None and pause.paused_at is not None:
        out.line(f"  paused before {pause.step} since {pause.paused_at.isoformat()} (asked by {pause.requested_by})")


@app.command()
def pause(job_id: JobId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Pause a job at its next step boundary: running items finish and are kept, then it waits with no compute held
    until `resume`. Exit 2 (the API answers 409) when it is paused already or finished."""
    with session(url, key, output) as (client, out):
        _steered(client.pause(job_id), out)


@app.command()
def resume(job_id: JobId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Resume a paused job (it enters the step it paused before), or withdraw a pause it has not reached yet."""
    with session(url, key, output) as (client, out):
        _steered(client.resume(job_id), out)


def _signal_body(data: str) -> Any:
    """`--data`: JSON, or `@file` (`@-`: stdin)."""
    if data.startswith("@"):
        return read_json(Path(data[1:]), "signal body")
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        raise CommandError(f"--data is not JSON: {error}") from None


@app.command()
def signal(
    job_id: JobId,
    name: Annotated[
        str, typer.Argument(help="The signal's name (its workflow's signal step), e.g. price_list.", show_default=False)
    ],
    data: Annotated[
        str,
        typer.Option("--data", "-d", help="The body: a JSON object, or @file (@- reads stdin).", show_default=False),
    ],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Send a signal to a job: its step, waiting or not reached yet, takes it once. Exit 2 with the problem when it
    is unknown (404), its body is refused (422) or it cannot be taken (409: sent already, its wait over, the job
    finished)."""
    body = _signal_body(data)
    if not isinstance(body, dict):
        raise CommandError("the signal's body must be a JSON object")
    with session(url, key, output) as (client, out):
        accepted = client.signal(job_id, name, body)
        if out.json:
            out.document(accepted)
            return
        when = "kept until its step is reached" if accepted.early else "its step resumes"
        out.line(f"{accepted.job_id} {accepted.status.value}: signal {accepted.signal} accepted, {when}")


@app.command()
def upload(
    path: Annotated[
        Path,
        typer.Argument(help="A document (.pdf, .txt, .md) or a ZIP archive of documents.", show_default=False),
    ],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Upload a document or a ZIP archive; prints the upload_id to put in a request."""
    with session(url, key, output) as (client, out):
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            ticket = client.upload(path)
        except ValueError as unknown:
            raise CommandError(str(unknown)) from None
        if out.json:
            media_type = ticket.headers.get("Content-Type")
            out.document({"upload_id": ticket.upload_id, "filename": path.name, "media_type": media_type})
        else:
            out.line(ticket.upload_id)
