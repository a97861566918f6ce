"""How the commands show things to people (the `text` output): a job as a live or static panel, tables, event lines.

Whatever the API returns that a person or a document wrote (names, messages, comments) is shown as text, never read
as Rich markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from longhaul.core.audit import AuditEntry
from longhaul.core.bus import BusEvent
from longhaul.core.contracts import (
    BulkOutcome,
    DeadLetter,
    EventView,
    JobStatus,
    JobTrace,
    JobView,
    ReplayOutcome,
    TraceSpan,
)
from longhaul.review.contracts import ReviewDetail, ReviewView
from longhaul.webhooks.views import WebhookView

STYLE = {
    JobStatus.QUEUED: "cyan",
    JobStatus.RUNNING: "blue",
    JobStatus.RETRYING: "yellow",
    JobStatus.WAITING_FOR_REVIEW: "magenta",
    JobStatus.COMPLETED: "green",
    JobStatus.FAILED: "red",
    JobStatus.CANCEL_REQUESTED: "yellow",
    JobStatus.CANCELLED: "yellow",
    JobStatus.EXPIRED: "red",
}
BAR_WIDTH = 32


def status_text(status: JobStatus) -> Text:
    return Text(status.value, style=f"bold {STYLE.get(status, '')}")


def duration(seconds: float) -> str:
    """`0:07`, `12:05`, `1:02:03`."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def clock(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%H:%M:%S") if moment else "-"


def elapsed(job: JobView, now: datetime | None = None) -> float:
    """Seconds the job has run (or ran): from its start (its submission while queued) to its end, or to now."""
    start = job.started_at or job.created_at
    end = job.finished_at or now or datetime.now(UTC)
    return (end - start).total_seconds()


# A job that stopped before completing: its progress says what it had done and that it stopped.
STOPPED = frozenset({JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.EXPIRED})


def progress_line(job: JobView) -> str:
    """`parse_documents 312/1,000 documents` inside a fan-out, else `step 6/12`; a stopped job's own words (what it
    had done and that it stopped: `cancelled: 9 of 11 steps done (at review)`)."""
    progress = job.progress
    if job.status in STOPPED and progress.message:
        return progress.message
    if progress.unit != "steps" and job.current_step:
        return f"{job.current_step} {progress.completed:,}/{progress.total:,} {progress.unit}"
    return f"step {progress.completed}/{progress.total}"


def job_panel(job: JobView, *, now: datetime | None = None, last: EventView | None = None) -> RenderableType:
    """The job as `watch` shows it live (and `status` once): status and elapsed time, a progress bar over its steps or
    its fan-out's items with the ETA, the current step, tokens and cost so far, the review it waits for, its webhook,
    and the last event."""
    head = Text.assemble(
        (job.job_id, "bold"), "  ", job.workflow, "  ", status_text(job.status), f"  {duration(elapsed(job, now))}"
    )
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    progress = job.progress
    total = max(progress.total, 1)
    eta = eta_text(job)
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(
            total=total,
            completed=min(progress.completed, total),
            width=BAR_WIDTH,
            complete_style="blue",
            finished_style="green",
        ),
        Text(progress_line(job) + eta),
    )
    grid.add_row("progress", bar)
    if job.current_step:
        grid.add_row("step", Text(job.current_step))
    usage = job.usage
    grid.add_row(
        "tokens",
        Text(f"{usage.input_tokens:,} in · {usage.output_tokens:,} out · ${usage.cost_usd}"),
    )
    if job.status == JobStatus.QUEUED and job.estimated_start_seconds:
        grid.add_row("queued", Text(f"waiting for a slot, about {duration(job.estimated_start_seconds)} to start"))
    if job.waiting is not None:
        grid.add_row("waiting", Text(wait_line(job, now), style="yellow"))
    if job.provisional is not None:
        grid.add_row(
            "provisional",
            Text(f"a result as of {job.provisional.as_of_step}: longhaul result {job.job_id} --provisional"),
        )
    if job.review is not None:
        review = job.review
        grid.add_row(
            "review",
            Text(
                f"{review.status} · {review.assignee_group} · since {clock(review.since)}, deadline "
                f"{clock(review.deadline)} · {review.reminders} reminder(s) · {review.review_id}"
            ),
        )
    if job.callback is not None:
        hook = job.callback
        error = f" · {hook.last_error}" if hook.last_error else ""
        grid.add_row("webhook", Text(f"{hook.status} · {hook.event} · {hook.attempts} attempt(s){error}"))
    if job.error is not None:
        grid.add_row("error", Text(error_line(job), style="red"))
    if job.deadline_at is not None and not job.finished_at:
        grid.add_row("deadline", Text(clock(job.deadline_at)))
    if job.instructions:
        shown = job.instructions if len(job.instructions) <= 80 else job.instructions[:79] + "…"
        grid.add_row("instructions", Text(shown))
    if job.superseded_by or job.supersedes:
        relation = f"superseded by {job.superseded_by}" if job.superseded_by else f"supersedes {job.supersedes}"
        grid.add_row("replaces" if not job.superseded_by else "replaced", Text(relation))
    if last is not None:
        grid.add_row("last", Text(event_line(last)))
    return Group(head, grid)


def eta_text(job: JobView) -> str:
    """` · ETA 3m 10s` (with `(so far)` when it comes from the job's own pace, no history yet), or nothing."""
    progress = job.progress
    if not progress.eta_seconds:
        return ""
    basis = " (own pace)" if progress.eta_basis == "current_step" else ""
    return f" · ETA {duration(progress.eta_seconds)}{basis}"


def wait_line(job: JobView, now: datetime | None = None) -> str:
    """What the job waits on: `rate_limited until 12:03:05 (in 4s) · draft_answer: …`."""
    wait = job.waiting
    if wait is None:
        return ""
    parts: list[str] = [wait.reason]
    if wait.until is not None:
        left = (wait.until - (now or datetime.now(UTC))).total_seconds()
        parts.append(f"until {clock(wait.until)}" + (f" (in {duration(left)})" if left > 0 else ""))
    line = " ".join(parts)
    return f"{line} · {wait.detail}" if wait.detail else line


def status_cell(job: JobView) -> Text:
    """The status, and what the job waits on (`retrying (rate_limited)`)."""
    cell = status_text(job.status)
    if job.waiting is not None:
        cell.append(f" ({job.waiting.reason})", style="yellow")
    return cell


def error_line(job: JobView) -> str:
    error = job.error
    if error is None:
        return ""
    where = f" at {error.step}" if error.step else ""
    items = f" (items {', '.join(map(str, error.items))})" if error.items else ""
    return f"{error.kind}{where}{items}: {error.message}"


def final_line(job: JobView) -> Text:
    """How a watched job ended, in one line."""
    spent = f"{job.usage.input_tokens + job.usage.output_tokens:,} tokens · ${job.usage.cost_usd}"
    took = duration(elapsed(job))
    if job.status == JobStatus.COMPLETED:
        return Text.assemble(("completed", "bold green"), f" in {took} · {spent}")
    why = f": {error_line(job)}" if job.error else ""
    return Text.assemble(status_text(job.status), f" after {took} · {spent}{why}")


def event_line(event: EventView) -> str:
    """One event on one line: time, seq, type, step[item], status, attempt and the detail's short values."""
    where = f" {event.step}" if event.step else ""
    where += f"[{event.item}]" if event.item is not None else ""
    parts = [f"{event.at.astimezone(UTC).strftime('%H:%M:%S.%f')[:-3]}", f"#{event.seq}", event.type + where]
    if event.status is not None:
        parts.append(f"→ {event.status.value}")
    if event.attempt is not None:
        parts.append(f"attempt {event.attempt}")
    short = [f"{k}={v}" for k, v in event.detail.items() if isinstance(v, str | int | float | bool) and k != "by"]
    if short:
        text = " ".join(short)
        parts.append(text if len(text) <= 160 else text[:157] + "…")
    return "  ".join(parts)


def jobs_table(jobs: Iterable[JobView]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("JOB", no_wrap=True)
    for name in ("WORKFLOW", "STATUS", "PROGRESS", "CREATED"):
        table.add_column(name)
    for job in jobs:
        created = job.created_at.strftime("%Y-%m-%d %H:%M")
        table.add_row(job.job_id, job.workflow, status_cell(job), progress_line(job), created)
    return table


def reviews_table(reviews: Iterable[ReviewView]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("REVIEW", "JOB", "STATUS", "GROUP", "DEADLINE", "REASONS"):
        table.add_column(name, no_wrap=name in ("REVIEW", "JOB"))
    for review in reviews:
        table.add_row(
            review.review_id,
            review.job_id,
            review.status,
            review.assignee_group,
            review.deadline.strftime("%Y-%m-%d %H:%M"),
            Text("; ".join(review.reasons)),
        )
    return table


def review_detail(review: ReviewDetail) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    grid.add_row("review", Text(f"{review.review_id} · {review.status} · job {review.job_id} ({review.workflow})"))
    grid.add_row("group", Text(f"{review.assignee_group} · deadline {review.deadline:%Y-%m-%d %H:%M} UTC"))
    grid.add_row("why", Text("; ".join(review.reasons) or "-"))
    if review.kind == "complete":  # a failed job handed to a person: the draft is where its result starts from
        grid.add_row("kind", Text("complete: write the job's result (`longhaul review complete REVIEW_ID FILE`)"))
    if review.decision:
        grid.add_row("decided", Text(f"{review.decision} · {review.comment or ''}"))
    evidence = Table(box=None, pad_edge=False, header_style="bold", title="evidence", title_justify="left")
    for name in ("DOCUMENT", "PAGE", "VERIFIED", "QUOTE"):
        evidence.add_column(name)
    for item in review.evidence:
        evidence.add_row(Text(item.document), str(item.page or "-"), "yes" if item.verified else "NO", Text(item.quote))
    draft = Text(json.dumps(review.draft, indent=2, ensure_ascii=False))
    return Group(grid, Text("draft", style="bold"), draft, evidence)


def replay_plan(plan: ReplayOutcome) -> RenderableType:
    """Which steps and items run again, and what is kept."""
    head = "Dry run of a replay" if plan.dry_run else "Replay started"
    lines = [
        Text.assemble((head, "bold"), f" of {plan.job_id} from {plan.from_step}"),
        Text(f"  attempt {plan.attempt}, execution {plan.execution}; the job is {plan.status.value}"),
        Text(f"  steps that run again: {', '.join(plan.rerun_steps) or 'none'}"),
    ]
    if plan.rerun_named:
        lines.append(Text("  items that run again:"))
        lines += [
            Text(f"    {item.step} #{item.item} ({item.unit}{': ' + item.name if item.name else ''})")
            for item in plan.rerun_named
        ]
    elif plan.rerun_items:
        lines.append(Text("  items that run again:"))
        lines += [Text(f"    {step}: {', '.join(map(str, items))}") for step, items in plan.rerun_items.items()]
    kept = sum(len(items) for items in plan.kept_items.values())
    lines.append(Text(f"  items kept (their checkpoints reused): {kept}"))
    if plan.undecided_reviews:
        reviews = ", ".join(plan.undecided_reviews)
        lines.append(Text(f"  reviews never decided, asked again before anything after them: {reviews}"))
    if plan.estimated_start_seconds:
        lines.append(Text(f"  waits for an admission slot: estimated to start in {plan.estimated_start_seconds} s"))
    if plan.dry_run:
        lines.append(Text("  nothing was changed or started", style="dim"))
    return Group(*lines)


def bulk_outcome(outcome: BulkOutcome) -> RenderableType:
    """A bulk action's jobs, each with what was (or would be) done, then the counts."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("JOB", no_wrap=True)
    for name in ("TENANT", "WORKFLOW", "STATUS", "ERROR", "OUTCOME", "DETAIL"):
        table.add_column(name)
    for job in outcome.jobs:
        if job.plan is not None:
            detail = f"from {job.plan.from_step}: {', '.join(job.plan.rerun_steps) or 'nothing'} again"
        elif job.terminated is not None:
            detail = f"ends {job.terminated.status.value}"
        else:
            detail = job.problem or ""
        error = f"{job.error_kind} at {job.failed_step}" if job.error_kind else ""
        table.add_row(job.job_id, job.tenant_id, job.workflow, job.status.value, error, job.outcome, Text(detail))
    head = f"{'Dry run of a bulk' if outcome.dry_run else 'Bulk'} {outcome.action}: {outcome.matched} job(s)"
    counts = ", ".join(f"{n} {what}" for what, n in sorted(outcome.counts.items())) or "no job matched"
    lines: list[RenderableType] = [Text(head, style="bold"), table, Text(counts)]
    if outcome.more:
        lines.append(Text("more jobs matched than the limit: act again for the rest", style="yellow"))
    if outcome.dry_run:
        lines.append(Text("nothing was changed; --execute to do it", style="dim"))
    elif outcome.idempotency_key:
        lines.append(Text(f"kept under Idempotency-Key {outcome.idempotency_key} (24 h)", style="dim"))
    return Group(*lines)


def dead_letters_table(letters: Iterable[DeadLetter]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("JOB", "TENANT", "STEP", "ITEM", "ERROR", "FAILED", "MESSAGE"):
        table.add_column(name, no_wrap=name == "JOB")
    for letter in letters:
        item = "" if letter.item is None else f"{letter.item}{' ' + letter.item_name if letter.item_name else ''}"
        table.add_row(
            letter.job_id,
            letter.tenant_id or "",
            letter.step,
            Text(item),
            letter.kind,
            letter.failed_at.strftime("%Y-%m-%d %H:%M"),
            Text(letter.message),
        )
    return table


def webhooks_table(webhooks: Iterable[WebhookView]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("WEBHOOK", "JOB", "TENANT", "EVENT", "ATTEMPTS", "LAST ERROR"):
        table.add_column(name, no_wrap=name in ("WEBHOOK", "JOB"))
    for hook in webhooks:
        table.add_row(
            hook.webhook_id, hook.job_id, hook.tenant_id, hook.event, str(hook.attempts), Text(hook.last_error or "")
        )
    return table


def audit_table(entries: Iterable[AuditEntry]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("#", "AT", "ACTOR", "ROLE", "ACTION", "TARGET", "TENANT", "OUTCOME"):
        table.add_column(name, no_wrap=name in ("#", "AT"))
    for entry in entries:
        table.add_row(
            str(entry.seq),
            entry.at,
            entry.actor_id,
            entry.actor.role,
            entry.action,
            Text(entry.target),
            entry.tenant_id or "",
            str(entry.outcome),
        )
    return table


#: How much of the model's latest text `watch` shows under the job (its last characters).
STREAM_TAIL_CHARS = 480


def streamed_text(label: str, text: str) -> RenderableType:
    """The model's text as it is being written (its tail), under the job's panel in `watch`."""
    tail = text[-STREAM_TAIL_CHARS:]
    if len(text) > len(tail):
        tail = "…" + tail
    return Text.assemble((f"{label} › ", "dim"), tail)


def trace_tree(found: JobTrace) -> Text:
    """`name  duration` per span, indented under its parent, in order of start; spans whose parent is not in the trace
    (none, when the trace is whole) are shown at the top level, marked."""
    ids = {span.span_id for span in found.spans}
    children: dict[str | None, list[TraceSpan]] = {}
    for span in found.spans:
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    text = Text(f"trace {found.trace_id} ({len(found.spans)} spans)\n", style="bold")

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start):
            seconds = (span.end - span.start).total_seconds()
            orphan = " (parent not in the trace)" if depth == 0 and span.parent_id is not None else ""
            style = "red" if span.status == "error" else ""
            text.append(f"{'  ' * depth}{span.name}  {seconds:.3f} s{orphan}\n", style=style)
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return text


def bus_event_line(event: BusEvent) -> str:
    """One event of the bus on a line: when, what, the job (and the review), the change, its `seq`."""
    detail = event.detail
    what = f"{event.time}  {event.detail_type}  {detail.get('job_id', '-')}"
    if event.detail_type == "Job Status Changed":
        what += f"  {detail.get('previous_status') or '-'} -> {detail.get('status')}"
    if detail.get("review_id"):
        what += f"  review {detail['review_id']}"
    if detail.get("decision"):
        what += f" {detail['decision']}"
    return f"{what}  seq {detail.get('seq')}  tenant {detail.get('tenant_id')}  workflow {detail.get('workflow')}"
