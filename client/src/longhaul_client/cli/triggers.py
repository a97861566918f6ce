"""Jobs that start themselves: `longhaul schedules …` (a job at every time a cron or rate names) and `longhaul
triggers …` (a job per object dropped in an S3 inbox, or per event an EventBridge pattern matches).

    longhaul schedules create samples/request.json --schedule "cron(0 2 * * ? *)" --timezone Europe/Paris
    longhaul triggers create --type s3 --workflow document-analysis --template template.json
    longhaul triggers upload trg_… contract.pdf
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from longhaul.core.triggers import ScheduleView, TriggerView
from longhaul_client.cli.common import CommandError, Key, Out, Output, OutputFormat, Url, read_json, session

schedules = typer.Typer(
    help="Schedules: a job at every time a cron(…) or rate(…) expression names.", no_args_is_help=True
)
triggers = typer.Typer(
    help="Triggers: a job per object dropped in an S3 inbox, or per event an EventBridge pattern matches.",
    no_args_is_help=True,
)

ScheduleId = Annotated[str, typer.Argument(help="The schedule's id (sch_…).", show_default=False)]
TriggerId = Annotated[str, typer.Argument(help="The trigger's id (trg_…).", show_default=False)]
JOB_FIELDS = ("workflow", "input", "sla_class", "budget", "callback_url")


def _when(value: object) -> str:
    return "-" if value is None else str(value).replace("+00:00", "Z")


def _show_schedule(out: Out, view: ScheduleView) -> None:
    if out.json:
        out.document(view)
        return
    table = Table.grid(padding=(0, 2))
    for label, value in (
        ("schedule", view.schedule_id),
        ("workflow", view.workflow),
        ("when", f"{view.schedule} ({view.timezone})"),
        ("state", "enabled" if view.enabled else "paused"),
        ("next run", _when(view.next_run_at)),
        ("last fired", _when(view.last_fired_at)),
        ("last job", view.last_job_id or "-"),
        ("last error", view.last_error or "-"),
    ):
        table.add_row(f"[bold]{label}[/]", str(value))
    out.console.print(table)


def _show_trigger(out: Out, view: TriggerView) -> None:
    if out.json:
        out.document(view)
        return
    table = Table.grid(padding=(0, 2))
    where = f"s3://{view.bucket}/{view.inbox}" if view.type == "s3" else f"bus {view.event_bus}"
    rows: list[tuple[str, Any]] = [
        ("trigger", view.trigger_id),
        ("type", view.type),
        ("workflow", view.workflow),
        ("from", where),
        ("state", "enabled" if view.enabled else "paused"),
        ("last fired", _when(view.last_fired_at)),
        ("last job", view.last_job_id or "-"),
        ("last error", view.last_error or "-"),
    ]
    if view.batch_seconds:
        rows.insert(4, ("batch window", f"{view.batch_seconds} s"))
    for label, value in rows:
        table.add_row(f"[bold]{label}[/]", str(value))
    out.console.print(table)


# ---------------------------------------------------------------------- schedules


@schedules.command("create")
def create_schedule(
    request: Annotated[
        Path,
        typer.Argument(
            help="A job request (JSON: workflow, input, and optionally sla_class, budget, callback_url); - for stdin.",
            show_default=False,
        ),
    ],
    schedule: Annotated[
        str, typer.Option("--schedule", "-s", help='cron(…) or rate(…), e.g. "cron(0 2 * * ? *)".', show_default=False)
    ],
    timezone: Annotated[str, typer.Option(help="The IANA time zone the cron is read in.")] = "UTC",
    sla_class: Annotated[str | None, typer.Option(help="interactive, standard or batch (default batch).")] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused (resume it later).")] = False,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Create a schedule of the job REQUEST; prints it (`schedule_id` in --output json)."""
    with session(url, key, output) as (client, out):
        job = read_json(request, "request")
        if not isinstance(job, dict):
            raise CommandError(f"request {request} is not a JSON object")
        body: dict[str, Any] = {k: v for k, v in job.items() if k in JOB_FIELDS}
        body |= {"schedule": schedule, "timezone": timezone, "enabled": not paused}
        if sla_class is not None:
            body["sla_class"] = sla_class
        _show_schedule(out, client.create_schedule(body))


@schedules.command("list")
def list_schedules(url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """The tenant's schedules."""
    with session(url, key, output) as (client, out):
        found = client.schedules()
        if out.json:
            out.document({"schedules": found})
            return
        table = Table("schedule", "workflow", "when", "state", "next run", "last job")
        for view in found:
            table.add_row(
                view.schedule_id,
                view.workflow,
                f"{view.schedule} {view.timezone}",
                "enabled" if view.enabled else "paused",
                _when(view.next_run_at),
                view.last_job_id or "-",
            )
        out.console.print(table)


@schedules.command("show")
def show_schedule(
    schedule_id: ScheduleId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT
) -> None:
    """A schedule, when it fires next and its last fire."""
    with session(url, key, output) as (client, out):
        _show_schedule(out, client.schedule(schedule_id))


@schedules.command("pause")
def pause_schedule(
    schedule_id: ScheduleId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT
) -> None:
    """Stop its fires until it is resumed."""
    with session(url, key, output) as (client, out):
        _show_schedule(out, client.update_schedule(schedule_id, {"enabled": False}))


@schedules.command("resume")
def resume_schedule(
    schedule_id: ScheduleId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT
) -> None:
    """Fire it again from its next time."""
    with session(url, key, output) as (client, out):
        _show_schedule(out, client.update_schedule(schedule_id, {"enabled": True}))


@schedules.command("delete")
def delete_schedule(
    schedule_id: ScheduleId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT
) -> None:
    """Delete it (the jobs it started are kept)."""
    with session(url, key, output) as (client, out):
        client.delete_schedule(schedule_id)
        if out.json:
            out.document({"schedule_id": schedule_id, "deleted": True})
        else:
            out.note(f"deleted {schedule_id}")


# ---------------------------------------------------------------------- triggers


@triggers.command("create")
def create_trigger(
    kind: Annotated[str, typer.Option("--type", help="s3 or eventbridge.", show_default=False)],
    workflow: Annotated[str, typer.Option(help="The workflow of the jobs it starts.", show_default=False)],
    template: Annotated[
        Path,
        typer.Option(
            help='The job input template (JSON; {"$event": "detail.x"} takes a field of the event).',
            show_default=False,
        ),
    ],
    pattern: Annotated[
        Path | None, typer.Option(help="eventbridge: the event pattern (JSON file).", show_default=False)
    ] = None,
    event_bus: Annotated[
        str | None, typer.Option(help="eventbridge: the bus (default: the platform's).", show_default=False)
    ] = None,
    prefix: Annotated[str, typer.Option(help="s3: only objects under this folder of the inbox (reports/).")] = "",
    batch_seconds: Annotated[
        int | None, typer.Option(help="s3: one job for the objects of each window this long.", show_default=False)
    ] = None,
    sla_class: Annotated[str, typer.Option(help="interactive, standard or batch.")] = "standard",
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Create a trigger; its pattern and template are checked now (a 422 names what is wrong)."""
    with session(url, key, output) as (client, out):
        body: dict[str, Any] = {
            "type": kind,
            "workflow": workflow,
            "input_template": read_json(template, "template"),
            "sla_class": sla_class,
        }
        if pattern is not None:
            body["event_pattern"] = read_json(pattern, "pattern")
        if event_bus is not None:
            body["event_bus"] = event_bus
        if prefix:
            body["prefix"] = prefix
        if batch_seconds is not None:
            body["batch_seconds"] = batch_seconds
        _show_trigger(out, client.create_trigger(body))


@triggers.command("list")
def list_triggers(url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """The tenant's triggers."""
    with session(url, key, output) as (client, out):
        found = client.triggers()
        if out.json:
            out.document({"triggers": found})
            return
        table = Table("trigger", "type", "workflow", "from", "state", "last job")
        for view in found:
            table.add_row(
                view.trigger_id,
                view.type,
                view.workflow,
                view.inbox or view.event_bus or "-",
                "enabled" if view.enabled else "paused",
                view.last_job_id or "-",
            )
        out.console.print(table)


@triggers.command("show")
def show_trigger(trigger_id: TriggerId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """A trigger and its last fire."""
    with session(url, key, output) as (client, out):
        _show_trigger(out, client.trigger(trigger_id))


@triggers.command("pause")
def pause_trigger(trigger_id: TriggerId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Start no job until it is resumed (objects and events meanwhile start none)."""
    with session(url, key, output) as (client, out):
        _show_trigger(out, client.update_trigger(trigger_id, {"enabled": False}))


@triggers.command("resume")
def resume_trigger(trigger_id: TriggerId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Start jobs again."""
    with session(url, key, output) as (client, out):
        _show_trigger(out, client.update_trigger(trigger_id, {"enabled": True}))


@triggers.command("delete")
def delete_trigger(trigger_id: TriggerId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Delete it (an EventBridge trigger's rule too; the jobs it started are kept)."""
    with session(url, key, output) as (client, out):
        client.delete_trigger(trigger_id)
        if out.json:
            out.document({"trigger_id": trigger_id, "deleted": True})
        else:
            out.note(f"deleted {trigger_id}")


@triggers.command("upload")
def upload_to_trigger(
    trigger_id: TriggerId,
    files: Annotated[list[Path], typer.Argument(help="Documents to drop in its inbox.", show_default=False)],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Drop documents in an S3 trigger's inbox (each starts a job, or joins the open batch window)."""
    with session(url, key, output) as (client, out):
        for path in files:
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
            try:
                client.upload(path, trigger_id=trigger_id)
            except ValueError as refused:
                raise CommandError(str(refused)) from None
            out.note(f"uploaded {path.name} to {trigger_id}'s inbox")
        if out.json:
            out.document({"trigger_id": trigger_id, "uploaded": [p.name for p in files]})
