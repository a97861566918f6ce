"""An operator's commands (a key with the `operator` role): every tenant's jobs, dead letters, replay (or its plan), a
fix of a job's input, escalation, a failed job handed to a person, termination with a message, bulk replay and
termination by filter, dead webhooks and their redelivery, tenant policies, usage reports."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from longhaul.core.contracts import JobStatus
from longhaul_client.cli.common import (
    EXIT_ERROR,
    CommandError,
    Key,
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
    when,
)
from longhaul_client.cli.render import (
    audit_table,
    bulk_outcome,
    bus_event_line,
    dead_letters_table,
    jobs_table,
    replay_plan,
    trace_tree,
    webhooks_table,
)
from longhaul_client.cli.repair import escalation_text, fix_outcome, patch_from_sets
from longhaul_client.cli.report import report_view

app = typer.Typer(
    no_args_is_help=True, help="Operators: every tenant's jobs, dead letters, replay, webhooks, policies."
)
webhooks = typer.Typer(no_args_is_help=True, help="Webhooks whose delivery gave up, and their redelivery.")
policy = typer.Typer(no_args_is_help=True, help="A tenant's policy: budgets, quotas, routes, SLA classes.")
app.add_typer(webhooks, name="webhooks")
bulk = typer.Typer(
    no_args_is_help=True, help="Replay or terminate every job a filter matches (a dry run unless --execute)."
)
app.add_typer(policy, name="policy")
app.add_typer(bulk, name="bulk")
audit = typer.Typer(help="The audit trail: who did what to which resource, and when (`verify` checks its hash chain).")
app.add_typer(audit, name="audit")
Tenant = Annotated[str, typer.Argument(help="The tenant's id.", show_default=False)]


class ReportGroup(StrEnum):
    WORKFLOW = "workflow"
    ROUTE = "route"
    STEP = "step"
    VERSION = "version"


@app.command("jobs")
def ops_jobs(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's jobs.")] = None,
    status: Annotated[JobStatus | None, typer.Option(help="Only jobs in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (newest first).")] = 20,
    workflow: WorkflowOption = None,
    sla_class: SlaClassOption = None,
    created_since: SinceOption = None,
    created_until: UntilOption = None,
    search: SearchOption = None,
    escalated: Annotated[
        bool | None, typer.Option("--escalated/--not-escalated", help="Only escalated jobs, or only the others.")
    ] = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Every tenant's jobs (or one tenant's), newest first; narrowed as `longhaul jobs` does, and by escalation."""
    with session(url, key, output) as (client, out):
        jobs = list(
            client.ops_jobs(
                tenant=tenant,
                status=status,
                limit=limit,
                workflow=workflow,
                sla_class=sla_class,
                created_since=created_since,
                created_until=created_until,
                q=search,
                escalated=escalated,
            )
        )
        if out.json:
            out.document({"jobs": jobs})
        else:
            out.console.print(jobs_table(jobs))


@app.command("trace")
def ops_trace(
    job_id: Annotated[str, typer.Argument(help="The job's id.", show_default=False)],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """A job's trace as an indented tree of its spans, each with its duration (any tenant's job)."""
    with session(url, key, output) as (client, out):
        found = client.trace(job_id, operator=True)
        if out.json:
            out.document(found)
        else:
            out.console.print(trace_tree(found))


@app.command("dead-letters")
def dead_letters(
    step: Annotated[str | None, typer.Option(help="Only this step's.")] = None,
    workflow: Annotated[str | None, typer.Option(help="Only this workflow's.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many (newest first).")] = 100,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Dead letters (failed steps and items), newest first, with the replay that would fix them."""
    with session(url, key, output) as (client, out):
        found = client.dead_letters(step=step, workflow=workflow, tenant=tenant, limit=limit)
        if out.json:
            out.document({"dead_letters": found})
        else:
            out.console.print(dead_letters_table(found))


@app.command("report")
def report(
    since: Annotated[str, typer.Option(help="The window: back from now (7d, 24h, 30m) or from an ISO time.")] = "7d",
    until: Annotated[str | None, typer.Option(help="The window's end (an ISO time); default: now.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's jobs.")] = None,
    by: Annotated[ReportGroup, typer.Option(help="Group the spend by workflow, model route, step or version.")] = (
        ReportGroup.WORKFLOW
    ),
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Spend, p50/p95 step durations, failure kinds, review waits and retry cost of the jobs created in the window
    (every tenant's, or one's), from the analytics export."""
    with session(url, key, output) as (client, out):
        found = client.ops_report(since=since, until=until, tenant=tenant, by=by.value)
        if out.json:
            out.document(found)
        else:
            out.console.print(report_view(found))


@app.command()
def replay(
    job_id: Annotated[str, typer.Argument(help="A failed, cancelled or expired job.", show_default=False)],
    from_step: Annotated[
        str | None,
        typer.Option(help="The first step to run again (default: where the job failed, else its first unfinished)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change and start nothing.")] = False,
    reason: Annotated[str, typer.Option(help="Recorded in the job's events.")] = "replayed with the longhaul command",
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Replay a job from a step, reusing every checkpoint before it; prints which steps and items run again."""
    with session(url, key, output) as (client, out):
        plan = client.replay(job_id, reason=reason, from_step=from_step, dry_run=dry_run)
        if out.json:
            out.document(plan)
        else:
            out.console.print(replay_plan(plan))


@app.command("fix-input")
def fix_input(
    job_id: Annotated[str, typer.Argument(help="A failed, cancelled or dead-lettered job.", show_default=False)],
    reason: Annotated[str, typer.Option(help="Why: recorded with who in the input's version and the job's events.")],
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="PATH=VALUE",
            help="Set one field of the input (dots between parts, numbers index lists: documents.1.upload_id=up_…; "
            "the value is JSON when it reads as JSON, null removes it). Repeatable.",
        ),
    ] = None,
    patch: Annotated[
        Path | None,
        typer.Option(metavar="PATCH.json", help="A JSON merge patch (RFC 7396) on the input (`-`: stdin)."),
    ] = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Fix a job's input (a new version, the earlier kept); prints what changed and the checkpoints a replay redoes."""
    if (patch is None) == (not set_):
        raise typer.BadParameter("give --set PATH=VALUE (one or more) or --patch PATCH.json")
    with session(url, key, output) as (client, out):
        if patch is not None:
            change = read_json(patch, "patch")
            if not isinstance(change, dict) or not change:
                raise CommandError(f"patch {patch}: a merge patch of the input is a JSON object with members")
        else:
            change = patch_from_sets(client.job_input(job_id).input, set_ or [])
        outcome = client.fix_input(job_id, change, reason=reason)
        if out.json:
            out.document(outcome)
        else:
            out.console.print(fix_outcome(outcome))


@app.command()
def escalate(
    job_id: Annotated[str, typer.Argument(help="Any tenant's job.", show_default=False)],
    note: Annotated[str | None, typer.Option(help="What engineering should look at (required unless --clear).")] = None,
    link: Annotated[str | None, typer.Option(help="A ticket or incident URL.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Clear the job's escalation instead.")] = False,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Flag a job for engineering (again: update it; the alarm topic is told), or clear the flag with --clear."""
    if clear == (note is not None) or (clear and link is not None):
        raise typer.BadParameter("give --note (and --link) to escalate, or --clear alone to clear")
    with session(url, key, output) as (client, out):
        if clear:
            client.clear_escalation(job_id)
            if out.json:
                out.document({"job_id": job_id, "escalation": None})
            else:
                out.line(f"{job_id}: escalation cleared")
            return
        assert note is not None
        escalation = client.escalate(job_id, note=note, link=link)
        if out.json:
            out.document({"job_id": job_id, "escalation": escalation})
        else:
            out.console.print(escalation_text(job_id, escalation))


@app.command()
def complete(
    job_id: Annotated[str, typer.Argument(help="A failed job.", show_default=False)],
    group: Annotated[str, typer.Option(help="The group of reviewers who write its result.", show_default=False)],
    note: Annotated[str, typer.Option(help="What they should know (recorded with who asked).", show_default=False)],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Hand a failed job to a person: opens a review of kind `complete`, in which a reviewer submits its result
    (`longhaul review complete REVIEW_ID RESULT.json`)."""
    with session(url, key, output) as (client, out):
        opened = client.request_manual_completion(job_id, assignee_group=group, note=note)
        if out.json:
            out.document(opened)
        else:
            out.line(
                f"{opened.review_id} ({opened.status}): job {opened.job_id} is handed to {opened.assignee_group}; "
                f"a reviewer submits its result with `longhaul review complete {opened.review_id} RESULT.json`"
            )


class EndAs(StrEnum):
    FAILED = "failed"
    CANCELLED = "cancelled"


@app.command()
def terminate(
    job_id: Annotated[str, typer.Argument(help="A job that has not finished, or a failed one.", show_default=False)],
    status: Annotated[EndAs, typer.Option(help="How the job ends.")],
    reason: Annotated[str, typer.Option(help="Why, in your words: recorded in the job's events with your id.")],
    message: Annotated[str, typer.Option(help="What the job's owner reads (at most 1,000 characters).")],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """End a job for good as failed or cancelled, with a message its owner reads (any tenant's job)."""
    with session(url, key, output) as (client, out):
        ended = client.terminate(job_id, status=status.value, reason=reason, message=message)
        if out.json:
            out.document(ended)
        else:
            out.line(f"{ended.job_id} was {ended.previous_status.value}; it is {ended.status.value}: {ended.message}")


def _filter(
    workflow: str | None,
    tenant: str | None,
    status: list[JobStatus] | None,
    failed_step: str | None,
    error_kind: str | None,
    since: datetime | None,
    until: datetime | None,
    escalated: bool | None,
) -> dict[str, Any]:
    given = {
        "workflow": workflow,
        "tenant_id": tenant,
        "status": [s.value for s in status] if status else None,
        "failed_step": failed_step,
        "error_kind": error_kind,
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "escalated": escalated,
    }
    return {k: v for k, v in given.items() if v is not None}


CHANGED_HELP = "The job's status last changed (a failed job: it failed)"
BulkWorkflow = Annotated[str | None, typer.Option(help="Only this workflow's jobs.")]
BulkTenant = Annotated[str | None, typer.Option(help="Only this tenant's jobs.")]
BulkStatus = Annotated[list[JobStatus] | None, typer.Option(help="Only jobs in this status (repeat for several).")]
FailedStep = Annotated[str | None, typer.Option(help="Only jobs whose error is at this step.")]
ErrorKind = Annotated[str | None, typer.Option(help="Only jobs whose error is of this kind (e.g. invalid-input).")]
Since = Annotated[datetime | None, typer.Option(parser=when, metavar="TIME", help=f"{CHANGED_HELP} then or later.")]
Until = Annotated[datetime | None, typer.Option(parser=when, metavar="TIME", help=f"{CHANGED_HELP} then or before.")]
Escalated = Annotated[
    bool | None, typer.Option("--escalated/--not-escalated", help="Only escalated jobs, or only the others.")
]
Execute = Annotated[bool, typer.Option("--execute", help="Do it (without it: a dry run that changes nothing).")]
BulkLimit = Annotated[int, typer.Option(min=1, max=1000, help="At most this many jobs (most recently changed first).")]
BulkReason = Annotated[str | None, typer.Option(help="Why: recorded on each job's events (default: the filter).")]
IdempotencyKey = Annotated[
    str | None,
    typer.Option(help="Executing: the same key answers the same and acts on no job twice (default: a new key)."),
]


@bulk.command("replay")
def bulk_replay(
    workflow: BulkWorkflow = None,
    tenant: BulkTenant = None,
    status: BulkStatus = None,
    failed_step: FailedStep = None,
    error_kind: ErrorKind = None,
    since: Since = None,
    until: Until = None,
    escalated: Escalated = None,
    execute: Execute = False,
    from_step: Annotated[
        str | None, typer.Option(help="Replay every job from this step (default: each its own).")
    ] = None,
    reason: BulkReason = None,
    limit: BulkLimit = 200,
    idempotency_key: IdempotencyKey = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Replay every failed, cancelled or expired job the filter matches (a dry run with each plan unless --execute)."""
    with session(url, key, output) as (client, out):
        found = client.bulk_replay(
            _filter(workflow, tenant, status, failed_step, error_kind, since, until, escalated),
            dry_run=not execute,
            reason=reason,
            from_step=from_step,
            limit=limit,
            idempotency_key=idempotency_key,
        )
        if out.json:
            out.document(found)
        else:
            out.console.print(bulk_outcome(found))


@bulk.command("terminate")
def bulk_terminate(
    end_as: Annotated[EndAs, typer.Option(help="How each job ends.")] = EndAs.CANCELLED,
    message: Annotated[str, typer.Option(help="What each job's owner reads (at most 1,000 characters).")] = "",
    workflow: BulkWorkflow = None,
    tenant: BulkTenant = None,
    status: BulkStatus = None,
    failed_step: FailedStep = None,
    error_kind: ErrorKind = None,
    since: Since = None,
    until: Until = None,
    escalated: Escalated = None,
    execute: Execute = False,
    reason: BulkReason = None,
    limit: BulkLimit = 200,
    idempotency_key: IdempotencyKey = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """End every job the filter matches (not finished, or failed) with --message (a dry run unless --execute)."""
    if not message.strip():
        raise typer.BadParameter("--message is what each job's owner reads; give one", param_hint="--message")
    with session(url, key, output) as (client, out):
        found = client.bulk_terminate(
            _filter(workflow, tenant, status, failed_step, error_kind, since, until, escalated),
            status=end_as.value,
            message=message,
            dry_run=not execute,
            reason=reason,
            limit=limit,
            idempotency_key=idempotency_key,
        )
        if out.json:
            out.document(found)
        else:
            out.console.print(bulk_outcome(found))


@app.command("events")
def bus_events(
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep reading: print each event as it arrives, until Ctrl-C.")
    ] = False,
    wait: Annotated[int, typer.Option(min=0, max=20, help="Seconds to wait for the first event.")] = 0,
    limit: Annotated[int, typer.Option(min=1, max=100, help="At most this many (without --follow).")] = 100,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """The platform's events on its EventBridge bus (job status changes, review requests and decisions), one a line,
    from the operators' tap: each event is printed once, to whichever reader takes it. `--output json`: one JSON
    object a line."""
    with session(url, key, output) as (client, out):
        found = client.follow_bus_events() if follow else client.bus_events(wait=wait, limit=limit)
        try:
            for event in found:
                out.line(event.model_dump_json() if out.json else bus_event_line(event))
        except KeyboardInterrupt:
            out.note("stopped reading the bus's tap")
            raise typer.Exit(130) from None


@webhooks.command("dead")
def dead_webhooks(
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many (newest first).")] = 100,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Webhooks whose delivery gave up, newest first."""
    with session(url, key, output) as (client, out):
        found = client.dead_webhooks(limit=limit)
        if out.json:
            out.document({"webhooks": found})
        else:
            out.console.print(webhooks_table(found))


@webhooks.command("redeliver")
def redeliver(
    webhook_id: Annotated[str, typer.Argument(help="A dead webhook's id (msg_…).", show_default=False)],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Deliver a dead webhook again: the same webhook-id and body, a new series of retries."""
    with session(url, key, output) as (client, out):
        hook = client.redeliver_webhook(webhook_id)
        if out.json:
            out.document(hook)
        else:
            out.line(f"{hook.webhook_id} ({hook.event} of {hook.job_id}) is being delivered again: {hook.status}")


@policy.command("get")
def get_policy(tenant: Tenant, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """A tenant's policy and today's spending."""
    with session(url, key, output) as (client, out):
        view = client.tenant_policy(tenant)
        if out.json:
            out.document(view)
        else:
            out.console.print(Text(json.dumps(view.model_dump(mode="json"), indent=2, ensure_ascii=False)))


@policy.command("set")
def set_policy(
    tenant: Tenant,
    policy_file: Annotated[
        Path, typer.Argument(metavar="POLICY.json", help="The policy (JSON); omitted fields take the defaults.")
    ],
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Set a tenant's policy."""
    with session(url, key, output) as (client, out):
        view = client.set_tenant_policy(tenant, read_json(policy_file, "policy"))
        if out.json:
            out.document(view)
        else:
            out.console.print(Text(json.dumps(view.model_dump(mode="json"), indent=2, ensure_ascii=False)))


@audit.callback(invoke_without_command=True)
def list_audit(
    ctx: typer.Context,
    actor: Annotated[str | None, typer.Option(help="Only this actor (a key id, a subject, or role:tenant).")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only actions on this tenant's resources.")] = None,
    action: Annotated[
        str | None, typer.Option(help="Only this action, e.g. 'POST /v1/ops/jobs/{job_id}/replay'.")
    ] = None,
    since: Annotated[str | None, typer.Option(help="From this instant (ISO 8601, inclusive).")] = None,
    until: Annotated[str | None, typer.Option(help="Before this instant (ISO 8601, exclusive).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (in the order recorded).")] = 100,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """The audit trail, in the order recorded."""
    if ctx.invoked_subcommand is not None:
        return
    with session(url, key, output) as (client, out):
        entries = list(
            client.ops_audit(actor=actor, tenant=tenant, action=action, since=since, until=until, limit=limit)
        )
        if out.json:
            out.document({"entries": entries})
        else:
            out.console.print(audit_table(entries))


@audit.command("verify")
def verify_audit(url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """Read the whole audit trail and check its hash chain here: every entry's hash recomputed, every link to the
    entry before and every number. Exit 0 when it holds, 2 (and what is wrong) when an entry was changed, removed or
    inserted."""
    from longhaul.core.audit import verify

    with session(url, key, output) as (client, out):
        checked = verify(entry.model_dump(mode="json") for entry in client.ops_audit())
        if out.json:
            out.document(checked)
        elif checked.ok:
            out.line(
                f"the audit trail holds: {checked.entries} entries, the last #{checked.last_seq} {checked.last_hash}"
            )
        else:
            for problem in checked.problems:
                out.line(problem)
    if not checked.ok:
        raise typer.Exit(EXIT_ERROR)
