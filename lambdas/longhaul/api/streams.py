"""A job's live output (`core.streams`): its stream records after an id, at once or after a bounded wait.

A reader gives the id of the last record it has (`after`, or SSE's `Last-Event-ID`) and gets every record after it,
oldest first; with a wait it is answered as soon as there is one, or when the job has ended, or when the wait is
over (no records: the client asks again). The job's status is read before its records, so a terminal job whose
records were all given has `ended`: every record of a call is written before its step finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from longhaul.api.jobs import JobService
from longhaul.core.auth import Principal
from longhaul.core.contracts import TERMINAL_STATUSES
from longhaul.core.problems import BadRequest
from longhaul.core.streams import StreamPage, stream_event
from longhaul.services import Services
from longhaul.storage.streams import PAGE_MAX


class StreamPoll(NamedTuple):
    """How a wait reads the stream again: after `first` seconds, doubling up to `longest` (a record is answered at
    most `longest` after it was written: the first text of a call must show within a second)."""

    first: float = 0.05
    longest: float = 0.25
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic


def parse_after(value: str | int | None) -> int:
    """A record id as a client gives it back (`after`, `last_event_id`, `Last-Event-ID`): 400 for anything else."""
    if value is None or value == "":
        return 0
    text = str(value).strip()
    if not text.isdigit() or len(text) > 10:
        raise BadRequest(f"{value!r} is not an id of this stream: give back the `id` of the last record you have")
    return int(text)


class StreamService:
    def __init__(self, services: Services, poll: StreamPoll | None = None) -> None:
        self.services = services
        self.poll = poll or StreamPoll()

    def page(
        self, principal: Principal, job_id: str, after: int, *, wait_seconds: float = 0, any_tenant: bool = False
    ) -> StreamPage:
        """The job's records after `after` (the principal's job, else 404), waiting up to `wait_seconds` for one."""
        jobs = JobService(self.services)
        job = jobs.job(principal, job_id, any_tenant=any_tenant)  # 404 for another tenant's job, before any read
        deadline = self.poll.monotonic() + wait_seconds
        delay = self.poll.first
        while True:
            status = job.status
            records = self.services.streams.after(job_id, after, PAGE_MAX)
            if records or status in TERMINAL_STATUSES or self.poll.monotonic() >= deadline:
                break
            self.poll.sleep(min(delay, max(0.0, deadline - self.poll.monotonic())))
            delay = min(delay * 2, self.poll.longest)
            job = self.services.jobs.get_job(job_id) or job
        ended = status in TERMINAL_STATUSES and len(records) < PAGE_MAX
        return StreamPage(
            job_id=job_id,
            status=status.value,
            records=[stream_event(r) for r in records],
            last_event_id=records[-1].id if records else after,
            ended=ended,
        )
