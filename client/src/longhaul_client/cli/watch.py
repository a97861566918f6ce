"""`longhaul watch`: follow a job to its end through the events long-poll.

On a terminal, a live view (redrawn four times a second, so the elapsed time moves while a long-poll waits): the
current step, a progress bar over the steps or a fan-out's items, elapsed time and ETA, tokens and cost so far, the
review it waits for, its webhook, the last event, and under them the model's text as it is written (the latest call's,
read from `GET …/stream`); then the final status. Piped, one line per event instead, then the
final status. With `--output json`, one document at the end: the job and every event.

The exit code says how the job ended: 0 `completed`; 1 `failed`, `cancelled` or `expired`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from longhaul.core.contracts import EventView, JobStatus, JobView
from longhaul.core.streams import OutputDelta, StreamEvent
from longhaul_client.cli.common import EXIT_JOB_NOT_COMPLETED, EXIT_OK, Out
from longhaul_client.cli.render import event_line, final_line, job_panel, streamed_text
from longhaul_client.client import LonghaulClient

REFRESHES_PER_SECOND = 4


def exit_code(job: JobView) -> int:
    return EXIT_OK if job.status == JobStatus.COMPLETED else EXIT_JOB_NOT_COMPLETED


@dataclass
class _View:
    """What the live view shows; updated by the follower and the stream reader, drawn by Rich's refresh thread."""

    job: JobView
    last: EventView | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    texts: dict[str, str] = field(default_factory=dict)  # call id -> its text so far
    writing: tuple[str, str] | None = None  # (label, call id) of the call that wrote last

    def update(self, job: JobView, events: list[EventView]) -> None:
        with self.lock:
            self.job = job
            self.last = events[-1] if events else self.last

    def streamed(self, record: StreamEvent) -> None:
        data = record.data
        if not isinstance(data, OutputDelta):
            return
        with self.lock:
            self.texts[data.call_id] = self.texts.get(data.call_id, "") + data.text
            label = data.step if data.item is None else f"{data.step}[{data.item}]"
            self.writing = (label, data.call_id)

    def render(self) -> RenderableType:
        with self.lock:
            panel = job_panel(self.job, last=self.last)
            if self.writing is None:
                return panel
            label, call_id = self.writing
            return Group(panel, streamed_text(label, self.texts[call_id]))


def _read_stream(client: LonghaulClient, job_id: str, view: _View, operator: bool) -> None:
    """Feed the model's text as it is written into the view (best effort: the events still drive the watch)."""
    try:
        for record in client.stream(job_id, operator=operator):
            view.streamed(record)
    except Exception:  # an API without the stream, a dropped connection: the view shows the job without it
        return


def watch(client: LonghaulClient, job_id: str, out: Out, *, operator: bool = False) -> int:
    """Follow `job_id` to its end as `out` asks (live, lines or one JSON document); returns the exit code."""
    if out.json:
        return _as_document(client, job_id, out, operator)
    if out.console.is_terminal:
        return _live(client, job_id, out, operator)
    return _lines(client, job_id, out, operator)


def _as_document(client: LonghaulClient, job_id: str, out: Out, operator: bool) -> int:
    events: list[EventView] = []
    job: JobView | None = None
    for update in client.updates(job_id, operator=operator):
        events += update.events
        job = update.job
    assert job is not None  # updates end with the finished job
    out.document({"job": job, "events": events})
    return exit_code(job)


def _lines(client: LonghaulClient, job_id: str, out: Out, operator: bool) -> int:
    job: JobView | None = None
    for update in client.updates(job_id, operator=operator):
        for event in update.events:
            out.line(event_line(event))
        job = update.job
    assert job is not None
    out.line(final_line(job).plain)
    return exit_code(job)


def _live(client: LonghaulClient, job_id: str, out: Out, operator: bool) -> int:
    view = _View(client.job(job_id, operator=operator))
    threading.Thread(target=_read_stream, args=(client, job_id, view, operator), daemon=True).start()
    with Live(
        get_renderable=view.render, console=out.console, refresh_per_second=REFRESHES_PER_SECOND, transient=False
    ):
        for update in client.updates(job_id, operator=operator):
            view.update(update.job, update.events)
    out.console.print(final_line(view.job))
    return exit_code(view.job)


def stopped_watching(job_id: str) -> Text:
    return Text(f"stopped watching {job_id}; the job goes on (longhaul watch {job_id})")
