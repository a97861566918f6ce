"""Budgets: the reservation arithmetic (Decimal, micro-dollars rounded up), tenant ceilings, and the store's
reserve → settle/release on moto: a call reserves its prompt's counted tokens plus its output cap; one that does not
fit beside calls in flight waits for a release (bounded, then `RateLimitedError`); its cap is lowered to what is left
when the whole cap can never fit; only a call that cannot fit what is settled is refused, and marks the job
exhausted."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from longhaul.core.budgets import (
    MIN_OUTPUT_TOKENS,
    CallSize,
    JobBudget,
    Price,
    Refused,
    Reservation,
    Room,
    TenantPolicy,
    Wait,
    cost_micro,
    decide,
    job_limits,
    price_of,
    price_table,
    to_micro,
    usd,
    worst_case_input_tokens,
)
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import RETRYABLE_ERROR_NAMES, BudgetExceededError, RateLimitedError
from longhaul.core.records import Job
from longhaul.storage.budgets import BudgetStore, CallLabels, Waiting
from longhaul.storage.jobs import JobStore, NewJob

PRICE = Price(input=Decimal("3.00"), output=Decimal("15.00"))
UNIT = Price(input=Decimal(1), output=Decimal(1))  # a micro-dollar a token: cost figures equal token figures
LABELS = CallLabels("draft_answer", None, "default", "offline", "m", "v1", "hash")


def test_cost_is_exact_in_decimal_and_rounded_up_to_the_micro_dollar() -> None:
    # 1000 input tokens at $3/M and 200 output at $15/M = 3000 + 3000 micro-dollars
    assert cost_micro(1000, 200, PRICE) == 6000
    assert usd(6000) == "0.006000"
    # a fraction of a micro-dollar is charged as a whole one, never lost
    cheap = Price(input=Decimal("0.15"), output=Decimal("0.60"))
    assert cost_micro(3, 0, cheap) == 1  # 0.45 micro-dollars
    assert cost_micro(0, 0, cheap) == 0
    assert to_micro(Decimal("0.0000001")) == 1
    assert to_micro(Decimal("2.50")) == 2_500_000


def test_a_prompt_without_a_counter_counts_every_byte_and_a_reservation_adds_the_output_cap() -> None:
    tokens = worst_case_input_tokens("sys", "héllo", schema={"type": "object"})
    assert tokens == 3 + 6 + len('{"type":"object"}') + 64  # é is two bytes
    held = CallSize(input_tokens=tokens, max_output_tokens=2048, price=PRICE).reservation()
    assert (held.tokens, held.output_tokens) == (tokens + 2048, 2048)
    assert held.cost_micro == cost_micro(tokens, 2048, PRICE)


def _size(input_tokens: int, output: int = 2048, price: Price = UNIT) -> CallSize:
    return CallSize(input_tokens=input_tokens, max_output_tokens=output, price=price)


def test_decide_reserves_waits_lowers_the_cap_or_refuses() -> None:
    room = Room(scope="job", limit_tokens=3000, limit_cost_micro=10**9)
    # the whole cap fits: reserved as the call asks
    assert decide(_size(500), [room]) == Reservation(tokens=2548, cost_micro=2548, output_tokens=2048)
    # it fits once a call in flight releases: wait
    busy = room.model_copy(update={"held_tokens": 2548})
    assert decide(_size(500), [busy]) == Wait()
    # it can never fit whole: the cap is what is left of the budget, once nothing else is in flight
    spent = room.model_copy(update={"settled_tokens": 2000})
    assert decide(_size(500), [spent]) == Reservation(tokens=1000, cost_micro=1000, output_tokens=500, capped_by="job")
    assert decide(_size(500), [spent.model_copy(update={"held_tokens": 300})]) == Wait()
    # not even the prompt and the smallest cap fit what is settled: refused, whatever is held
    full = room.model_copy(update={"settled_tokens": 3000 - 500 - MIN_OUTPUT_TOKENS + 1, "held_tokens": 99})
    assert decide(_size(500), [full]) == Refused(scope="job")
    # the tenant's day decides the same way, and names itself
    day = Room(scope="tenant", limit_tokens=10**9, limit_cost_micro=1000, settled_cost_micro=990)
    assert decide(_size(500), [room, day]) == Refused(scope="tenant")


def test_the_cost_budget_lowers_the_cap_to_the_micro_dollar() -> None:
    # $3/M in, $15/M out: 100 input tokens are 300 micro-dollars; 1000 left leave 700 / 15 = 46 output tokens
    size = _size(100, price=PRICE)
    assert size.output_within(10**9, 1000) == 46
    assert cost_micro(100, 46, PRICE) <= 1000 < cost_micro(100, 47, PRICE)
    assert size.output_within(10**9, 299) < 0  # not even the prompt


def test_prices_of_profiles_and_unknown_models() -> None:
    table = price_table({"my-model": {"input": "0.10", "output": "0.20"}})
    assert price_of("my-model", table).input == Decimal("0.10")
    assert price_of("us.anthropic.claude-sonnet-4-20250514-v1:0", table).output == Decimal("15.00")
    # an unknown model is priced as the most expensive row: a missing row only makes budgets stricter
    # (and caches nothing: its cache reads, if reported, are charged as input)
    dearest = max(table.values(), key=lambda p: (p.output, p.input))
    unknown = price_of("who-knows", table)
    assert (unknown.input, unknown.output) == (dearest.input, dearest.output)
    assert (unknown.cache_min_tokens, unknown.cache_read, unknown.cache_write) == (None, 1, 1)


def test_a_requested_budget_above_the_tenant_ceiling_is_a_problem_naming_the_field() -> None:
    policy = TenantPolicy(max_job_tokens=1000, max_job_cost_usd=Decimal("1.00"))
    assert job_limits(None, policy) == (1000, 1_000_000, [])
    assert job_limits(JobBudget(max_tokens=500), policy) == (500, 1_000_000, [])
    _, _, problems = job_limits(JobBudget(max_tokens=1001, max_cost_usd=Decimal("1.01")), policy)
    assert [p["loc"][-1] for p in problems] == ["max_tokens", "max_cost_usd"]


@pytest.fixture
def budgets(table: Any, clock: Any) -> BudgetStore:
    return BudgetStore(table, clock=clock)


def _job(store: JobStore, tokens: int, cost: int = 10_000_000, job_id: str = "job_b1") -> Job:
    job, _ = store.create_job(
        NewJob(
            job_id=job_id,
            tenant_id="tenant-a",
            workflow="document-analysis",
            input_key="k",
            payload_hash="h",
            model="m",
            estimated_sla_seconds=1,
            budget_tokens=tokens,
            budget_cost_micro=cost,
        )
    )
    return store.transition(job.job_id, JobStatus.RUNNING, event="job_started")  # a running job's step reserves


class Sleeps:
    """The store's sleep: advances the fake clock instead of waiting, and runs `then` (another call settling) on a
    given sleep."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.slept: list[float] = []
        self.then: dict[int, Any] = {}

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(timedelta(seconds=seconds))
        action = self.then.pop(len(self.slept), None)
        if action is not None:
            action()


@pytest.fixture
def sleeps(clock: Any) -> Sleeps:
    return Sleeps(clock)


@pytest.fixture
def waiting_budgets(table: Any, clock: Any, sleeps: Sleeps) -> BudgetStore:
    return BudgetStore(table, clock=clock, waiting=Waiting(bound=5, sleep=sleeps))


def test_reserve_then_settle_moves_the_hold_to_the_actual_usage(store: JobStore, budgets: BudgetStore) -> None:
    job = _job(store, tokens=1000)
    held = budgets.reserve(job, "1/draft/", _size(100, 500), TenantPolicy(), LABELS)
    assert (held.tokens, held.cost_micro, held.output_tokens, held.capped_by) == (600, 600, 500, None)
    after = store.get_job(job.job_id)
    assert after is not None and (after.spent_tokens, after.spent_cost_micro) == (600, 600)
    assert budgets.day_usage("tenant-a")[:3] == (600, 600, 600)

    assert budgets.settle(job.job_id, "1/draft/", input_tokens=100, output_tokens=50, cost_micro=120) is True
    assert budgets.settle(job.job_id, "1/draft/", input_tokens=100, output_tokens=50, cost_micro=120) is False
    settled = store.get_job(job.job_id)
    assert settled is not None
    assert (settled.spent_tokens, settled.spent_cost_micro, settled.cost_micro) == (150, 120, 120)
    assert (settled.usage_input_tokens, settled.usage_output_tokens) == (100, 50)
    assert budgets.day_usage("tenant-a") == (150, 120, 0, 0)  # nothing held any more


def test_a_call_that_does_not_fit_beside_calls_in_flight_waits_for_their_release(
    store: JobStore, waiting_budgets: BudgetStore, sleeps: Sleeps
) -> None:
    # Given a job whose first item holds 2548 of its 3200 tokens (a prompt of 500, an output cap of 2048)
    budgets = waiting_budgets
    job = _job(store, tokens=3200)
    budgets.reserve(job, "1/x/0", _size(500), TenantPolicy(), LABELS)
    # When a second item's call, as large, reserves while the first settles (at its second poll) to what it used
    sleeps.then[2] = lambda: budgets.settle(job.job_id, "1/x/0", input_tokens=500, output_tokens=100, cost_micro=600)
    held = budgets.reserve(job, "1/x/1", _size(500), TenantPolicy(), LABELS)
    # Then it waited for the release instead of failing, and holds its whole cap
    assert len(sleeps.slept) == 2 and held.output_tokens == 2048
    after = store.get_job(job.job_id)
    assert after is not None and after.spent_tokens == 600 + 2548 and after.budget_exhausted is None


def test_a_wait_is_bounded_then_rate_limited_for_the_state_machine_to_retry(
    store: JobStore, waiting_budgets: BudgetStore, sleeps: Sleeps
) -> None:
    job = _job(store, tokens=3000)
    waiting_budgets.reserve(job, "1/x/0", _size(500), TenantPolicy(), LABELS)
    with pytest.raises(RateLimitedError, match="held by calls in flight"):
        waiting_budgets.reserve(job, "1/x/1", _size(500), TenantPolicy(), LABELS)
    assert sum(sleeps.slept) == pytest.approx(5) and max(sleeps.slept) <= 1.0  # bounded, polled with backoff
    assert "RateLimitedError" in RETRYABLE_ERROR_NAMES  # retried with backoff by the state machine
    after = store.get_job(job.job_id)
    assert after is not None and after.spent_tokens == 2548 and after.budget_exhausted is None  # nothing held


def test_a_cap_that_no_longer_fits_is_lowered_to_what_is_left(store: JobStore, budgets: BudgetStore) -> None:
    job = _job(store, tokens=1000)
    budgets.reserve(job, "1/x/0", _size(100, 600), TenantPolicy(), LABELS)
    budgets.settle(job.job_id, "1/x/0", input_tokens=100, output_tokens=600, cost_micro=700)
    held = budgets.reserve(job, "1/y/", _size(100), TenantPolicy(), LABELS)
    assert (held.tokens, held.output_tokens, held.capped_by) == (300, 200, "job")
    ledger = budgets.ledger_item(job.job_id, "1/y/")
    assert ledger is not None and (ledger.reserved_output_tokens, ledger.capped_by) == (200, "job")
    after = store.get_job(job.job_id)
    assert after is not None and after.spent_tokens == 1000  # up to the budget, never over


def test_a_call_that_cannot_fit_what_is_settled_is_refused_and_exhausts_the_job(
    store: JobStore, budgets: BudgetStore
) -> None:
    job = _job(store, tokens=1000)
    budgets.reserve(job, "1/x/0", _size(100, 600), TenantPolicy(), LABELS)
    budgets.settle(job.job_id, "1/x/0", input_tokens=100, output_tokens=600, cost_micro=700)
    with pytest.raises(BudgetExceededError, match="job's budget"):  # 700 + 290 + 16 > 1000
        budgets.reserve(job, "1/x/1", _size(290), TenantPolicy(), LABELS)
    after = store.get_job(job.job_id)
    assert after is not None and after.spent_tokens == 700 and after.budget_exhausted == "job"
    # once exhausted, even a call that would fit is refused: the rest of a fan-out makes no calls
    with pytest.raises(BudgetExceededError):
        budgets.reserve(job, "1/x/2", _size(1, 1), TenantPolicy(), LABELS)
    assert [c.charge_id for c in budgets.ledger(job.job_id)] == ["1/x/0"]


def test_the_tenants_daily_allowance_is_shared_by_its_jobs_through_the_same_waits(
    store: JobStore, waiting_budgets: BudgetStore, sleeps: Sleeps
) -> None:
    budgets, policy = waiting_budgets, TenantPolicy(daily_tokens=1000)
    first, second = _job(store, 5000, job_id="job_b1"), _job(store, 5000, job_id="job_b2")
    budgets.reserve(first, "1/x/", _size(100, 700), policy, LABELS)
    # the second job's call fits the day once the first job's call settles: it waits for it
    sleeps.then[1] = lambda: budgets.settle(first.job_id, "1/x/", input_tokens=100, output_tokens=100, cost_micro=1)
    held = budgets.reserve(second, "1/x/", _size(100, 700), policy, LABELS)
    assert held.output_tokens == 700 and budgets.day_usage("tenant-a")[:3] == (1000, 801, 800)
    # releasing gives the hold back to the job and the day
    assert budgets.release(second.job_id, "1/x/") is True
    assert budgets.day_usage("tenant-a") == (200, 1, 0, 0)
    budgets.reserve(second, "1/x/", _size(100, 700), policy, LABELS)  # a released id again
    assert budgets.day_usage("tenant-a").tokens == 1000
    budgets.settle(second.job_id, "1/x/", input_tokens=100, output_tokens=700, cost_micro=1)
    # what the day has settled leaves no room for the smallest call: refused, naming the allowance
    with pytest.raises(BudgetExceededError, match="daily allowance"):
        budgets.reserve(first, "1/z/", _size(1), policy, LABELS)


def test_policies_default_and_round_trip_exactly(budgets: BudgetStore) -> None:
    assert budgets.policy("nobody") == TenantPolicy()
    policy = TenantPolicy(max_job_tokens=5, max_job_cost_usd=Decimal("0.123456"), daily_tokens=9, routes=["fast"])
    budgets.put_policy("alpha", policy)
    assert budgets.policy("alpha") == policy


def test_a_policy_patch_names_every_policy_field_and_refuses_what_the_policy_refuses() -> None:
    from pydantic import ValidationError

    from longhaul.core import limits
    from longhaul.core.budgets import TenantPolicy, TenantPolicyPatch

    assert set(TenantPolicyPatch.model_fields) == set(TenantPolicy.model_fields)
    for field, value in [
        ("submissions_per_minute", limits.MAX_RATE + 1),
        ("jobs_in_flight", 0),
        ("max_job_tokens", limits.MAX_TOKENS + 1),
        ("agent_max_turns", limits.MAX_AGENT_TURNS + 1),
        ("routes", ["not a route name!"]),
    ]:
        with pytest.raises(ValidationError):
            TenantPolicy.model_validate({field: value})
        with pytest.raises(ValidationError):
            TenantPolicyPatch.model_validate({field: value})
