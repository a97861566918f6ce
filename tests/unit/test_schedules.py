"""The local scheduler's reading of schedule expressions and the event it delivers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from local.schedules import Schedule, rate_seconds, scheduled_event


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [("rate(5 minutes)", 300), ("rate(1 minute)", 60), ("rate(2 hours)", 7200), ("rate(1 day)", 86400)],
)
def test_rate_expressions_give_their_interval(expression: str, seconds: int) -> None:
    assert rate_seconds(expression) == seconds


@pytest.mark.parametrize("expression", ["cron(0 12 * * ? *)", "rate(5 fortnights)", "rate(-1 minutes)", ""])
def test_anything_else_is_not_a_rate(expression: str) -> None:
    assert rate_seconds(expression) is None


def test_the_event_has_eventbridges_scheduled_event_shape() -> None:
    arn = "arn:aws:events:eu-west-1:210987654321:rule/sweep"
    schedule = Schedule("sweep", arn, "rate(5 minutes)", 300, ("arn:aws:lambda:eu-west-1:210987654321:function:f",))

    event = scheduled_event(schedule, datetime(2025, 1, 2, 3, 4, 5, 600000, tzinfo=UTC))

    assert event.pop("id")
    assert event == {
        "version": "0",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "210987654321",
        "time": "2025-01-02T03:04:05Z",
        "region": "eu-west-1",
        "resources": [arn],
        "detail": {},
    }
