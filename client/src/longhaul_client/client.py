"""The typed Python client of the Longhaul API, over httpx, speaking the API's own pydantic contracts.

    with LonghaulClient("http://127.0.0.1:8000", key) as longhaul:
        accepted = longhaul.submit(json.loads(Path("samples/request.json").read_text()))
        job = longhaul.wait(accepted.job_id)              # follows the job to its end through the events long-poll
        print(job.status, longhaul.result(accepted.job_id).result)

What is safe to send twice is retried, and nothing else (see `RetryPolicy`): reads, `PUT`s, a submission (it always
carries an `Idempotency-Key`, made up when the caller gives none, so the API answers a retry with the same job) and a
cancellation (cancelling a cancelled job answers the same); a request that never reached the API (connection refused)
is always retried. A review decision, a replay or a webhook redelivery is sent once: a lost answer is not retried,
because a second one would be refused (`409`) or would do the work twice. httpx's transport retries only failed
connects; the rest (which request is safe, `Retry-After`, jittered backoff) is the API's own rule, written here.

Errors are the API's RFC 9457 problems as typed exceptions (`longhaul_client.errors`). Listings are iterators that
fetch the next page as they go. `events(job_id)` and `wait(job_id)` follow a job to its end with the events
long-poll (`GET …/events?wait=20`); `stream(job_id)` reads the model's text as it is written (`GET …/stream`,
Server-Sent Events, resumed with `Last-Event-ID`).
"""

from __future__ import annotations

import functools
import json
import operator
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from longhaul.core import limits
from longhaul.core.analytics import UsageReport
from longhaul.core.audit import AuditEntry, AuditPage
from longhaul.core.budgets import JobBudget, TenantPolicy
from longhaul.core.bus import BusEvent, BusEventList
from longhaul.core.contracts import (
    TERMINAL_STATUSES,
    BudgetView,
    BulkFilter,
    BulkOutcome,
    BulkReplayRequest,
    BulkTerminateRequest,
    CancelOutcome,
    DeadLetter,
    DeadLetterList,
    Escalation,
    EscalationRequest,
    EventPage,
    EventView,
    Health,
    InputFixOutcome,
    InputFixRequest,
    JobAccepted,
    JobInputView,
    JobList,
    JobStatus,
    JobTrace,
    JobView,
    ReplayOutcome,
    ReplayRequest,
    ResultDownload,
    SignalAccepted,
    SteerOutcome,
    TenantPolicyView,
    TerminateOutcome,
    TerminateRequest,
    UploadRequest,
    UploadTicket,
)
from longhaul.core.contracts import JobUpdate as JobChange
from longhaul.core.streams import StreamEvent
from longhaul.core.triggers import ScheduleList, ScheduleView, TriggerList, TriggerView
from longhaul.review.contracts import (
    DecisionOutcome,
    DecisionRequest,
    ManualCompletionOutcome,
    ManualCompletionRequest,
    ReviewDetail,
    ReviewList,
    ReviewView,
)
from longhaul.webhooks.views import WebhookList, WebhookView
from longhaul_client.errors import LonghaulError, Problem, Unreachable

__version__ = "0.1.0"
DEFAULT_TIMEOUT_SECONDS = 30.0
# A follower's long-poll: the API's longest wait. Each request waits at most this long for the next event.
FOLLOW_WAIT_SECONDS = limits.MAX_EVENTS_WAIT_SECONDS
# The longest an SSE window of `GET …/stream` waits for a record before it answers (the API's default wait).
STREAM_WINDOW_SECONDS = limits.MAX_EVENTS_WAIT_SECONDS
# What an upload's file name says it is (the API accepts these media types).
MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".zip": "application/zip",
}
_PROBLEM_OR_JSON = ("application/json", "application/problem+json")
# Answers that mean the request was not carried out and may be sent again (where the request is safe): too many
# requests (nothing was stored), and a gateway or platform that could not answer.
_RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class WaitTimedOut(LonghaulError):
    """The job did not end within the time the caller gave `wait` (it goes on)."""

    def __init__(self, job: JobView, seconds: float) -> None:
        self.job = job
        super().__init__(f"job {job.job_id} is still {job.status.value} after {seconds:g} s")


@dataclass(frozen=True)
class RetryPolicy:
    """How a safe request is tried again: up to `attempts` tries in all, a jittered exponential backoff between them
    ("full jitter": a random wait up to `base` × 2^n, at most `cap`), or as long as the API's `Retry-After` says when
    that is at most `longest_retry_after` (a longer one is raised as the problem it is)."""

    attempts: int = 4
    base: float = 0.5
    cap: float = 8.0
    longest_retry_after: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def backoff(self, retry: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2**retry))


@dataclass(frozen=True)
class JobUpdate:
    """One step of following a job: the events that came since the last update, and the job as it is now."""

    events: list[EventView]
    job: JobView

    @property
    def finished(self) -> bool:
        return self.job.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class Result:
    """A job's result: its workflow's result model, and its budget as spent; `provisional` (with the step it is as
    of) when the job has not completed and this is its provisional result."""

    result: BaseModel
    budget: BudgetView | None = None
    provisional: bool = False
    as_of_step: str | None = None


@functools.cache
def _result_models() -> TypeAdapter[Any]:
    """The union of every workflow's result model (each validates only its own results)."""
    from longhaul.workflows import REGISTRY  # the registry is read on first use: it imports every workflow's spec

    models: list[Any] = [spec.result_type for spec in REGISTRY.values()]
    return TypeAdapter(functools.reduce(operator.or_, models))


@dataclass
class LonghaulClient:
    """A client of one Longhaul API (`url`: the local runtime's or a deployed stage's) with one API key."""

    url: str
    key: str | None = None
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    transport: httpx.BaseTransport | None = None
    _http: httpx.Client = field(init=False, repr=False)
    _storage: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        headers = {"User-Agent": f"longhaul-client/{__version__}", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout, transport=self.transport)
        # Presigned upload URLs go to the object store, without the API key (it would be a second credential there).
        self._storage = httpx.Client(timeout=max(self.timeout, 300.0), transport=self.transport)

    def close(self) -> None:
        self._http.close()
        self._storage.close()

    def __enter__(self) -> LonghaulClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ jobs

    def submit(
        self,
        request: BaseModel | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        supersedes: str | None = None,
    ) -> JobAccepted:
        """Submit a job (`request`: a workflow's request, as a model or its JSON). Always idempotent: without an
        `idempotency_key` one is made up, so a retry after a lost answer gets the same job, not a second one.
        `supersedes`: a job of the tenant this one replaces (cancelled if it has not finished, else marked)."""
        body = request.model_dump(mode="json", exclude_unset=True) if isinstance(request, BaseModel) else request
        if supersedes is not None:
            body = {**body, "supersedes": supersedes}
        key = idempotency_key or f"lh-{uuid.uuid4().hex}"
        response = self._send("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key}, safe=True)
        return JobAccepted.model_validate_json(response.content)

    def job(self, job_id: str, *, operator: bool = False) -> JobView:
        """The job's status, current step, progress, usage, review and webhook (`operator`: any tenant's job, with an
        operator key)."""
        return self._get(JobView, f"{self._jobs(operator)}/{job_id}")

    def trace(self, job_id: str, *, operator: bool = False) -> JobTrace:
        """The job's trace: its spans under the trace id derived from its correlation id (`operator`: any tenant's
        job, with every attribute; a tenant's view drops the operator-only ones)."""
        return self._get(JobTrace, f"{self._jobs(operator)}/{job_id}/trace")

    def jobs(
        self,
        *,
        status: JobStatus | str | None = None,
        limit: int | None = None,
        workflow: str | None = None,
        sla_class: str | None = None,
        created_since: datetime | None = None,
        created_until: datetime | None = None,
        q: str | None = None,
    ) -> Iterator[JobView]:
        """The tenant's jobs, newest first, fetched a page at a time (at most `limit`); narrowed by workflow, SLA
        class and creation time, and found by a prefix of the id or words of the question (`q`)."""
        params = {
            "status": _value(status),
            **_filters(workflow, sla_class, created_since, created_until, q),
        }
        yield from self._paged("/v1/jobs", params, limit, limits.MAX_PAGE_SIZE, _job_page)

    def event_page(
        self,
        job_id: str,
        *,
        cursor: int | str | None = None,
        limit: int = limits.MAX_PAGE_SIZE,
        wait: float = 0,
        operator: bool = False,
    ) -> EventPage:
        """One page of the job's events after `cursor` (a `seq`); with `wait` (seconds, at most 20), a long-poll:
        answered as soon as there is an event after the cursor, empty when none came in time."""
        seconds = max(0, min(int(wait), FOLLOW_WAIT_SECONDS))
        params = {"cursor": str(cursor) if cursor else None, "limit": limit, "wait": seconds or None}
        return self._get(EventPage, f"{self._jobs(operator)}/{job_id}/events", params, timeout=self.timeout + seconds)

    def events(
        self, job_id: str, *, after: int = 0, follow: bool = True, operator: bool = False
    ) -> Iterator[EventView]:
        """The job's events after `after` (a `seq`), in order; with `follow` (the default) until the job has ended,
        waiting for each next event through the long-poll, else only those there now."""
        if not follow:
            yield from self._events_now(job_id, after, operator)
            return
        for update in self.updates(job_id, after=after, operator=operator):
            yield from update.events

    def updates(
        self, job_id: str, *, after: int = 0, operator: bool = False, timeout: float | None = None
    ) -> Iterator[JobUpdate]:
        """Follow the job until it has ended: after each long-poll, the new events and the job as it is then (for a
        live view). Raises `WaitTimedOut` when `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        cursor = after
        while True:
            left = FOLLOW_WAIT_SECONDS if deadline is None else max(0.0, deadline - time.monotonic())
            page = self.event_page(job_id, cursor=cursor, wait=min(FOLLOW_WAIT_SECONDS, left), operator=operator)
            events = list(page.events)
            cursor = events[-1].seq if events else cursor
            job = self.job(job_id, operator=operator)  # read after the events: a finished job's last event is there
            if job.status in TERMINAL_STATUSES and page.next_cursor is None:
                events += self._events_now(job_id, cursor, operator)
                yield JobUpdate(events, job)
                return
            yield JobUpdate(events, job)
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimedOut(job, timeout or 0)

    def stream(self, job_id: str, *, last_event_id: int | None = None, operator: bool = False) -> Iterator[StreamEvent]:
        """The job's output as it is written (`GET …/stream`, Server-Sent Events): each record after `last_event_id`
        (`output_delta`: a piece of a model call's text; `call_finished`), until the job has ended. A window that
        closes, or a connection that drops, is resumed with `Last-Event-ID` (the last record's `id`): nothing is missed
        or repeated while the records live. Give `last_event_id` to resume a stream read before."""
        last = last_event_id or 0
        path = f"{self._jobs(operator)}/{job_id}/stream"
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream", "Last-Event-ID": str(last)}
            ended = False
            try:
                with self._http.stream(
                    "GET", path, headers=headers, timeout=self.timeout + STREAM_WINDOW_SECONDS
                ) as answer:
                    if answer.status_code >= 400:
                        answer.read()
                        raise Problem.of(answer.status_code, _body(answer))
                    for name, event_id, data in _server_sent(answer.iter_lines()):
                        if name == "end":
                            ended = True
                            break
                        record = StreamEvent.model_validate({"id": event_id, "event": name, "data": data})
                        last = record.id
                        failures = 0
                        yield record
            except httpx.TransportError as error:  # the connection dropped: resumed after the last record
                failures += 1
                if failures >= self.retry.attempts:
                    raise Unreachable(f"GET {self.url.rstrip('/')}{path}: {_describe(error)}") from error
                self.retry.sleep(self.retry.backoff(failures - 1))
            if ended:
                return

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        on_event: Callable[[EventView], None] | None = None,
        operator: bool = False,
    ) -> JobView:
        """Follow the job to its end (completed, failed, cancelled or expired) and return it; `on_event` sees each of
        its events as it comes."""
        for update in self.updates(job_id, operator=operator, timeout=timeout):
            for event in update.events:
                if on_event is not None:
                    on_event(event)
            if update.finished:
                return update.job
        raise AssertionError("unreachable: updates end with the finished job")  # pragma: no cover

    def result_download(self, job_id: str, *, format: str = "json", expires_in: int | None = None) -> ResultDownload:
        """A presigned, expiring URL to a completed job's result (`json`) or its rendering (`markdown`)."""
        params = {"format": format, "expires_in": expires_in}
        return self._get(ResultDownload, f"/v1/jobs/{job_id}/result/download", params)

    def download_result(self, job_id: str, target: Path, *, format: str = "json") -> ResultDownload:
        """Write a completed job's result (or its rendering) to `target` from its download URL."""
        ticket = self.result_download(job_id, format=format)
        target.write_bytes(self._fetch(ticket.url).content)
        return ticket

    def _fetch(self, url: str) -> httpx.Response:
        """GET a presigned URL (no key: the URL is its own authorization)."""
        return self._with_retries(lambda: self._storage.get(url), safe=True, what="GET the result's download URL")

    def result(self, job_id: str, *, provisional: bool = False) -> Result:
        """A completed job's result (a `Conflict` problem until it has completed); with `provisional`, before it
        completes, its provisional result (a `Conflict` problem while it has none), after, its final result."""
        params = {"provisional": "true"} if provisional else None
        response = self._send("GET", f"/v1/jobs/{job_id}/result", params=params, safe=True)
        if response.status_code == 303:  # too large for a response body: read from its download (no budget there)
            body = self._fetch(ResultDownload.model_validate_json(response.content).url).json()
        else:
            body = response.json()
        budget = body.pop("budget", None)
        marked, as_of_step = bool(body.pop("provisional", False)), body.pop("as_of_step", None)
        return Result(
            result=_result_models().validate_python(body),
            budget=BudgetView.model_validate(budget) if budget else None,
            provisional=marked,
            as_of_step=as_of_step,
        )

    def result_markdown(self, job_id: str) -> str:
        """The result's Markdown rendering."""
        return self._send("GET", f"/v1/jobs/{job_id}/result", headers={"Accept": "text/markdown"}, safe=True).text

    def cancel(self, job_id: str, *, operator: bool = False) -> CancelOutcome:
        """Cancel the job: its execution stops, its completed steps are kept (safe to repeat)."""
        response = self._send("POST", f"{self._jobs(operator)}/{job_id}/cancel", safe=True)
        return CancelOutcome.model_validate_json(response.content)

    def pause(self, job_id: str, *, operator: bool = False) -> SteerOutcome:
        """Pause the job at its next step boundary (safe to repeat; a `LonghaulError` 409 once it is paused)."""
        response = self._send("POST", f"{self._jobs(operator)}/{job_id}/pause", safe=True)
        return SteerOutcome.model_validate_json(response.content)

    def resume(self, job_id: str, *, operator: bool = False) -> SteerOutcome:
        """Resume a paused job, or withdraw a pause not reached yet (safe to repeat)."""
        response = self._send("POST", f"{self._jobs(operator)}/{job_id}/resume", safe=True)
        return SteerOutcome.model_validate_json(response.content)

    def signal(self, job_id: str, name: str, body: Mapping[str, Any], *, operator: bool = False) -> SignalAccepted:
        """Send signal `name` to the job with a JSON object its workflow's signal step validates (invoice
        reconciliation: `price_list`, `{"name", "text"}`). Kept once: sent again, or after its wait ended, it is a
        `LonghaulError` 409 (`signal_status`); an unknown name a 404, a body its model refuses a 422. Not retried (a
        retry of a signal that was kept would answer 409)."""
        response = self._send("POST", f"{self._jobs(operator)}/{job_id}/signals/{name}", json=dict(body), safe=False)
        return SignalAccepted.model_validate_json(response.content)

    def update(self, job_id: str, change: JobChange | Mapping[str, Any], *, operator: bool = False) -> JobView:
        """Change a job that has not finished: its deadline (seconds from now), budget, SLA class, review,
        instructions for its later model calls, or agent limits, within its tenant's policy; the job as updated.
        Safe to repeat (the same update again changes nothing more)."""
        body = change.model_dump(mode="json", exclude_none=True) if isinstance(change, BaseModel) else change
        response = self._send("PATCH", f"{self._jobs(operator)}/{job_id}", json=body, safe=True)
        return JobView.model_validate_json(response.content)

    def upload(
        self,
        path: Path,
        *,
        media_type: str | None = None,
        filename: str | None = None,
        trigger_id: str | None = None,
    ) -> UploadTicket:
        """Upload a document or a ZIP archive of documents: a presigned URL from the API, then the file to it.
        Reference it in a request by the ticket's `upload_id` (`documents[].upload_id`, or `archive.upload_id`). With
        `trigger_id` (an S3 trigger's) the file goes to that trigger's inbox, and starts its job."""
        kind = media_type or MEDIA_TYPES.get(path.suffix.lower())
        if kind is None:
            known = ", ".join(sorted(MEDIA_TYPES))
            raise ValueError(f"{path.name}: not a document the API takes (by its extension: {known})")
        fields = {"filename": filename or path.name, "media_type": kind}
        request = UploadRequest.model_validate({**fields, **({"trigger_id": trigger_id} if trigger_id else {})})
        response = self._send("POST", "/v1/uploads", json=request.model_dump(mode="json", exclude_none=True), safe=True)
        ticket = UploadTicket.model_validate_json(response.content)
        self._put_file(ticket, path)
        return ticket

    # ------------------------------------------------------------------ schedules and triggers

    def create_schedule(self, body: Mapping[str, Any]) -> ScheduleView:
        """A schedule (`workflow`, `input`, `schedule`: cron(…) or rate(…), `timezone`, …); a `Problem` 422 names what
        is wrong. Not retried (a retry would make a second schedule)."""
        response = self._send("POST", "/v1/schedules", json=dict(body), safe=False)
        return ScheduleView.model_validate_json(response.content)

    def schedules(self) -> list[ScheduleView]:
        return self._get(ScheduleList, "/v1/schedules").schedules

    def schedule(self, schedule_id: str) -> ScheduleView:
        return self._get(ScheduleView, f"/v1/schedules/{schedule_id}")

    def update_schedule(self, schedule_id: str, change: Mapping[str, Any]) -> ScheduleView:
        """Change a schedule (merge semantics); `{"enabled": False}` pauses it. Safe to repeat."""
        response = self._send("PATCH", f"/v1/schedules/{schedule_id}", json=dict(change), safe=True)
        return ScheduleView.model_validate_json(response.content)

    def delete_schedule(self, schedule_id: str) -> None:
        self._send("DELETE", f"/v1/schedules/{schedule_id}", safe=True)

    def create_trigger(self, body: Mapping[str, Any]) -> TriggerView:
        """A trigger (`type`: s3 or eventbridge, `workflow`, `input_template`, …); a `Problem` 422 names what is wrong
        (a pattern EventBridge refuses, a template the workflow refuses). Not retried."""
        response = self._send("POST", "/v1/triggers", json=dict(body), safe=False)
        return TriggerView.model_validate_json(response.content)

    def triggers(self) -> list[TriggerView]:
        return self._get(TriggerList, "/v1/triggers").triggers

    def trigger(self, trigger_id: str) -> TriggerView:
        return self._get(TriggerView, f"/v1/triggers/{trigger_id}")

    def update_trigger(self, trigger_id: str, change: Mapping[str, Any]) -> TriggerView:
        response = self._send("PATCH", f"/v1/triggers/{trigger_id}", json=dict(change), safe=True)
        return TriggerView.model_validate_json(response.content)

    def delete_trigger(self, trigger_id: str) -> None:
        self._send("DELETE", f"/v1/triggers/{trigger_id}", safe=True)

    def health(self) -> Health:
        """The API's version and readiness (no key needed); a `ServerError` when it is not ready."""
        return self._get(Health, "/v1/health")

    # ------------------------------------------------------------------ reviewers

    def reviews(self, *, status: str = "pending", limit: int | None = None) -> Iterator[ReviewView]:
        """The tenant's reviews in `status` (`pending`, `decided`, `expired`), newest first (a reviewer key)."""
        yield from self._paged("/v1/reviews", {"status": status}, limit, limits.MAX_PAGE_SIZE, _review_page)

    def review(self, review_id: str) -> ReviewDetail:
        """What to review: the draft, the evidence with its sources, why review was asked for."""
        return self._get(ReviewDetail, f"/v1/reviews/{review_id}")

    def decide(self, review_id: str, decision: DecisionRequest | Mapping[str, Any]) -> DecisionOutcome:
        """Approve, reject or edit; or, for a review of kind `complete`, `complete` with the job's `result` (sent
        once: a second decision is a `Conflict`; a result the workflow's rules refuse is an `InvalidRequest`, and the
        review stays open)."""
        body = decision.model_dump(mode="json", exclude_none=True) if isinstance(decision, BaseModel) else decision
        response = self._send("POST", f"/v1/reviews/{review_id}/decision", json=body, safe=False)
        return DecisionOutcome.model_validate_json(response.content)

    # ------------------------------------------------------------------ operators

    def ops_jobs(
        self,
        *,
        tenant: str | None = None,
        status: JobStatus | str | None = None,
        limit: int | None = None,
        workflow: str | None = None,
        sla_class: str | None = None,
        created_since: datetime | None = None,
        created_until: datetime | None = None,
        q: str | None = None,
        escalated: bool | None = None,
    ) -> Iterator[JobView]:
        """Every tenant's jobs (or one tenant's), newest first (an operator key); narrowed as `jobs` does, and by
        escalation."""
        params = {
            "tenant": tenant,
            "status": _value(status),
            **_filters(workflow, sla_class, created_since, created_until, q),
            "escalated": None if escalated is None else str(escalated).lower(),
        }
        yield from self._paged("/v1/ops/jobs", params, limit, limits.MAX_OPS_PAGE_SIZE, _job_page)

    def terminate(self, job_id: str, *, status: str, reason: str, message: str) -> TerminateOutcome:
        """End any tenant's job as `failed` or `cancelled` with `message` for its owner (`reason` is recorded with
        who ended it); a job that already finished is a `Conflict`."""
        body = TerminateRequest.model_validate({"status": status, "reason": reason, "message": message})
        response = self._send("POST", f"/v1/ops/jobs/{job_id}/terminate", json=body.model_dump(mode="json"), safe=False)
        return TerminateOutcome.model_validate_json(response.content)

    def bulk_replay(
        self,
        job_filter: BulkFilter | Mapping[str, Any],
        *,
        dry_run: bool = True,
        reason: str | None = None,
        from_step: str | None = None,
        limit: int | None = None,
        idempotency_key: str | None = None,
    ) -> BulkOutcome:
        """Replay every job the filter matches (a dry run unless `dry_run=False`: then under an Idempotency-Key, a
        new one unless given, so a retry acts on no job twice)."""
        body = {"filter": job_filter, "dry_run": dry_run, "reason": reason, "from_step": from_step, "limit": limit}
        return self._bulk("/v1/ops/jobs:replay", BulkReplayRequest, body, idempotency_key)

    def bulk_terminate(
        self,
        job_filter: BulkFilter | Mapping[str, Any],
        *,
        status: str,
        message: str,
        dry_run: bool = True,
        reason: str | None = None,
        limit: int | None = None,
        idempotency_key: str | None = None,
    ) -> BulkOutcome:
        """End every job the filter matches as `status` with `message` (a dry run unless `dry_run=False`)."""
        body = {"filter": job_filter, "dry_run": dry_run, "reason": reason, "status": status, "message": message}
        return self._bulk("/v1/ops/jobs:terminate", BulkTerminateRequest, {**body, "limit": limit}, idempotency_key)

    def _bulk(
        self, path: str, model: type[BaseModel], body: dict[str, Any], idempotency_key: str | None
    ) -> BulkOutcome:
        given = body["filter"]
        body["filter"] = given.model_dump(mode="json", exclude_none=True) if isinstance(given, BaseModel) else given
        request = model.model_validate({k: v for k, v in body.items() if v is not None})
        executing = not body["dry_run"]
        key = (idempotency_key or f"bulk-{uuid.uuid4().hex}") if executing else None
        response = self._send(
            "POST",
            path,
            json=request.model_dump(mode="json", exclude_none=True),
            headers={"Idempotency-Key": key} if key else None,
            safe=True,  # a dry run changes nothing; an execution is kept under its key
        )
        return BulkOutcome.model_validate_json(response.content)

    def dead_letters(
        self,
        *,
        step: str | None = None,
        workflow: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> list[DeadLetter]:
        """The dead letters, newest first (an operator key)."""
        params = {"step": step, "workflow": workflow, "tenant": tenant, "limit": limit}
        return self._get(DeadLetterList, "/v1/ops/dead-letters", params).dead_letters

    def replay(
        self,
        job_id: str,
        *,
        reason: str,
        from_step: str | None = None,
        dry_run: bool = False,
        budget: JobBudget | None = None,
    ) -> ReplayOutcome:
        """Replay a failed, cancelled or expired job from `from_step` (default: where it failed), reusing every
        checkpoint before it; `dry_run` answers the plan and starts nothing (sent once: a second replay while one
        runs is a `Conflict`)."""
        request = ReplayRequest(from_step=from_step, reason=reason, dry_run=dry_run, budget=budget)
        body = request.model_dump(mode="json", exclude_none=True)
        response = self._send("POST", f"/v1/ops/jobs/{job_id}/replay", json=body, safe=dry_run)
        return ReplayOutcome.model_validate_json(response.content)

    def job_input(self, job_id: str) -> JobInputView:
        """A job's current input as a request gives it (what a fix patches) and every version of it."""
        return self._get(JobInputView, f"/v1/ops/jobs/{job_id}/input")

    def fix_input(self, job_id: str, patch: Mapping[str, Any], *, reason: str) -> InputFixOutcome:
        """Fix a failed, cancelled or dead-lettered job's input with a JSON merge patch (RFC 7396) and why: a new
        version, validated as a submission of the job's tenant; the next replay reads it and reruns the steps that read
        what changed (sent once: a lost answer is not retried, a second fix would make another version)."""
        body = InputFixRequest(patch=dict(patch), reason=reason).model_dump(mode="json")
        response = self._send(
            "PATCH",
            f"/v1/ops/jobs/{job_id}/input",
            json=body,
            headers={"Content-Type": "application/merge-patch+json"},
            safe=False,
        )
        return InputFixOutcome.model_validate_json(response.content)

    def escalate(self, job_id: str, *, note: str, link: str | None = None) -> Escalation:
        """Flag a job for engineering (again: update the flag); the alarm topic is told."""
        body = EscalationRequest(note=note, link=link).model_dump(mode="json", exclude_none=True)
        response = self._send("POST", f"/v1/ops/jobs/{job_id}/escalate", json=body, safe=True)
        return Escalation.model_validate_json(response.content)

    def clear_escalation(self, job_id: str) -> None:
        """Clear a job's escalation (nothing happens to a job without one)."""
        self._send("DELETE", f"/v1/ops/jobs/{job_id}/escalate", safe=True)

    def request_manual_completion(self, job_id: str, *, assignee_group: str, note: str) -> ManualCompletionOutcome:
        """Hand a failed job to a person: a review of kind `complete` opens for `assignee_group`, whose reviewer
        submits the result (`decide(review_id, {"decision": "complete", "result": {...}})`). Asked again while it is
        pending: the same review. A job that is not failed is a `Conflict`."""
        body = ManualCompletionRequest(assignee_group=assignee_group, note=note).model_dump(mode="json")
        response = self._send("POST", f"/v1/ops/jobs/{job_id}/manual-completion", json=body, safe=True)
        return ManualCompletionOutcome.model_validate_json(response.content)

    def bus_events(self, *, wait: int = 0, limit: int = 10) -> list[BusEvent]:
        """Events of the platform's EventBridge bus from the operators' tap (an operator key), waiting up to `wait`
        seconds for the first. Each is answered once: what this call returns is gone from the tap."""
        params = {"wait": wait, "limit": limit}
        response = self._send("GET", "/v1/ops/events", params=params, safe=False, timeout=self.timeout + wait)
        return BusEventList.model_validate_json(response.content).events

    def follow_bus_events(self, *, wait: int = limits.MAX_EVENTS_WAIT_SECONDS) -> Iterator[BusEvent]:
        """Every event the tap receives from now on, as it arrives (long polls of `wait` seconds), until stopped."""
        while True:
            yield from self.bus_events(wait=wait, limit=100)

    def dead_webhooks(self, *, limit: int = 100) -> list[WebhookView]:
        """Webhooks whose delivery gave up, newest first (an operator key)."""
        return self._get(WebhookList, "/v1/ops/webhooks/dead-letters", {"limit": limit}).webhooks

    def redeliver_webhook(self, webhook_id: str) -> WebhookView:
        """Deliver a dead webhook again (same id and body; sent once)."""
        response = self._send("POST", f"/v1/ops/webhooks/{webhook_id}/redeliver", safe=False)
        return WebhookView.model_validate_json(response.content)

    def tenant_policy(self, tenant: str) -> TenantPolicyView:
        """A tenant's policy (budgets, quotas, routes, SLA classes) and today's spending."""
        return self._get(TenantPolicyView, f"/v1/ops/tenants/{tenant}/policy")

    def set_tenant_policy(self, tenant: str, policy: TenantPolicy | Mapping[str, Any]) -> TenantPolicyView:
        """Set a tenant's policy (omitted fields take the defaults)."""
        body = policy.model_dump(mode="json", exclude_unset=True) if isinstance(policy, BaseModel) else policy
        response = self._send("PUT", f"/v1/ops/tenants/{tenant}/policy", json=body, safe=True)
        return TenantPolicyView.model_validate_json(response.content)

    def usage_report(self, *, since: str = "30d", until: str | None = None, by: str = "workflow") -> UsageReport:
        """The key's tenant's usage report over the window (from the analytics export)."""
        params = {"since": since, "by": by, **({"until": until} if until else {})}
        return self._get(UsageReport, "/v1/reports/usage", params)

    def ops_report(
        self, *, since: str = "7d", until: str | None = None, tenant: str | None = None, by: str = "workflow"
    ) -> UsageReport:
        """Every tenant's (or one tenant's) usage report over the window (an operator key)."""
        params = {"since": since, "by": by, **({"until": until} if until else {})}
        if tenant:
            params["tenant_id"] = tenant
        return self._get(UsageReport, "/v1/ops/reports", params)

    # ------------------------------------------------------------------ audit trail

    def ops_audit(
        self,
        *,
        actor: str | None = None,
        tenant: str | None = None,
        action: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> Iterator[AuditEntry]:
        """The audit trail in the order recorded (an operator key), filtered by actor (`actor_id`), tenant, action
        (`POST /v1/ops/jobs/{job_id}/replay`) and time (ISO 8601: `since` inclusive, `until` exclusive)."""
        params = {"actor": actor, "tenant_id": tenant, "action": action, "since": since, "until": until}
        yield from self._audit_pages("/v1/ops/audit", params, limit)

    def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> Iterator[AuditEntry]:
        """The recorded actions on this tenant's own resources (operators' included), in the order recorded."""
        params = {"actor": actor, "action": action, "since": since, "until": until}
        yield from self._audit_pages("/v1/audit", params, limit)

    def _audit_pages(self, path: str, params: Mapping[str, Any], limit: int | None) -> Iterator[AuditEntry]:
        """Every page to the end: a filtered page may be empty and still have a cursor (the API looked at a bounded
        number of entries, none of which matched)."""
        cursor: str | None = None
        remaining = limit
        while remaining is None or remaining > 0:
            size = limits.MAX_OPS_PAGE_SIZE if remaining is None else min(limits.MAX_OPS_PAGE_SIZE, remaining)
            page = self._get(AuditPage, path, {**params, "limit": size, "cursor": cursor})
            yield from page.entries[:remaining]
            if remaining is not None:
                remaining -= len(page.entries)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # ------------------------------------------------------------------ HTTP

    @staticmethod
    def _jobs(operator: bool) -> str:
        return "/v1/ops/jobs" if operator else "/v1/jobs"

    def _get(
        self, model: type[M], path: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> M:
        response = self._send("GET", path, params=params, safe=True, timeout=timeout)
        return model.model_validate_json(response.content)

    def _events_now(self, job_id: str, after: int, operator: bool) -> list[EventView]:
        events: list[EventView] = []
        cursor: int | str | None = after
        while True:
            page = self.event_page(job_id, cursor=cursor, operator=operator)
            events += page.events
            if page.next_cursor is None:
                return events
            cursor = page.next_cursor

    def _paged(
        self,
        path: str,
        params: Mapping[str, Any],
        limit: int | None,
        page_size: int,
        read: Callable[[bytes], tuple[list[T], str | None]],
    ) -> Iterator[T]:
        cursor: str | None = None
        remaining = limit
        while remaining is None or remaining > 0:
            size = page_size if remaining is None else min(page_size, remaining)
            response = self._send("GET", path, params={**params, "limit": size, "cursor": cursor}, safe=True)
            found, cursor = read(response.content)
            yield from found[:remaining]
            if remaining is not None:
                remaining -= len(found)
            if cursor is None:  # (a filtered page may be empty and still have a cursor to go on from)
                return

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        safe: bool,
        timeout: float | None = None,
    ) -> httpx.Response:
        """One API request, retried as `RetryPolicy` says when it is `safe` to send again (a request that never
        reached the API always is); an error answer is raised as its typed problem."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self._with_retries(
            lambda: self._http.request(
                method, path, params=query, json=json, headers=headers, timeout=timeout or self.timeout
            ),
            safe=safe,
            what=f"{method} {self.url.rstrip('/')}{path}",
        )

    def _put_file(self, ticket: UploadTicket, path: Path) -> None:
        def put() -> httpx.Response:
            with path.open("rb") as content:  # opened for each attempt: a retry sends the file from its start
                return self._storage.put(ticket.upload_url, content=content, headers=ticket.headers)

        self._with_retries(put, safe=True, what=f"PUT {path.name} to its upload URL")

    def _with_retries(self, send: Callable[[], httpx.Response], *, safe: bool, what: str) -> httpx.Response:
        policy = self.retry
        for attempt in range(1, policy.attempts + 1):
            last = attempt == policy.attempts
            try:
                response = send()
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:  # the request never reached the API
                if last:
                    raise Unreachable(f"{what}: {_describe(error)}") from error
                policy.sleep(policy.backoff(attempt - 1))
                continue
            except httpx.TransportError as error:  # it may have been carried out: sent again only where safe
                if last or not safe:
                    raise Unreachable(f"{what}: {_describe(error)}") from error
                policy.sleep(policy.backoff(attempt - 1))
                continue
            if response.status_code < 400:
                return response
            problem = Problem.of(response.status_code, _body(response))
            # 429: refused before anything was done, so any request may come again; a 5xx only where it is safe.
            retryable = response.status_code == 429 or (safe and response.status_code in _RETRYABLE_STATUSES)
            delay = _retry_after(response, problem)
            if last or not retryable or (delay is not None and delay > policy.longest_retry_after):
                raise problem
            policy.sleep(delay if delay is not None else policy.backoff(attempt - 1))
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def _server_sent(lines: Iterator[str]) -> Iterator[tuple[str, int | None, Any]]:
    """(event, id, data) of each Server-Sent Event in `lines` (comments and `retry:` skipped)."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "event" in fields and "data" in fields:
                event_id = fields.get("id")
                yield fields["event"], int(event_id) if event_id else None, json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


def _filters(
    workflow: str | None,
    sla_class: str | None,
    created_since: datetime | None,
    created_until: datetime | None,
    q: str | None,
) -> dict[str, Any]:
    return {
        "workflow": workflow,
        "sla_class": sla_class,
        "created_since": created_since.isoformat() if created_since else None,
        "created_until": created_until.isoformat() if created_until else None,
        "q": q,
    }


def _value(status: JobStatus | str | None) -> str | None:
    return status.value if isinstance(status, JobStatus) else status


def _job_page(content: bytes) -> tuple[list[JobView], str | None]:
    page = JobList.model_validate_json(content)
    return page.jobs, page.next_cursor


def _review_page(content: bytes) -> tuple[list[ReviewView], str | None]:
    page = ReviewList.model_validate_json(content)
    return page.reviews, page.next_cursor


def _body(response: httpx.Response) -> Any:
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in _PROBLEM_OR_JSON:
        try:
            return response.json()
        except ValueError:
            return response.text
    return response.text


def _retry_after(response: httpx.Response, problem: Problem) -> float | None:
    """Seconds the API asked to wait (`Retry-After`, or the problem's `retry_after_seconds`)."""
    for value in (response.headers.get("retry-after"), problem.extra.get("retry_after_seconds")):
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return None


def _describe(error: httpx.TransportError) -> str:
    text = str(error) or type(error).__name__
    return f"{text} (is the API at this URL up?)" if isinstance(error, httpx.ConnectError) else text
