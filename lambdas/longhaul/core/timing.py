"""Where a job's wall time went (`JobView.timing`), from its record and its events: no trace is read.

- queue wait: from the submission to the execution's start (`started_at`; a replay's own wait in `replay_waiting`);
- executing: the union of the steps' and items' attempts (`step_started` to its `step_finished` or
  `step_attempt_failed`), less the provider waits inside them; concurrent items count once (wall time);
- backoff and retries: from a `job_retrying` to the next step start, unless the failure was a provider's;
- review wait: from `review_requested` to its decision (`review_decided`, `review_auto_approved`), or now;
- provider wait: the job's waits on a model provider: from a `step_attempt_failed` whose error kind is a provider's
  (`rate-limited`, `upstream-unavailable`: `PROVIDER_KINDS`) to the next start of that step (item), or now; the
  `job_retrying` after such a failure counts here, not in backoff;
- total: from the submission to its end, or now.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from longhaul.core.contracts import EventView, JobTiming
from longhaul.core.errors import RateLimitedError, UpstreamUnavailableError

_ATTEMPT_ENDS = frozenset({"step_finished", "step_attempt_failed", "item_failed"})
_REVIEW_ENDS = frozenset({"review_decided", "review_auto_approved", "job_expired", "job_cancelled"})
_RESUMES = frozenset({"step_started", "job_resumed", "job_running"})
_PROVIDER_REASONS = frozenset({"provider", "breaker", "breaker_open", "lane", "rate_limit", "throttled"})
#: The error kinds of a failed attempt whose retry waits on a model provider (its rate limit, its outage).
PROVIDER_KINDS = frozenset({RateLimitedError.kind, UpstreamUnavailableError.kind})


def _union(intervals: list[tuple[datetime, datetime]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_start is not None and current_end is not None:
                total += (current_end - current_start).total_seconds()
            current_start, current_end = start, end
        elif end > current_end:
            current_end = end
    if current_start is not None and current_end is not None:
        total += (current_end - current_start).total_seconds()
    return total


def job_timing(
    events: Iterable[EventView],
    *,
    created_at: datetime,
    started_at: datetime | None,
    finished_at: datetime | None,
    now: datetime,
) -> JobTiming:
    end = finished_at or now
    attempts: dict[tuple[str | None, int | None, int | None], datetime] = {}
    executing: list[tuple[datetime, datetime]] = []
    backoff: list[tuple[datetime, datetime]] = []
    provider: list[tuple[datetime, datetime]] = []
    review: list[tuple[datetime, datetime]] = []
    retrying_since: tuple[datetime, bool] | None = None
    on_provider: dict[tuple[str | None, int | None], datetime] = {}  # (step, item) -> its provider's failure
    review_since: datetime | None = None
    queue_extra = 0.0
    replay_since: datetime | None = None
    for event in events:
        key = (event.step, event.item, event.attempt)
        if event.type == "step_started":
            attempts[key] = event.at
        elif event.type in _ATTEMPT_ENDS:
            begun = attempts.pop(key, None) or _latest(attempts, event.step, event.item)
            if begun is not None:
                executing.append((begun, event.at))
        if event.type == "step_attempt_failed" and event.detail.get("kind") in PROVIDER_KINDS:
            on_provider.setdefault((event.step, event.item), event.at)
        elif event.type == "step_started" and (event.step, event.item) in on_provider:
            provider.append((on_provider.pop((event.step, event.item)), event.at))
        if event.type == "job_retrying":
            reason = str(event.detail.get("reason") or event.detail.get("wait") or "")
            retrying_since = (event.at, reason in _PROVIDER_REASONS or (event.step, event.item) in on_provider)
        elif event.type in _RESUMES and retrying_since is not None:
            (provider if retrying_since[1] else backoff).append((retrying_since[0], event.at))
            retrying_since = None
        if event.type == "review_requested" and review_since is None:
            review_since = event.at
        elif event.type in _REVIEW_ENDS and review_since is not None:
            review.append((review_since, event.at))
            review_since = None
        if event.type == "replay_waiting":
            replay_since = event.at
        elif event.type == "step_started" and replay_since is not None:
            queue_extra += max(0.0, (event.at - replay_since).total_seconds())
            replay_since = None
    if review_since is not None:
        review.append((review_since, end))
    if retrying_since is not None:
        (provider if retrying_since[1] else backoff).append((retrying_since[0], end))
    provider.extend((since, end) for since in on_provider.values())
    for begun in attempts.values():  # attempts still running (or whose end was not recorded)
        if finished_at is None:
            executing.append((begun, end))
    queue_wait = max(0.0, ((started_at or end) - created_at).total_seconds()) + queue_extra
    return JobTiming(
        queue_wait_seconds=round(queue_wait, 3),
        executing_seconds=round(_union(executing), 3),
        backoff_seconds=round(_union(backoff), 3),
        review_wait_seconds=round(_union(review), 3),
        provider_wait_seconds=round(_union(provider), 3),
        total_seconds=round(max(0.0, (end - created_at).total_seconds()), 3),
    )


def _latest(
    attempts: dict[tuple[str | None, int | None, int | None], datetime], step: str | None, item: int | None
) -> datetime | None:
    """The start of a step's (item's) attempt whose end names no attempt number."""
    matching = [k for k in attempts if k[0] == step and k[1] == item]
    return attempts.pop(max(matching, key=lambda k: k[2] or 0)) if matching else None
