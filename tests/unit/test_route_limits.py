"""Shared limits per route on moto's DynamoDB: the slots of a minute, the one conditional write per call, the
bounded wait, and a provider's 429 halving the allowance for a while (then recovering additively); and the gateway
using them (a call that finds no room releases its reservation; a 429 lowers the route's allowance)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from longhaul import services as wiring
from longhaul.core import schema
from longhaul.core.errors import RateLimitedError
from longhaul.core.llm import ModelRequest, ModelResponse, Usage
from longhaul.core.settings import Settings
from longhaul.guardrails.gateway import ModelCalls
from longhaul.storage.route_limits import (
    HOLD_SECONDS,
    MIN_SHARE,
    SLOT_SECONDS,
    SLOTS_PER_MINUTE,
    Allowance,
    RouteLimiter,
    RouteLimits,
    slot_share,
)
from tests.unit.conftest import FakeClock
from tests.unit.step_support import running_job

START = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)  # on a minute: slot 0 of its minute


class Counting:
    """The table, counting the limiter's writes (every UpdateItem, admitted or refused)."""

    def __init__(self, table: Any) -> None:
        self.table, self.writes = table, 0

    def update_item(self, **kwargs: Any) -> Any:
        self.writes += 1
        return self.table.update_item(**kwargs)

    def get_item(self, **kwargs: Any) -> Any:
        return self.table.get_item(**kwargs)


def _limiter(table: Any, clock: FakeClock, *, max_wait: float = 30.0) -> tuple[RouteLimiter, list[float]]:
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(timedelta(seconds=seconds))

    return RouteLimiter(table, clock=clock, sleep=sleep, max_wait_seconds=max_wait, jitter=lambda: 0.0), slept


def test_a_minute_s_slots_share_out_exactly_its_allowance() -> None:
    for per_minute in (1, 5, 7, 60, 61, 1000):
        shares = [slot_share(per_minute, slot) for slot in range(12, 12 + SLOTS_PER_MINUTE)]
        assert sum(shares) == per_minute and max(shares) - min(shares) <= 1


def test_a_slot_admits_its_share_with_one_write_each_then_the_next_call_waits_for_the_next_slot(table) -> None:
    clock = FakeClock(START)
    counting = Counting(table)
    limiter, slept = _limiter(counting, clock)
    limits = RouteLimits(requests_per_minute=60)
    for _ in range(10):  # 60 a minute: 10 in each 10-second slot
        assert limiter.acquire("fast", limits, 100).waited_seconds == 0
    assert counting.writes == 10  # one conditional write per admitted call
    admitted = limiter.acquire("fast", limits, 100)
    assert slept == [SLOT_SECONDS] and admitted.tries == 2 and admitted.waited_seconds == SLOT_SECONDS
    slot = int(START.timestamp()) // SLOT_SECONDS
    counted = table.get_item(Key=schema.route_slot_key("fast", slot))["Item"]
    assert (counted["requests"], counted["tokens"]) == (10, 1000)
    assert counted[schema.TTL_ATTRIBUTE] > START.timestamp()  # the slot's item expires


def test_tokens_per_minute_bound_the_slot_too_and_a_call_larger_than_a_slot_goes_alone(table) -> None:
    clock = FakeClock(START)
    limiter, slept = _limiter(table, clock)
    limits = RouteLimits(tokens_per_minute=6000)  # 1,000 a slot
    limiter.acquire("fast", limits, 600)
    limiter.acquire("fast", limits, 400)
    assert not slept
    limiter.acquire("fast", limits, 1)  # the slot is full
    assert slept == [SLOT_SECONDS]
    limiter.acquire("fast", limits, 5000)  # larger than any slot: it waits for an empty one
    assert slept == [SLOT_SECONDS, SLOT_SECONDS]


def test_a_call_that_finds_no_room_within_the_bound_fails_rate_limited(table) -> None:
    clock = FakeClock(START)
    limiter, slept = _limiter(table, clock, max_wait=6)
    limits = RouteLimits(requests_per_minute=6)  # one call a slot
    limiter.acquire("fast", limits, 1)
    clock.advance(timedelta(seconds=5))
    limiter.acquire("fast", limits, 1)  # waits the 5 s left of the slot: within the bound
    assert slept == [5]
    with pytest.raises(RateLimitedError, match="route fast: its shared limit"):
        limiter.acquire("fast", limits, 1)  # the next slot with room begins 10 s from now: past the bound
    assert slept == [5]  # it did not wait in vain


def test_routes_count_apart(table) -> None:
    clock = FakeClock(START)
    limiter, slept = _limiter(table, clock)
    limiter.acquire("fast", RouteLimits(requests_per_minute=6), 1)
    limiter.acquire("default", RouteLimits(requests_per_minute=6), 1)
    assert not slept


def test_a_429_halves_the_allowance_once_a_slot_holds_it_then_recovers_additively(table) -> None:
    clock = FakeClock(START)
    limiter, _ = _limiter(table, clock)
    lowered = limiter.throttled("fast")
    assert lowered is not None and lowered.share == 0.5
    assert limiter.throttled("fast") is None  # a second 429 of the same slot changes nothing
    other, _ = _limiter(table, clock)  # another function reads the shared item
    assert other.allowance("fast").share == 0.5
    now = START.timestamp()
    assert lowered.at(now + HOLD_SECONDS) == 0.5  # held for a minute
    assert lowered.at(now + HOLD_SECONDS + 60) == pytest.approx(0.6)  # then a tenth of the limit a minute
    assert lowered.at(now + HOLD_SECONDS + 600) == 1.0
    clock.advance(timedelta(seconds=SLOT_SECONDS))
    assert limiter.throttled("fast") == Allowance(0.25, START.timestamp() + SLOT_SECONDS)  # a later 429 halves again
    for _ in range(10):
        clock.advance(timedelta(seconds=SLOT_SECONDS))
        limiter.throttled("fast")
    assert limiter.allowance("fast").share == MIN_SHARE


def test_a_halved_allowance_admits_half_a_slot_s_share(table) -> None:
    clock = FakeClock(START)
    limiter, slept = _limiter(table, clock)
    limiter.throttled("fast")
    for _ in range(5):  # 60 a minute halved: 30, 5 a slot
        limiter.acquire("fast", RouteLimits(requests_per_minute=60), 1)
    assert not slept
    limiter.acquire("fast", RouteLimits(requests_per_minute=60), 1)
    assert slept == [SLOT_SECONDS]


# ---------------------------------------------------------------------------------------------- the gateway

ROUTES = {
    "default": {"provider": "offline", "model_id": "m"},
    "limited": {"provider": "offline", "model_id": "m", "requests_per_minute": 6},
}


class Answer(BaseModel):
    answer: str


class Scripted:
    model_id = "m"

    def __init__(self) -> None:
        self.script: list[Exception | None] = [None]
        self.calls = 0

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raised = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if raised is not None:
            raise raised
        usage = Usage(input_tokens=10, output_tokens=5)
        return ModelResponse(text='{"answer": "yes"}', usage=usage, model_id="m", stop_reason="end_turn")


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Scripted:
    scripted = Scripted()
    adapter: Any = lambda route: scripted  # noqa: E731
    adapter.cache_clear = lambda: None
    monkeypatch.setattr(wiring, "_adapter", adapter)
    return scripted


@pytest.fixture
def limited(services: wiring.Services, monkeypatch: pytest.MonkeyPatch) -> wiring.Services:
    settings = Settings.model_validate(
        {
            **services.settings.model_dump(by_alias=True),
            "LONGHAUL_MODEL_ROUTES": json.dumps(ROUTES),
            "LONGHAUL_ROUTE_LIMIT_WAIT_SECONDS": "0",  # no wait: the second call of a slot fails at once
        }
    )
    s = dataclasses.replace(services, settings=settings)
    monkeypatch.setattr("longhaul.storage.route_limits.time.sleep", lambda seconds: None)
    return s


def _calls(s: wiring.Services, job_id: str) -> ModelCalls:
    job = running_job(s.jobs, job_id, route="limited")
    return ModelCalls(s, job, "draft_answer", None, 1)


def _request() -> ModelRequest:
    return ModelRequest(task="t", system="s", prompt="p", context={}, max_tokens=50)


def test_a_call_without_room_fails_rate_limited_and_holds_nothing(limited, model) -> None:
    _calls(limited, "job_rl_1").ask(_request(), Answer)
    with pytest.raises(RateLimitedError) as raised:
        _calls(limited, "job_rl_2").ask(_request(), Answer)
    assert raised.value.step == "draft_answer" and model.calls == 1
    [charge] = limited.budgets.ledger("job_rl_2")
    assert charge.status == "released"
    assert "route_rate_limited" in [e.type for e in limited.jobs.list_events("job_rl_2", limit=50)[0]]


def test_a_provider_429_on_a_limited_route_lowers_its_allowance(limited, model) -> None:
    model.script = [RateLimitedError("ThrottlingException")]
    with pytest.raises(RateLimitedError):
        _calls(limited, "job_rl_3").ask(_request(), Answer)
    assert limited.route_limits.allowance("limited").share == 0.5


def test_a_rate_limited_step_is_retried_longer_and_further_apart_than_a_transient_one() -> None:
    from longhaul.core import limits

    waits = [limits.retry_delay_seconds(n, rate_limited=True) for n in range(limits.RATE_LIMITED_RETRY_MAX_ATTEMPTS)]
    assert waits == [5, 10, 20, 40, 60, 60, 60, 60]
    assert limits.retry_delay_seconds(limits.RATE_LIMITED_RETRY_MAX_ATTEMPTS, rate_limited=True) is None
    assert limits.retry_delay_seconds(limits.RETRY_MAX_ATTEMPTS) is None  # the transient classes' three
