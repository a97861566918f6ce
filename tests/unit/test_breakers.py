"""Circuit breakers on moto: transitions, the window, one probe after the cooldown, and concurrent callers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from longhaul.storage.breakers import BreakerPolicy, BreakerStore
from tests.unit.conftest import FakeClock

POLICY = BreakerPolicy(failures=3, window=timedelta(seconds=60), cooldown=timedelta(seconds=30))


def _store(table: Any, clock: FakeClock) -> BreakerStore:
    return BreakerStore(table, clock=clock, policy=POLICY)


def test_it_opens_after_n_failures_within_the_window_only(table: Any, clock: FakeClock) -> None:
    breakers = _store(table, clock)
    assert breakers.failed("p", "m") is None
    clock.advance(timedelta(seconds=61))  # the window passed: counting starts again
    assert breakers.failed("p", "m") is None
    assert breakers.failed("p", "m") is None
    opened = breakers.failed("p", "m")
    assert opened is not None and (opened.before, opened.after, opened.failures) == ("closed", "open", 3)
    assert breakers.admit("p", "m") == ("open", None)
    assert breakers.admit("p", "other-model") == ("closed", None)  # per provider and model


def test_after_the_cooldown_one_probe_closes_it_or_opens_it_again(table: Any, clock: FakeClock) -> None:
    breakers = _store(table, clock)
    for _ in range(3):
        breakers.failed("p", "m")
    clock.advance(timedelta(seconds=30))
    admission, moved = breakers.admit("p", "m")
    assert admission == "probe" and moved is not None and moved.after == "half_open"
    assert breakers.admit("p", "m")[0] == "open"  # only one probe
    reopened = breakers.failed("p", "m")
    assert reopened is not None and reopened.after == "open"
    clock.advance(timedelta(seconds=30))
    assert breakers.admit("p", "m")[0] == "probe"
    closed = breakers.succeeded("p", "m")
    assert closed is not None and closed.after == "closed"
    assert breakers.get("p", "m").failures == 0


def _racers(table: Any, clock: FakeClock, policy: BreakerPolicy, n: int) -> list[BreakerStore]:
    """`n` callers (functions) whose first read of the breaker all happened before any of them wrote: each then
    writes against the same stale snapshot, as concurrent callers would (moto does not serialise threads' writes)."""
    snapshot = BreakerStore(table, clock=clock, policy=policy).get("p", "m")
    racers = []
    for _ in range(n):
        store = BreakerStore(table, clock=clock, policy=policy)
        real, first = store.get, [True]

        def stale(provider: str, model_id: str, real: Any = real, first: list[bool] = first) -> Any:
            if first[0]:
                first[0] = False
                return snapshot
            return real(provider, model_id)

        store.get = stale  # type: ignore[method-assign]
        racers.append(store)
    return racers


def test_concurrent_failures_are_each_counted_once_and_open_it_once(table: Any, clock: FakeClock) -> None:
    policy = BreakerPolicy(failures=8, window=timedelta(minutes=5))
    moved = [racer.failed("p", "m") for racer in _racers(table, clock, policy, 8)]
    assert [m.after for m in moved if m is not None] == ["open"]
    assert BreakerStore(table, clock=clock).get("p", "m").failures == 8


def test_concurrent_callers_after_the_cooldown_get_exactly_one_probe(table: Any, clock: FakeClock) -> None:
    breakers = _store(table, clock)
    for _ in range(3):
        breakers.failed("p", "m")
    clock.advance(timedelta(seconds=31))
    admissions = [racer.admit("p", "m")[0] for racer in _racers(table, clock, POLICY, 8)]
    assert sorted(admissions) == ["open"] * 7 + ["probe"]
