"""The usage report as people read it (`longhaul ops report`, `longhaul usage`): totals, spend per group, step
durations, failure kinds."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from longhaul.core.analytics import Percentiles, UsageReport
from longhaul_client.cli.common import Key, Output, OutputFormat, Url, session


def _seconds(p: Percentiles | None) -> str:
    return "-" if p is None else f"p50 {p.p50:.1f} s, p95 {p.p95:.1f} s"


def _table(*names: str) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in names:
        table.add_column(name, justify="left" if name in ("WORKFLOW", "STEP", "KIND", "GROUP") else "right")
    return table


def report_view(report: UsageReport) -> RenderableType:
    who = f"tenant {report.tenant_id}" if report.tenant_id else "every tenant"
    head = Text.assemble(
        (f"{report.jobs} jobs", "bold"),
        f" of {who}, created {report.since:%Y-%m-%d %H:%M} to {report.until:%Y-%m-%d %H:%M} UTC\n",
        ("spend ", "bold"),
        f"${report.total_usd} (model ${report.model_usd}); ",
        ("retries ", "bold"),
        f"${report.retry_usd}, {report.retry_tokens} tokens not kept\n",
        ("review waits ", "bold"),
        f"{report.review_waits} ({_seconds(report.review_wait_seconds)}); ",
        ("queue wait ", "bold"),
        _seconds(report.queue_wait_seconds),
    )
    spend = _table(
        report.by.upper() if report.by != "version" else "GROUP",
        "JOBS",
        "DONE",
        "FAILED",
        "TOKENS IN",
        "TOKENS OUT",
        "USD",
        "RETRY USD",
    )
    for row in report.spend:
        spend.add_row(
            Text(row.key),
            str(row.jobs),
            str(row.completed),
            str(row.failed),
            str(row.input_tokens),
            str(row.output_tokens),
            row.usd,
            row.retry_usd,
        )
    steps = _table("WORKFLOW", "STEP", "RUNS", "ATTEMPTS", "P50 S", "P95 S")
    for step in report.steps:
        steps.add_row(
            Text(step.workflow),
            Text(step.step),
            str(step.runs),
            str(step.attempts),
            f"{step.seconds.p50:.2f}",
            f"{step.seconds.p95:.2f}",
        )
    failures = _table("WORKFLOW", "STEP", "KIND", "COUNT")
    for failure in report.failures:
        failures.add_row(Text(failure.workflow), Text(failure.step), Text(failure.kind), str(failure.count))
    parts: list[RenderableType] = [head, Text(""), spend, Text("")]
    parts += [steps, Text("")] if report.steps else []
    parts += [failures] if report.failures else [Text("no failed attempts")]
    return Group(*parts)


def usage(
    since: Annotated[str, typer.Option(help="The window: back from now (30d, 24h, 30m) or from an ISO time.")] = "30d",
    until: Annotated[str | None, typer.Option(help="The window's end (an ISO time); default: now.")] = None,
    by: Annotated[str, typer.Option(help="Group the spend by workflow, route, step or version.")] = "workflow",
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Your usage report: spend, step durations, failure kinds, review waits and retry cost of your jobs."""
    with session(url, key, output) as (client, out):
        found = client.usage_report(since=since, until=until, by=by)
        if out.json:
            out.document(found)
        else:
            out.console.print(report_view(found))
