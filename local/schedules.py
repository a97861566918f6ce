"""Scheduled rules and job deadlines on the local, time-scaled clock.

moto stores EventBridge rules but never fires them, so the sweep (deadlines, stuck jobs, lost executions) would never
run locally. `Scheduler` reads every enabled rule with a `rate(...)` ScheduleExpression and its Lambda targets from the
deployed in-memory AWS and, in one daemon thread per rule, invokes each target through moto's Lambda API (so the
in-process runtime and its middlewares run it) with EventBridge's scheduled-event shape, every interval x the time
scale (`lambda_runtime.scaled_wait`, which follows a scale change while it waits). `cron(...)` rules are not fired
locally (said once, at start).

A job's deadline is a wait like the others: `scale_deadlines` (a runtime middleware, installed by `LocalPlatform`)
moves the `deadline_at` of a job the API has just accepted (or replayed) to `now + deadline_seconds x time scale`,
so at `LONGHAUL_TIME_SCALE=0.01` a 60 s deadline falls after 0.6 s and the sweep, every 3 s, expires the job.
A review's deadline is moved alike (`scale_review_deadlines`) as its step opens it: the deadline the job shows is the
one the lane's time-scaled waits reach, so a review never ends before the deadline it shows, at any scale.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from local import lambda_runtime

LOG = logging.getLogger(__name__)
_RATE = re.compile(r"rate\(\s*(?P<value>\d+)\s+(?P<unit>minutes?|hours?|days?)\s*\)")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class Schedule:
    """One scheduled rule: fire `targets` (Lambda function ARNs) every `seconds` of local time."""

    rule_name: str
    rule_arn: str
    expression: str
    seconds: float
    targets: tuple[str, ...]


def rate_seconds(expression: str) -> float | None:
    """`rate(5 minutes)` -> 300.0; None for anything else (`cron(...)`)."""
    match = _RATE.fullmatch(expression.strip())
    if match is None:
        return None
    return float(int(match["value"]) * _UNIT_SECONDS[match["unit"].rstrip("s")])


def _pages(call: Callable[..., dict[str, Any]], key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    while True:
        page = call(**kwargs)
        yield from page.get(key, [])
        if not page.get("NextToken"):
            return
        kwargs["NextToken"] = page["NextToken"]


def read_schedules(events: Any) -> list[Schedule]:
    """Every enabled rule of the default bus with a rate schedule and Lambda targets."""
    schedules = []
    for rule in _pages(events.list_rules, "Rules"):
        expression = rule.get("ScheduleExpression")
        if not expression or rule.get("State") != "ENABLED":
            continue
        seconds = rate_seconds(expression)
        if seconds is None:
            LOG.info("rule %s (%s) is not fired locally: only rate(...) schedules are", rule["Name"], expression)
            continue
        targets = tuple(
            t["Arn"]
            for t in _pages(events.list_targets_by_rule, "Targets", Rule=rule["Name"])
            if ":function:" in t["Arn"]
        )
        if targets:
            schedules.append(Schedule(rule["Name"], rule["Arn"], expression, seconds, targets))
    return schedules


def scheduled_event(schedule: Schedule, now: datetime | None = None) -> dict[str, Any]:
    """The event EventBridge delivers to a scheduled rule's target."""
    _, _, _, region, account, _ = schedule.rule_arn.split(":", 5)
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [schedule.rule_arn],
        "detail": {},
    }


class Scheduler:
    """Fires the deployed schedules until `stop()`; `fired` counts the invocations per rule name. With an EventBridge
    Scheduler client, also the schedules the platform creates at runtime (`SchedulerSchedules`)."""

    def __init__(self, events: Any, lambda_client: Any, scheduler: Any | None = None) -> None:
        self.events = events
        self.lambda_client = lambda_client
        self.schedules: list[Schedule] = []
        self.fired: Counter[str] = Counter()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.runtime = SchedulerSchedules(scheduler, lambda_client, self._stop) if scheduler is not None else None

    def start(self) -> list[Schedule]:
        self.schedules = read_schedules(self.events)
        for schedule in self.schedules:
            thread = threading.Thread(
                target=self._run, args=(schedule,), name=f"longhaul-schedule-{schedule.rule_name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        if self.runtime is not None:
            thread = threading.Thread(target=self.runtime.run, name="longhaul-scheduler-schedules", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self.schedules

    def _run(self, schedule: Schedule) -> None:
        while not lambda_runtime.scaled_wait(schedule.seconds, event=self._stop):
            self.fire(schedule)

    def fire(self, schedule: Schedule) -> None:
        """Invoke every target of `schedule` once, as EventBridge would (a failure is logged, the schedule goes on)."""
        for target in schedule.targets:
            try:
                response = self.lambda_client.invoke(
                    FunctionName=target, Payload=json.dumps(scheduled_event(schedule)).encode()
                )
                payload = response["Payload"].read()
            except Exception:
                if self._stop.is_set():
                    return  # the platform is stopping under it
                LOG.exception("scheduled invocation of %s by %s failed", target, schedule.rule_name)
                continue
            self.fired[schedule.rule_name] += 1
            if response.get("FunctionError"):
                LOG.error("%s, fired by %s, failed: %s", target, schedule.rule_name, payload[:500])
            else:
                LOG.debug("%s fired by %s: %s", target, schedule.rule_name, payload[:200])

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []


# --- EventBridge Scheduler's schedules on the local clock ------------------------------------------------------------

#: Real seconds between two reads of the schedules (a fire is at most this late, plus its invocation).
SCHEDULER_POLL_SECONDS = 0.05
#: What Scheduler replaces in a target's input with the fire's scheduled time.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
_AT = re.compile(r"^at\((?P<moment>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")


@dataclass
class Tracked:
    """A schedule as the firer follows it: its definition, and its clock. Its local clock started (`virtual0`, the
    wall-clock time) when it was created or last changed (`real0`, monotonic): local time runs 1 / scale times as
    fast as real time, so a `rate(1 minute)` at scale 0.01 fires every 0.6 s, each fire naming its scheduled time
    on that clock (a minute apart)."""

    group: str
    name: str
    modified: Any
    expression: str
    timezone: str
    target: dict[str, Any]
    enabled: bool
    delete_after: bool
    real0: float
    virtual0: datetime
    due: datetime | None = None

    def now(self, scale: float) -> datetime:
        return self.virtual0 + timedelta(seconds=(time.monotonic() - self.real0) / scale)

    def real_at(self, moment: datetime, scale: float) -> float:
        """The monotonic time at which the schedule's clock reads `moment`."""
        return self.real0 + (moment - self.virtual0).total_seconds() * scale


def first_due(expression: str, timezone: str, after: datetime) -> datetime | None:
    """A schedule's first fire after `after` on its clock: `at(…)` (UTC here: the platform writes its timers so) at
    that moment even if past, `rate(…)` one interval after its creation, `cron(…)` its next time."""
    at = _AT.match(expression)
    if at is not None:
        return datetime.fromisoformat(at["moment"]).replace(tzinfo=UTC)
    lambda_runtime.ensure_code_root_on_path()
    from longhaul.core.triggers import InvalidExpression, next_fire

    try:
        return next_fire(expression, timezone, after, anchor=after)
    except InvalidExpression:
        LOG.warning("schedule expression %r is not fired locally", expression)
        return None


class SchedulerSchedules:
    """Fires EventBridge Scheduler's schedules (moto stores them and never fires them), on the time-scaled clock:
    reads them every `SCHEDULER_POLL_SECONDS`, invokes a due one's Lambda target with its input (the scheduled time in
    it, as Scheduler does) in a thread of its own, and deletes a one-time schedule that says so once it fired.
    `fired` lists (schedule name, scheduled time, real monotonic time of the invocation)."""

    def __init__(self, scheduler: Any, lambda_client: Any, stop: threading.Event) -> None:
        self.scheduler = scheduler
        self.lambda_client = lambda_client
        self._stop = stop
        self.tracked: dict[tuple[str, str], Tracked] = {}
        self.fired: list[tuple[str, datetime, float]] = []
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stop.wait(SCHEDULER_POLL_SECONDS):
            try:
                self.poll()
            except Exception:
                if self._stop.is_set():
                    return
                LOG.exception("reading the Scheduler's schedules failed")

    def poll(self) -> None:
        listed = {(s["GroupName"], s["Name"]): s for s in _pages(self.scheduler.list_schedules, "Schedules")}
        for key in set(self.tracked) - set(listed):
            del self.tracked[key]
        for key, summary in listed.items():
            known = self.tracked.get(key)
            if known is None or known.modified != summary.get("LastModificationDate"):
                self.track(key, summary)
        scale = lambda_runtime.time_scale()
        for tracked in list(self.tracked.values()):
            if tracked.enabled and tracked.due is not None and tracked.now(scale) >= tracked.due:
                self.fire(tracked, tracked.due)

    def track(self, key: tuple[str, str], summary: Mapping[str, Any]) -> None:
        full = self.scheduler.get_schedule(GroupName=key[0], Name=key[1])
        now = datetime.now(UTC)
        tracked = Tracked(
            group=key[0],
            name=key[1],
            modified=summary.get("LastModificationDate"),
            expression=full["ScheduleExpression"],
            timezone=full.get("ScheduleExpressionTimezone") or "UTC",
            target=full["Target"],
            enabled=full.get("State", "ENABLED") == "ENABLED",
            delete_after=full.get("ActionAfterCompletion") == "DELETE",
            real0=time.monotonic(),
            virtual0=now,
        )
        tracked.due = first_due(tracked.expression, tracked.timezone, now)
        self.tracked[key] = tracked

    def fire(self, tracked: Tracked, scheduled: datetime) -> None:
        """Invoke the target for the fire due at `scheduled`, and move the schedule to its next fire."""
        at = _AT.match(tracked.expression)
        if at is not None:
            tracked.due = None
            if tracked.delete_after:
                try:
                    self.scheduler.delete_schedule(GroupName=tracked.group, Name=tracked.name)
                except Exception:
                    LOG.exception("could not delete the one-time schedule %s", tracked.name)
        else:
            lambda_runtime.ensure_code_root_on_path()
            from longhaul.core.triggers import next_fire

            tracked.due = next_fire(tracked.expression, tracked.timezone, scheduled, anchor=tracked.virtual0)
        text = scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        payload = str(tracked.target.get("Input") or "{}").replace(SCHEDULED_TIME, text)
        with self._lock:
            self.fired.append((tracked.name, scheduled, time.monotonic()))
        threading.Thread(
            target=self._invoke,
            args=(tracked.target["Arn"], payload, tracked.name),
            name=f"longhaul-fire-{tracked.name}",
            daemon=True,
        ).start()

    def _invoke(self, arn: str, payload: str, name: str) -> None:
        try:
            response = self.lambda_client.invoke(FunctionName=arn, Payload=payload.encode())
            if response.get("FunctionError"):
                LOG.error("%s, fired by schedule %s, failed: %s", arn, name, response["Payload"].read()[:500])
        except Exception:
            if not self._stop.is_set():
                LOG.exception("schedule %s could not invoke %s", name, arn)


def invoke_async(lambda_client: Any) -> Callable[[str, dict[str, Any]], None]:
    """An EventBridge rule's delivery to a Lambda target: an invocation in a thread of its own (the caller, a
    `PutEvents` or the S3 `PutObject` that sent the event, does not wait for it)."""

    def invoke(arn: str, event: dict[str, Any]) -> None:
        def run() -> None:
            try:
                response = lambda_client.invoke(FunctionName=arn, Payload=json.dumps(event, default=str).encode())
                if response.get("FunctionError"):
                    LOG.error(
                        "%s, sent %s, failed: %s", arn, event.get("detail-type"), response["Payload"].read()[:500]
                    )
            except Exception:
                LOG.exception("an event could not be delivered to %s", arn)

        threading.Thread(target=run, name="longhaul-event-target", daemon=True).start()

    return invoke


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether an event matches a rule's pattern, for the patterns the stack writes: each top-level key's list of
    values (`source`, `detail-type`), and `detail`'s likewise."""
    for key, wanted in pattern.items():
        if isinstance(wanted, Mapping):
            if not isinstance(event.get(key), Mapping) or not matches(wanted, event[key]):
                return False
        elif event.get(key) not in wanted:
            return False
    return True


def deliver(events: Any, lambda_client: Any, event: Mapping[str, Any]) -> int:
    """Send `event` to the Lambda targets of every enabled rule of the default bus whose pattern matches it, as
    EventBridge would (moto's does not invoke Lambda targets); how many invocations were made."""
    sent = 0
    for rule in _pages(events.list_rules, "Rules"):
        pattern = rule.get("EventPattern")
        if not pattern or rule.get("State") != "ENABLED" or not matches(json.loads(pattern), event):
            continue
        for target in _pages(events.list_targets_by_rule, "Targets", Rule=rule["Name"]):
            if ":function:" in target["Arn"]:
                response = lambda_client.invoke(FunctionName=target["Arn"], Payload=json.dumps(event).encode())
                if response.get("FunctionError"):
                    failure = response["Payload"].read()[:500]
                    LOG.error("%s, sent %s, failed: %s", target["Arn"], event.get("detail-type"), failure)
                sent += 1
    return sent


# --- deadlines on the local clock ---------------------------------------------------------------------------------

#: (method, resource) of the API routes that give a job its deadline, and the status of their success: a submission,
#: a replay and an update (a new deadline, from now).
DEADLINE_ROUTES = {
    ("POST", "/v1/jobs"): 202,
    ("POST", "/v1/ops/jobs/{job_id}/replay"): 202,
    ("PATCH", "/v1/jobs/{job_id}"): 200,
    ("PATCH", "/v1/ops/jobs/{job_id}"): 200,
}
_SCALED_MARK = "local_scaled_deadline_at"  # the deadline this middleware wrote (a second pass leaves it alone)


def scale_deadlines(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
    """Runtime middleware: after the API accepted, replayed or updated a job, move its deadline onto the local clock
    (an update without a new deadline leaves the one already moved: it is the one this middleware marked)."""
    result = call_next()
    event = invocation.event
    scale = lambda_runtime.time_scale()
    if scale == 1 or not isinstance(event, dict) or not isinstance(result, dict):
        return result
    route = (str(event.get("httpMethod")), str(event.get("resource")))
    if DEADLINE_ROUTES.get(route) != result.get("statusCode"):
        return result
    table_name = invocation.environment.get("LONGHAUL_TABLE")
    try:
        job_id = json.loads(result.get("body") or "{}").get("job_id")
        if table_name and job_id:
            _scale_deadline(table_name, str(job_id), scale)
    except Exception:  # the job keeps its real-time deadline
        LOG.exception("could not scale the deadline of the job accepted by %s", event.get("path"))
    return result


def scale_review_deadlines(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
    """Runtime middleware: after a review step opened its review (its output waits), move the review's deadline onto
    the local clock (`since + deadline_seconds x time scale`), before the lane's wait reads it and shows it."""
    result = call_next()
    scale = lambda_runtime.time_scale()
    if scale == 1 or not isinstance(result, dict) or result.get("next") != "wait" or "review_id" not in result:
        return result
    table_name = invocation.environment.get("LONGHAUL_TABLE")
    try:
        if table_name:
            _scale_review_deadline(table_name, str(result["review_id"]), scale)
    except Exception:  # the review keeps its real-time deadline (the lane waits for it)
        LOG.exception("could not scale the deadline of review %s", result.get("review_id"))
    return result


def _scale_review_deadline(table_name: str, review_id: str, scale: float) -> None:
    def scaled(review: Mapping[str, Any]) -> datetime | None:  # the review opened at `since`: scale its allowance
        seconds, since = review.get("deadline_seconds"), review.get("since")
        return _parse(since) + timedelta(seconds=float(seconds) * scale) if seconds and since else None

    _move_deadline(table_name, {"pk": f"REVIEW#{review_id}", "sk": "REVIEW"}, "deadline", scaled)


_TABLES: dict[tuple[str | None, str], Any] = {}  # (endpoint, table name) -> table resource
_TABLES_LOCK = threading.Lock()


#: Set by the local platform: the in-memory AWS endpoint every client of the process calls.
ENDPOINT_ENV = "AWS_ENDPOINT_URL"


def _table(name: str) -> Any:
    """One DynamoDB table resource per platform endpoint and table, built once per submission burst rather than per
    job (its own session: boto3's default one is not thread-safe)."""
    import boto3

    key = (os.environ.get(ENDPOINT_ENV), name)  # a platform started later in the process has its own endpoint
    with _TABLES_LOCK:
        if key not in _TABLES:
            _TABLES[key] = boto3.session.Session().resource("dynamodb").Table(name)
        return _TABLES[key]


def _scale_deadline(table_name: str, job_id: str, scale: float) -> None:
    def scaled(job: Mapping[str, Any]) -> datetime | None:
        # The API wrote deadline = accepted + seconds: keep the moment it was accepted, scale the allowance.
        seconds = job.get("deadline_seconds")
        return _parse(job["deadline_at"]) - timedelta(seconds=float(seconds) * (1 - scale)) if seconds else None

    _move_deadline(table_name, {"pk": f"JOB#{job_id}", "sk": "JOB"}, "deadline_at", scaled)


def _parse(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _move_deadline(
    table_name: str, key: dict[str, str], attribute: str, scaled: Callable[[Mapping[str, Any]], datetime | None]
) -> None:
    """Move an item's deadline `attribute` to `scaled(item)`, once (marked), unless it changed meanwhile."""
    from botocore.exceptions import ClientError

    table = _table(table_name)
    item = table.get_item(Key=key, ConsistentRead=True).get("Item") or {}
    deadline = item.get(attribute)
    if not deadline or deadline == item.get(_SCALED_MARK) or (moved := scaled(item)) is None:
        return
    written = moved.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    try:
        table.update_item(
            Key=key,
            UpdateExpression="SET #deadline = :scaled, #mark = :scaled",
            ConditionExpression="#deadline = :real",
            ExpressionAttributeNames={"#deadline": attribute, "#mark": _SCALED_MARK},
            ExpressionAttributeValues={":scaled": written, ":real": deadline},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
