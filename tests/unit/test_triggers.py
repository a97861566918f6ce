"""Schedules and triggers, the pure parts: schedule expressions as EventBridge Scheduler reads them (and their next
times), event patterns as EventBridge reads them, input templates, and the Idempotency-Keys of fires."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice

import pytest

from longhaul.adapters.triggers import safe_name
from longhaul.core import triggers as t

NOW = datetime(2026, 12, 7, 19, 30, 15, tzinfo=UTC)


def problems(expression: str, timezone: str = "UTC", every: int = 60) -> list[str]:
    return [p["msg"] for p in t.check_schedule(expression, timezone, min_interval_seconds=every, now=NOW)]


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 2 * * ? *)",
        "cron(0/15 9-17 ? * MON-FRI *)",
        "cron(0 9 L * ? *)",
        "cron(0 9 15W * ? 2027-2030)",
        "cron(0 9 ? * 2#1 *)",
        "cron(30 23 ? * 6L *)",
        "rate(1 minute)",
        "rate(5 minutes)",
        "rate(1 day)",
    ],
)
def test_expressions_eventbridge_scheduler_accepts_are_accepted(expression):
    assert problems(expression) == []


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("cron(0 2 * * * *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 2 * *)", "6 fields"),
        ("cron(61 2 * * ? *)", "minutes: 61 is outside 0-59"),
        ("cron(0 2 ? * FUNDAY *)", "day-of-week"),
        ("cron(0 0 30 2 ? *)", "never fires"),
        ("cron(0 2 * * ? 2020)", "never fires"),
        ("rate(1 minutes)", "write rate(1 minute)"),
        ("rate(0 minutes)", "positive"),
        ("rate(5 seconds)", "rate(value unit)"),
        ("at(2027-01-01T00:00:00)", "not supported"),
        ("every day", "cron("),
        ("cron(* * * * ? *)", None),  # allowed at the default interval (60 s)
    ],
)
def test_refused_expressions_say_why(expression, reason):
    found = problems(expression)
    if reason is None:
        assert found == []
    else:
        assert found and reason in found[0], found


def test_the_tenants_interval_bounds_rates_and_crons():
    assert "at most every 300 s" in problems("rate(1 minute)", every=300)[0]
    assert "60 s apart" in problems("cron(* * * * ? *)", every=300)[0]
    assert problems("cron(0/5 * * * ? *)", every=300) == []


def test_an_unknown_time_zone_is_refused_at_its_field():
    found = t.check_schedule("rate(1 hour)", "Mars/Olympus", min_interval_seconds=60, now=NOW)
    assert [p["loc"] for p in found] == [["body", "timezone"]]


def test_cron_times_are_read_in_the_schedules_time_zone_and_numbered_as_eventbridge_does():
    # 09:00 in Paris is 08:00 UTC in December; day-of-week 2 is Monday (EventBridge counts from Sunday = 1).
    times = list(islice(t.fire_times("cron(0 9 ? * 2 *)", "Europe/Paris", NOW), 2))
    assert times == [datetime(2026, 12, 14, 8, 0, tzinfo=UTC), datetime(2026, 12, 21, 8, 0, tzinfo=UTC)]
    last_friday = t.next_fire("cron(0 9 ? * 6L *)", "UTC", NOW)
    assert last_friday == datetime(2026, 12, 25, 9, 0, tzinfo=UTC)


def test_a_rate_counts_from_its_anchor():
    anchor = datetime(2026, 12, 7, 19, 0, 0, tzinfo=UTC)
    assert t.next_fire("rate(15 minutes)", "UTC", NOW, anchor=anchor) == datetime(2026, 12, 7, 19, 45, tzinfo=UTC)


def test_two_fires_in_the_same_minute_share_an_idempotency_key_and_the_next_minute_does_not():
    first = t.schedule_idempotency_key("sch_0123456789abcdef0123", datetime(2026, 12, 7, 2, 0, 0, tzinfo=UTC))
    again = t.schedule_idempotency_key("sch_0123456789abcdef0123", datetime(2026, 12, 7, 2, 0, 41, tzinfo=UTC))
    later = t.schedule_idempotency_key("sch_0123456789abcdef0123", datetime(2026, 12, 7, 2, 1, 0, tzinfo=UTC))
    assert first == again == "sch_0123456789abcdef0123:2026-12-07T02:00Z"
    assert later != first


def test_an_objects_key_is_its_bucket_key_and_etag():
    one = t.object_idempotency_key("trg_1", "bucket", "inbox/a/trg_1/x.txt", '"abc"')
    assert one == t.object_idempotency_key("trg_1", "bucket", "inbox/a/trg_1/x.txt", "abc")  # quotes or not
    assert one != t.object_idempotency_key("trg_1", "bucket", "inbox/a/trg_1/x.txt", "abd")
    assert len(one) <= 128 and t.upload_id_for("b", "k", "e").startswith("up_")
    assert len(t.upload_id_for("b", "k", "e")) == 35


@pytest.mark.parametrize(
    "pattern",
    [
        {"source": ["acme.orders"], "detail-type": ["Order Placed"]},
        {"detail": {"amount": [{"numeric": [">", 0, "<=", 500]}], "region": [{"prefix": "eu-"}]}},
        {"detail": {"state": [{"anything-but": ["cancelled", "refunded"]}], "tag": [{"exists": False}]}},
        {"$or": [{"source": ["a"]}, {"detail": {"x": [{"wildcard": "inv-*"}]}}]},
    ],
)
def test_event_patterns_eventbridge_accepts_are_accepted(pattern):
    assert t.check_pattern(pattern) == []


@pytest.mark.parametrize(
    ("pattern", "where", "reason"),
    [
        ({}, ["body", "event_pattern"], "non-empty JSON object"),
        ({"source": "acme"}, ["body", "event_pattern", "source"], "a list"),
        ({"source": []}, ["body", "event_pattern", "source"], "empty list"),
        (
            {"detail": {"amount": [{"numeric": [">", "zero"]}]}},
            ["body", "event_pattern", "detail", "amount", 0],
            "pairs",
        ),
        ({"detail": {"x": [{"regex": "a.*"}]}}, ["body", "event_pattern", "detail", "x", 0], "unknown filter"),
        ({"detail": {"x": [{"exists": "yes"}]}}, ["body", "event_pattern", "detail", "x", 0], "true or false"),
        ({"$or": [{"source": ["a"]}]}, ["body", "event_pattern", "$or"], "at least two"),
    ],
)
def test_refused_event_patterns_name_the_place_and_the_reason(pattern, where, reason):
    (found,) = t.check_pattern(pattern)
    assert found["loc"] == where and reason in found["msg"]


def test_a_template_takes_the_events_fields_at_their_paths():
    template = {"question": {"$event": "detail.question"}, "documents": [{"name": "x", "text": {"$event": "id"}}]}
    event = {"id": "e-1", "detail": {"question": "What changed?"}}
    assert t.render(template, event) == {"question": "What changed?", "documents": [{"name": "x", "text": "e-1"}]}
    assert t.fill(template, "s") == {"question": "s", "documents": [{"name": "x", "text": "s"}]}
    assert [path for _, path in t.placeholders(template)] == ["detail.question", "id"]
    with pytest.raises(t.TemplateError, match=r"detail\.missing"):
        t.render({"q": {"$event": "detail.missing"}}, event)


def test_malformed_placeholders_are_refused_at_their_place():
    found = t.check_template({"question": {"$event": "detail..x"}, "x": {"$event": "a", "other": 1}})
    assert [p["loc"] for p in found] == [
        ["body", "input_template", "question", "$event"],
        ["body", "input_template", "x"],
    ]


def test_names_on_aws_fit_and_never_collide():
    assert safe_name("Longhaul-dev", "alpha") == "Longhaul-dev-alpha"
    long_a, long_b = safe_name("p", "t" * 80 + "a"), safe_name("p", "t" * 80 + "b")
    assert len(long_a) <= 64 and long_a != long_b
    assert safe_name("p", "a b") != safe_name("p", "a-b")  # a character replaced: a digest tells them apart
