"""Budgets: the reservation arithmetic (Decimal, micro-dollars rounded up), tenant ceilings, and the store's
reserve → settle/release on moto: a reservation that does not fit holds nothing and marks the job exhausted."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from longhaul.core.budgets import (
    JobBudget,
    Price,
    Reservation,
    TenantPolicy,
    cost_micro,
    job_limits,
    price_of,
    price_table,
    to_micro,
    usd,
    worst_case_input_tokens,
)
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import BudgetExceededError
from longhaul.core.records import Job
from longhaul.storage.budgets import BudgetStore, CallLabels
from longhaul.storage.jobs import JobStore, NewJob

PRICE = Price(input=Decimal("3.00"), output=Decimal("15.00"))
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


def test_a_worst_case_counts_every_prompt_byte_and_the_whole_output_limit() -> None:
    tokens = worst_case_input_tokens("sys", "héllo", schema={"type": "object"})
    assert tokens == 3 + 6 + len('{"type":"object"}') + 64  # é is two bytes
    worst = Reservation.worst_case(tokens, 2048, PRICE)
    assert worst.tokens == tokens + 2048
    assert worst.cost_micro == cost_micro(tokens, 2048, PRICE)


def test_prices_of_profiles_and_unknown_models() -> None:
    table = price_table({"my-model": {"input": "0.10", "output": "0.20"}})
    assert price_of("my-model", table).input == Decimal("0.10")
    assert price_of("us.anthropic.claude-sonnet-4-20250514-v1:0", table).output == Decimal("15.00")
    # an unknown model is priced as the most expensive row: a missing row only makes budgets stricter
    assert price_of("who-knows", table) == max(table.values(), key=lambda p: (p.output, p.input))


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


def test_reserve_then_settle_moves_the_hold_to_the_actual_usage(store: JobStore, budgets: BudgetStore) -> None:
    job = _job(store, tokens=1000)
    budgets.reserve(job, "1/draft/", Reservation(tokens=600, cost_micro=900), TenantPolicy(), LABELS)
    held = store.get_job(job.job_id)
    assert held is not None and (held.spent_tokens, held.spent_cost_micro) == (600, 900)
    assert budgets.day_usage("tenant-a").tokens == 600

    assert budgets.settle(job.job_id, "1/draft/", input_tokens=100, output_tokens=50, cost_micro=120) is True
    assert budgets.settle(job.job_id, "1/draft/", input_tokens=100, output_tokens=50, cost_micro=120) is False
    settled = store.get_job(job.job_id)
    assert settled is not None
    assert (settled.spent_tokens, settled.spent_cost_micro, settled.cost_micro) == (150, 120, 120)
    assert (settled.usage_input_tokens, settled.usage_output_tokens) == (100, 50)
    assert budgets.day_usage("tenant-a").tokens == 150


def test_a_reservation_that_does_not_fit_holds_nothing_and_exhausts_the_job(
    store: JobStore, budgets: BudgetStore
) -> None:
    job = _job(store, tokens=1000)
    budgets.reserve(job, "1/x/0", Reservation(tokens=700, cost_micro=1), TenantPolicy(), LABELS)
    with pytest.raises(BudgetExceededError, match="job's budget"):
        budgets.reserve(job, "1/x/1", Reservation(tokens=301, cost_micro=1), TenantPolicy(), LABELS)
    after = store.get_job(job.job_id)
    assert after is not None and after.spent_tokens == 700 and after.budget_exhausted == "job"
    # once exhausted, even a call that would fit is refused: the rest of a fan-out makes no calls
    with pytest.raises(BudgetExceededError):
        budgets.reserve(job, "1/x/2", Reservation(tokens=1, cost_micro=1), TenantPolicy(), LABELS)
    assert [c.charge_id for c in budgets.ledger(job.job_id)] == ["1/x/0"]


def test_the_tenants_daily_allowance_is_shared_by_its_jobs(store: JobStore, budgets: BudgetStore) -> None:
    policy = TenantPolicy(daily_tokens=1000)
    first, second = _job(store, 5000, job_id="job_b1"), _job(store, 5000, job_id="job_b2")
    budgets.reserve(first, "1/x/", Reservation(tokens=800, cost_micro=1), policy, LABELS)
    with pytest.raises(BudgetExceededError, match="daily allowance"):
        budgets.reserve(second, "1/x/", Reservation(tokens=201, cost_micro=1), policy, LABELS)
    # releasing gives the hold back to the job and the day
    assert budgets.release(first.job_id, "1/x/") is True
    budgets.reserve(first, "1/x/", Reservation(tokens=900, cost_micro=1), policy, LABELS)  # a released id again
    assert budgets.day_usage("tenant-a").tokens == 900


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
