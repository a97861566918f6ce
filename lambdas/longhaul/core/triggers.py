"""Jobs started by something other than a caller: a schedule (EventBridge Scheduler), an object dropped in a
trigger's S3 inbox, or an event matching a trigger's EventBridge pattern.

What this module owns is pure: the contracts of the routes, the grammar of a schedule's expression as EventBridge
Scheduler accepts it (`cron(min hour day-of-month month day-of-week year)` with `?`, `L`, `W`, `#`; `rate(n unit)`),
its next fire times (croniter, on the schedule's time zone), the grammar of an event pattern as EventBridge accepts it
(checked here, so a bad pattern is a 422 naming where it is wrong rather than a rule AWS refuses later), and input
templates: JSON whose `{"$event": "path"}` objects take the event's field at that dotted path.

An invocation names what fired it (`Firing`), so the Idempotency-Key of the job it starts is derived from what it is,
not when it arrived: a duplicate delivery of the same fire starts nothing new.

(No `from __future__ import annotations`: the API's models are built from these annotations at import.)
"""

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import Field

from longhaul.core.budgets import JobBudget, SlaClass
from longhaul.core.contracts import CALLBACK_URL_PATTERN, PATTERN_END, Strict
from longhaul.core.model import Model

MAX_TEMPLATE_BYTES = 16_384
MAX_PATTERN_BYTES = 4_096  # EventBridge's limit on an event pattern is 4 KB... of JSON text (we check the same)
MIN_BATCH_SECONDS = 1
MAX_BATCH_SECONDS = 3600
PLACEHOLDER = "$event"

# ---------------------------------------------------------------- contracts


ScheduleText = Annotated[
    str,
    Field(
        min_length=6,
        max_length=256,
        description="`cron(minutes hours day-of-month month day-of-week year)` or `rate(value unit)`, as EventBridge "
        "Scheduler reads them (`cron(0 2 * * ? *)`, `rate(15 minutes)`).",
        examples=["cron(0 2 * * ? *)", "rate(1 hour)"],
    ),
]
TimeZone = Annotated[
    str, Field(min_length=1, max_length=64, description="An IANA time zone the cron fields are read in.")
]
CallbackUrl = Annotated[
    str | None,
    Field(default=None, max_length=2048, pattern=CALLBACK_URL_PATTERN, description="As a job's `callback_url`."),
]
Budget = Annotated[JobBudget | None, Field(default=None, description="As a job's `budget`.")]
Workflow = Annotated[str, Field(min_length=1, max_length=64, description="The workflow of the jobs it starts.")]


class ScheduleRequest(Strict):
    """A schedule: a job of `workflow` on `input` at every time `schedule` names."""

    workflow: Workflow
    input: dict[str, Any] = Field(description="The job's input (the workflow's input model).")
    schedule: ScheduleText
    timezone: TimeZone = "UTC"
    sla_class: SlaClass = "batch"
    budget: Budget
    callback_url: CallbackUrl
    enabled: bool = True


class SchedulePatch(Strict):
    """A change to a schedule (merge semantics: a field given replaces it, an omitted one is kept)."""

    input: dict[str, Any] | None = None
    schedule: ScheduleText | None = None
    timezone: TimeZone | None = None
    sla_class: SlaClass | None = None
    budget: Budget
    callback_url: CallbackUrl
    enabled: bool | None = None


class ScheduleView(Model):
    schedule_id: str
    workflow: str
    input: dict[str, Any]
    schedule: str
    timezone: str
    sla_class: SlaClass
    budget: JobBudget | None = None
    callback_url: str | None = None
    enabled: bool
    created_at: datetime
    updated_at: datetime
    next_run_at: datetime | None = Field(default=None, description="When it fires next (null while paused).")
    last_fired_at: datetime | None = Field(default=None, description="The scheduled time of its last fire.")
    last_job_id: str | None = None
    last_error: str | None = Field(default=None, description="Why its last fire started no job, if it did not.")


class ScheduleList(Model):
    schedules: list[ScheduleView]


class TriggerRequest(Strict):
    """A trigger: `s3` starts a job for each object created in its inbox (or one per `batch_seconds` window);
    `eventbridge` one for each event its `event_pattern` matches. `input_template` is the job's input, where an object
    `{"$event": "path"}` takes the field at that dotted path of the event (`detail.order.id`); for `s3` the event is
    the object (`bucket`, `key`, `name`, `etag`, `size`, `document`, `documents`), and a workflow's `documents` not
    given in the template are the object (or the window's objects)."""

    type: Literal["s3", "eventbridge"]
    workflow: Workflow
    input_template: dict[str, Any] = Field(description='The job\'s input, with `{"$event": "path"}` placeholders.')
    prefix: Annotated[
        str,
        Field(
            default="",
            max_length=256,
            pattern=rf"^([A-Za-z0-9._-]+/)*{PATTERN_END}",
            description="`s3`: only objects under this folder of the inbox (`reports/`); empty: the whole inbox.",
        ),
    ]
    batch_seconds: Annotated[
        int | None,
        Field(
            default=None,
            ge=MIN_BATCH_SECONDS,
            le=MAX_BATCH_SECONDS,
            description="`s3`: one job for the objects of each window of this many seconds (else one per object).",
        ),
    ]
    event_pattern: dict[str, Any] | None = Field(
        default=None, description="`eventbridge`: the EventBridge event pattern of the events that start a job."
    )
    event_bus: Annotated[
        str | None,
        Field(
            default=None,
            pattern=rf"^[A-Za-z0-9._/-]{{1,256}}{PATTERN_END}",
            description="`eventbridge`: the bus the rule is on; default: the platform's.",
        ),
    ]
    sla_class: SlaClass = "standard"
    budget: Budget
    callback_url: CallbackUrl
    enabled: bool = True


class TriggerPatch(Strict):
    input_template: dict[str, Any] | None = None
    event_pattern: dict[str, Any] | None = None
    sla_class: SlaClass | None = None
    budget: Budget
    callback_url: CallbackUrl
    enabled: bool | None = None


class TriggerView(Model):
    trigger_id: str
    type: Literal["s3", "eventbridge"]
    workflow: str
    input_template: dict[str, Any]
    prefix: str = ""
    inbox: str | None = Field(default=None, description="`s3`: the key prefix whose new objects start jobs.")
    bucket: str | None = Field(default=None, description="`s3`: the inbox's bucket.")
    batch_seconds: int | None = None
    event_pattern: dict[str, Any] | None = None
    event_bus: str | None = None
    sla_class: SlaClass
    budget: JobBudget | None = None
    callback_url: str | None = None
    enabled: bool
    created_at: datetime
    updated_at: datetime
    last_fired_at: datetime | None = None
    last_job_id: str | None = None
    last_error: str | None = None


class TriggerList(Model):
    triggers: list[TriggerView]


# ---------------------------------------------------------------- schedule expressions


class InvalidExpression(ValueError):
    """A schedule expression EventBridge Scheduler would refuse, or one that never fires; the message says why."""


_RATE = re.compile(r"^rate\((?P<value>\d+) (?P<unit>minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((?P<fields>[^()]*)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]  # EventBridge numbers them 1-7 from Sunday
_FIELDS = ("minutes", "hours", "day-of-month", "month", "day-of-week", "year")
_RANGES = {"minutes": (0, 59), "hours": (0, 23), "day-of-month": (1, 31), "month": (1, 12), "day-of-week": (1, 7)}
_YEARS = (1970, 2199)
_LOOKAHEAD_YEARS = 5  # a cron with no time within this many years is refused (`cron(0 0 30 2 ? *)` never fires)


def _value(token: str, field: str) -> int:
    names = _MONTHS if field == "month" else _DAYS if field == "day-of-week" else []
    if token.upper() in names:
        return names.index(token.upper()) + 1
    if not token.isdigit():
        raise InvalidExpression(f"{field}: {token!r} is not a number" + (f" or one of {names}" if names else ""))
    low, high = _YEARS if field == "year" else _RANGES[field]
    number = int(token)
    if not low <= number <= high:
        raise InvalidExpression(f"{field}: {number} is outside {low}-{high}")
    return number


def _check_field(text: str, field: str) -> None:
    """One cron field: `*`, `?` (day fields), values, ranges `a-b`, increments `a/n` or `*/n`, lists, and the day
    fields' `L`, `W` (`15W`, `LW`) and `#` (`MON#2`)."""
    if text == "?":
        if field not in ("day-of-month", "day-of-week"):
            raise InvalidExpression(f"{field}: `?` is allowed only in day-of-month or day-of-week")
        return
    for part in text.split(","):
        if not part:
            raise InvalidExpression(f"{field}: an empty item in {text!r}")
        if field == "day-of-month" and part in ("L", "LW"):
            continue
        if field == "day-of-month" and part.endswith("W"):
            _value(part[:-1], field)
            continue
        if field == "day-of-week" and (part == "L" or part.endswith("L")) and "," not in text:
            if part != "L":
                _value(part[:-1], field)
            continue
        if field == "day-of-week" and "#" in part:
            day, _, nth = part.partition("#")
            _value(day, field)
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                raise InvalidExpression(f"{field}: the week in {part!r} must be 1-5")
            continue
        base, slash, step = part.partition("/")
        if slash and (not step.isdigit() or int(step) < 1):
            raise InvalidExpression(f"{field}: the increment in {part!r} must be a positive number")
        if base == "*":
            continue
        first, dash, last = base.partition("-")
        low = _value(first, field)
        if dash:
            high = _value(last, field)
            if high < low and field != "day-of-week":
                raise InvalidExpression(f"{field}: the range {base!r} runs backwards")


def parse_expression(expression: str) -> tuple[str, Any]:
    """("rate", seconds) or ("cron", [six fields]); `InvalidExpression` saying what is wrong otherwise."""
    text = expression.strip()
    if text.startswith("at("):
        raise InvalidExpression("one-time `at(...)` schedules are not supported here: use cron(...) or rate(...)")
    rate = _RATE.match(text)
    if rate is not None:
        value, unit = int(rate["value"]), rate["unit"]
        if value < 1:
            raise InvalidExpression("a rate's value must be a positive whole number")
        if (value == 1) != (not unit.endswith("s")):
            raise InvalidExpression(f"write rate({value} {unit.rstrip('s') + ('' if value == 1 else 's')})")
        return "rate", value * _UNIT_SECONDS[unit.rstrip("s")]
    if text.startswith("rate("):
        raise InvalidExpression("write rate(value unit): a positive whole number and minute(s), hour(s) or day(s)")
    cron = _CRON.match(text)
    if cron is None:
        raise InvalidExpression("write cron(minutes hours day-of-month month day-of-week year) or rate(value unit)")
    fields = cron["fields"].split()
    if len(fields) != 6:
        raise InvalidExpression(f"a cron expression has 6 fields ({' '.join(_FIELDS)}), this one has {len(fields)}")
    for value, field in zip(fields, _FIELDS, strict=True):
        _check_field(value, field)
    day_of_month, day_of_week = fields[2], fields[4]
    if (day_of_month == "?") == (day_of_week == "?"):
        raise InvalidExpression("give `?` in exactly one of day-of-month and day-of-week (`cron(0 2 * * ? *)`)")
    return "cron", fields


def check_timezone(name: str) -> ZoneInfo:
    """The zone, or `InvalidExpression` naming it (an IANA name: `Europe/Paris`, `UTC`)."""
    if name not in _zones():
        raise InvalidExpression(f"{name!r} is not an IANA time zone (e.g. `Europe/Paris`, `UTC`)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidExpression(f"{name!r} is not an IANA time zone (e.g. `Europe/Paris`, `UTC`)") from None


_ZONES: set[str] = set()


def _zones() -> set[str]:
    if not _ZONES:
        _ZONES.update(available_timezones() | {"UTC"})
    return _ZONES


def _croniter_text(fields: Sequence[str]) -> str:
    """The five fields croniter reads: day-of-week numbered from 0 (EventBridge: from 1), `?` as `*`."""
    minute, hour, dom, month, dow = fields[:5]

    def shift(match: re.Match[str]) -> str:
        return str(int(match.group()) - 1)

    dow = "*" if dow == "?" else re.sub(r"(?<![#\d])\d+", shift, dow)
    dow = re.sub(r"^(\w+)L$", r"L\1", dow)  # EventBridge's `6L` (the month's last Friday) is croniter's `L5`
    return " ".join((minute, hour, "*" if dom == "?" else dom, month, dow))


def _year_allows(field: str, year: int) -> bool:
    if field == "*":
        return True
    for part in field.split(","):
        base, _, step = part.partition("/")
        first, dash, last = base.partition("-")
        low = _YEARS[0] if first == "*" else int(first)
        high = int(last) if dash else (_YEARS[1] if step or first == "*" else low)
        if low <= year <= high and (year - low) % int(step or 1) == 0:
            return True
    return False


def fire_times(
    expression: str, timezone: str, after: datetime, *, anchor: datetime | None = None
) -> Iterator[datetime]:
    """The times the schedule fires after `after` (aware, UTC), in order. A rate fires every interval from `anchor`
    (its creation, as EventBridge Scheduler counts it) ; a cron on its fields in `timezone`."""
    kind, parsed = parse_expression(expression)
    if kind == "rate":
        start = anchor or after
        step = timedelta(seconds=parsed)
        n = max(1, int((after - start) / step) + 1)
        while True:
            moment = start + n * step
            if moment > after:
                yield moment.astimezone(UTC)
            n += 1
    from croniter import CroniterBadCronError, CroniterBadDateError, croniter  # (imported where a cron is read)

    zone = check_timezone(timezone)
    try:
        times = croniter(_croniter_text(parsed), after.astimezone(zone))
    except CroniterBadCronError as error:
        raise InvalidExpression(str(error)) from None
    limit = after.year + _LOOKAHEAD_YEARS
    while True:
        try:
            found: datetime = times.get_next(datetime)
        except CroniterBadDateError:
            return
        if found.year > min(limit, _YEARS[1]):
            return
        if _year_allows(parsed[5], found.year):
            yield found.astimezone(UTC)


def next_fire(expression: str, timezone: str, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
    return next(fire_times(expression, timezone, after, anchor=anchor), None)


def check_schedule(expression: str, timezone: str, *, min_interval_seconds: int, now: datetime) -> list[dict[str, Any]]:
    """The problems of a schedule's expression and time zone (`errors` entries at their body paths): the grammar, a
    zone that is not one, a schedule that never fires, and one firing more often than `min_interval_seconds` (the
    tenant's policy: two fires closer than that, among its next few)."""
    problems: list[dict[str, Any]] = []
    try:
        check_timezone(timezone)
    except InvalidExpression as error:
        problems.append({"loc": ["body", "timezone"], "msg": str(error), "type": "invalid_timezone"})
        timezone = "UTC"
    try:
        kind, parsed = parse_expression(expression)
        if kind == "rate":
            if parsed < min_interval_seconds:
                raise InvalidExpression(
                    f"fires every {parsed} s; this tenant's schedules may fire at most every {min_interval_seconds} s"
                )
        else:
            times = []
            for moment in fire_times(expression, timezone, now):
                times.append(moment)
                if len(times) == 6:
                    break
            if not times:
                raise InvalidExpression(f"never fires within {_LOOKAHEAD_YEARS} years")
            closest = min(((b - a).total_seconds() for a, b in pairwise(times)), default=None)
            if closest is not None and closest < min_interval_seconds:
                raise InvalidExpression(
                    f"fires {int(closest)} s apart; this tenant's schedules may fire at most every "
                    f"{min_interval_seconds} s"
                )
    except InvalidExpression as error:
        problems.append({"loc": ["body", "schedule"], "msg": str(error), "type": "invalid_schedule"})
    return problems


def minute_of(moment: datetime) -> datetime:
    """A fire's identity: its scheduled time to the minute (EventBridge Scheduler's finest granularity), UTC."""
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def schedule_idempotency_key(schedule_id: str, scheduled_at: datetime) -> str:
    """`sch_…:2026-12-07T02:00Z`: a second fire of the same minute (a retried delivery) finds the same job."""
    return f"{schedule_id}:{minute_of(scheduled_at).strftime('%Y-%m-%dT%H:%MZ')}"


def object_idempotency_key(trigger_id: str, bucket: str, key: str, etag: str) -> str:
    """One job per object version: the same object delivered twice is one job, a new upload under the key another."""
    digest = hashlib.sha256(f"{bucket}\n{key}\n{etag.strip(chr(34))}".encode()).hexdigest()[:40]
    return f"{trigger_id}:obj:{digest}"


def window_idempotency_key(trigger_id: str, window: str) -> str:
    return f"{trigger_id}:win:{window}"


def event_idempotency_key(trigger_id: str, event_id: str) -> str:
    digest = hashlib.sha256(event_id.encode()).hexdigest()[:40]
    return f"{trigger_id}:evt:{digest}"


def upload_id_for(bucket: str, key: str, etag: str) -> str:
    """The upload an inbox object becomes (`up_` + 32 hex, as `/v1/uploads` names them), the same for a redelivery."""
    return "up_" + hashlib.sha256(f"{bucket}\n{key}\n{etag.strip(chr(34))}".encode()).hexdigest()[:32]


# ---------------------------------------------------------------- event patterns

_FILTERS = {"prefix", "suffix", "anything-but", "numeric", "exists", "equals-ignore-case", "wildcard", "cidr"}
_OPERATORS = {"<", "<=", "=", ">", ">="}


def check_pattern(pattern: Any, loc: Sequence[str | int] = ("body", "event_pattern")) -> list[dict[str, Any]]:
    """The problems of an EventBridge event pattern (`errors` entries): an object whose leaves are arrays of values
    (string, number, boolean, null) or filters (`prefix`, `suffix`, `anything-but`, `numeric`, `exists`,
    `equals-ignore-case`, `wildcard`, `cidr`), `$or` a list of patterns."""
    import json

    problems: list[dict[str, Any]] = []

    def fail(where: Sequence[str | int], msg: str) -> None:
        problems.append({"loc": list(where), "msg": msg, "type": "invalid_event_pattern"})

    if not isinstance(pattern, Mapping) or not pattern:
        fail(loc, 'an event pattern is a non-empty JSON object (`{"source": ["my.app"]}`)')
        return problems
    if len(json.dumps(pattern)) > MAX_PATTERN_BYTES:
        fail(loc, f"an event pattern is at most {MAX_PATTERN_BYTES} bytes of JSON")
        return problems

    def walk(node: Mapping[str, Any], where: list[str | int]) -> None:
        for key, value in node.items():
            here = [*where, key]
            if key == "$or":
                if not isinstance(value, list) or len(value) < 2:
                    fail(here, "`$or` is a list of at least two patterns")
                    continue
                for i, option in enumerate(value):
                    if not isinstance(option, Mapping) or not option:
                        fail([*here, i], "each `$or` option is a non-empty object")
                    else:
                        walk(option, [*here, i])
            elif isinstance(value, Mapping):
                if not value:
                    fail(here, "an empty object matches nothing: give a field with a list of values")
                else:
                    walk(value, here)
            elif isinstance(value, list):
                if not value:
                    fail(here, "an empty list matches nothing")
                for i, item in enumerate(value):
                    check_match(item, [*here, i])
            else:
                fail(here, f"a field's values are a list (`[{json.dumps(value)}]`), not a bare value")

    def check_match(item: Any, where: list[str | int]) -> None:
        if item is None or isinstance(item, str | bool | int | float):
            return
        if not isinstance(item, Mapping) or len(item) != 1:
            fail(where, f"a value is a string, number, boolean, null or one filter of {sorted(_FILTERS)}")
            return
        name, arg = next(iter(item.items()))
        if name not in _FILTERS:
            fail(where, f"unknown filter {name!r}: one of {sorted(_FILTERS)}")
        elif name in ("prefix", "suffix"):
            if not (isinstance(arg, str) or (isinstance(arg, Mapping) and list(arg) == ["equals-ignore-case"])):
                fail(where, f"`{name}` takes a string")
        elif name in ("equals-ignore-case", "wildcard", "cidr"):
            if not isinstance(arg, str):
                fail(where, f"`{name}` takes a string")
            elif name == "wildcard" and "**" in arg:
                fail(where, "`wildcard` may not have two `*` in a row")
        elif name == "exists":
            if not isinstance(arg, bool):
                fail(where, "`exists` takes true or false")
        elif name == "anything-but":
            ok = isinstance(arg, str | int | float) and not isinstance(arg, bool)
            ok = ok or (isinstance(arg, list) and bool(arg) and all(isinstance(v, str | int | float) for v in arg))
            ok = ok or (isinstance(arg, Mapping) and len(arg) == 1 and next(iter(arg)) in ("prefix", "suffix"))
            if not ok:
                fail(where, "`anything-but` takes a value, a list of values, or {prefix|suffix: string}")
        elif name == "numeric":
            pairs = arg if isinstance(arg, list) else []
            good = len(pairs) in (2, 4) and all(
                (isinstance(v, str) and v in _OPERATORS)
                if i % 2 == 0
                else (isinstance(v, int | float) and not isinstance(v, bool))
                for i, v in enumerate(pairs)
            )
            if not good:
                fail(where, '`numeric` takes one or two [operator, number] pairs: [">", 0, "<=", 5]')

    walk(pattern, list(loc))
    return problems


# ---------------------------------------------------------------- input templates


class TemplateError(ValueError):
    """An event lacks a field its trigger's template takes."""


def placeholders(template: Any, where: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(location in the input, the event path) of each `{"$event": "path"}` in a template."""
    if isinstance(template, Mapping):
        if list(template) == [PLACEHOLDER]:
            yield where, str(template[PLACEHOLDER])
            return
        for key, value in template.items():
            yield from placeholders(value, (*where, key))
    elif isinstance(template, list):
        for i, value in enumerate(template):
            yield from placeholders(value, (*where, i))


def check_template(template: Any, loc: Sequence[str | int] = ("body", "input_template")) -> list[dict[str, Any]]:
    """Placeholders must name a dotted path of letters, digits, `_` and `-` (and be the object's only key)."""
    import json

    problems: list[dict[str, Any]] = []
    if len(json.dumps(template, default=str)) > MAX_TEMPLATE_BYTES:
        return [{"loc": list(loc), "msg": f"at most {MAX_TEMPLATE_BYTES} bytes of JSON", "type": "too_long"}]

    def walk(node: Any, where: list[str | int]) -> None:
        if isinstance(node, Mapping):
            if PLACEHOLDER in node and len(node) != 1:
                problems.append(
                    {"loc": where, "msg": f"`{PLACEHOLDER}` is the only key of its object", "type": "invalid_template"}
                )
            elif PLACEHOLDER in node:
                path = node[PLACEHOLDER]
                if not isinstance(path, str) or not re.fullmatch(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*", path):
                    problems.append(
                        {
                            "loc": [*where, PLACEHOLDER],
                            "msg": "a dotted path of the event's fields (`detail.order.id`)",
                            "type": "invalid_template",
                        }
                    )
                return
            for key, value in node.items():
                walk(value, [*where, key])
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, [*where, i])

    walk(template, list(loc))
    return problems


def field_at(event: Any, path: str) -> Any:
    node = event
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise TemplateError(f"the event has no field {path!r}")
    return node


def render(template: Any, event: Any) -> Any:
    """The template with each placeholder replaced by the event's field; `TemplateError` for a missing one."""
    if isinstance(template, Mapping):
        if list(template) == [PLACEHOLDER]:
            return field_at(event, str(template[PLACEHOLDER]))
        return {key: render(value, event) for key, value in template.items()}
    if isinstance(template, list):
        return [render(value, event) for value in template]
    return template


def fill(template: Any, value: Any) -> Any:
    """The template with every placeholder replaced by `value` (to check a template's other fields)."""
    if isinstance(template, Mapping):
        if list(template) == [PLACEHOLDER]:
            return value
        return {key: fill(item, value) for key, item in template.items()}
    if isinstance(template, list):
        return [fill(item, value) for item in template]
    return template


def sample_object_event(bucket: str = "bucket", key: str = "inbox/t/trg/sample.txt") -> dict[str, Any]:
    """An S3 inbox's event as a template reads it, for checking a template at creation."""
    document = {"name": "sample.txt", "upload_id": "up_" + "0" * 32}
    return {
        "bucket": bucket,
        "key": key,
        "name": "sample.txt",
        "etag": "0" * 32,
        "size": 1,
        "document": document,
        "documents": [document],
    }
