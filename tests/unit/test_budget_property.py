"""A property of the budget store on moto: concurrent calls of a job (a fan-out's items, each climbing the ladder,
then one call after them) reserving, waiting and settling in any interleaving. A job whose unbudgeted run uses U
completes with a budget of 1.3 × U (tokens, dollars, or the tenant's day) at any fan-out concurrency; with any
budget, what is held and settled never exceeds it, and a job fails only once what it has settled leaves no room for
its next call's smallest reservation."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longhaul.core.budgets import MIN_OUTPUT_TOKENS, CallSize, Price, Reservation, TenantPolicy, Wait, cost_micro
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import BudgetExceededError
from longhaul.core.records import Job
from longhaul.storage.budgets import BudgetStore, CallLabels
from longhaul.storage.jobs import JobStore, NewJob

PRICE = Price(input=Decimal("1.00"), output=Decimal("5.00"))  # the offline model's notional price
LOTS = 10**9
Limit = Literal["tokens", "cost", "day"]


@dataclass(frozen=True)
class Call:
    """A model call as the offline model makes it: its prompt's counted tokens, the output it needs, its cap."""

    input_tokens: int
    needed: int
    cap: int

    @property
    def size(self) -> CallSize:
        return CallSize(input_tokens=self.input_tokens, max_output_tokens=self.cap, price=PRICE)


calls = st.builds(Call, st.integers(50, 1500), st.integers(MIN_OUTPUT_TOKENS, 900), st.sampled_from([1024, 2048, 4096]))
jobs = st.tuples(
    st.lists(st.lists(calls, min_size=1, max_size=2), min_size=1, max_size=4),  # items, each 1-2 rungs of the ladder
    calls,  # the call after the fan-out (e.g. draft_answer)
    st.integers(1, 8),  # the fan-out's concurrency
)


@dataclass
class Actor:
    """One item (or the step after the fan-out): its calls in order, the reservation it holds."""

    name: str
    calls: list[Call]
    holding: Reservation | None = None
    done: int = 0

    @property
    def finished(self) -> bool:
        return self.done == len(self.calls) and self.holding is None


@dataclass
class Run:
    budgets: BudgetStore
    jobs: JobStore
    job: Job
    job_id: str
    tenant: str
    policy: TenantPolicy
    limit: Limit
    budget: int
    failure: str | None = None
    failed_room: int | None = None  # what was left of the budget when it failed
    failed_call: Call | None = None
    waits: int = 0
    peak_held: int = field(default=0)

    def spent(self) -> tuple[int, int]:
        """(held and settled, settled) in the binding limit's unit."""
        if self.limit == "day":
            day = self.budgets.day_usage(self.tenant)
            return day.tokens, day.tokens - day.held_tokens
        job = self.jobs.get_job(self.job_id)
        assert job is not None
        if self.limit == "cost":
            return job.spent_cost_micro, job.cost_micro
        return job.spent_tokens, job.usage_input_tokens + job.usage_output_tokens

    def step(self, actor: Actor) -> None:
        """One move of an actor: settle what it holds (as the model used it), or try to reserve its next call."""
        labels = CallLabels("extract_evidence", None, "default", "offline", "m", "v1", "hash")
        charge = f"1/{actor.name}/{actor.done}"
        call = actor.calls[actor.done]
        if actor.holding is not None:
            output = min(call.needed, actor.holding.output_tokens)  # a provider stops at the cap it was sent
            used = cost_micro(call.input_tokens, output, PRICE)
            self.budgets.settle(
                self.job_id, charge, input_tokens=call.input_tokens, output_tokens=output, cost_micro=used
            )
            actor.holding, actor.done = None, actor.done + 1
            if output < call.needed:  # cut off at a cap the budget lowered: the gateway fails budget-exceeded
                self._fail("cut off", call)
            return
        try:
            answer = self.budgets.try_reserve(self.job, charge, call.size, self.policy, labels)
        except BudgetExceededError:
            self._fail("refused", call)
            return
        if isinstance(answer, Wait):
            held, settled = self.spent()
            assert held > settled, "a call waits only while calls in flight hold room"
            self.waits += 1
            return
        assert answer.output_tokens >= min(call.cap, MIN_OUTPUT_TOKENS)
        actor.holding = answer

    def _fail(self, how: str, call: Call) -> None:
        self.failure, self.failed_call = how, call
        self.failed_room = self.budget - self.spent()[1]

    def check(self) -> None:
        held, settled = self.spent()
        assert settled <= held <= self.budget, f"spent {held} (settled {settled}) over the budget of {self.budget}"


_ids = itertools.count()


def _run(
    table: Any, clock: Any, plan: tuple[list[list[Call]], Call, int], limit: Limit, fraction: float, seed: int
) -> Run:
    items, last, concurrency = plan
    every = [c for item in items for c in item] + [last]
    unbudgeted = (
        sum(cost_micro(c.input_tokens, c.needed, PRICE) for c in every)
        if limit == "cost"
        else sum(c.input_tokens + c.needed for c in every)
    )
    budget = math.floor(unbudgeted * fraction)
    n = next(_ids)
    jobs = JobStore(table, clock=clock)
    job, _ = jobs.create_job(
        NewJob(
            job_id=f"job_p{n}",
            tenant_id=f"tenant-p{n}",
            workflow="document-analysis",
            input_key="k",
            payload_hash="h",
            model="m",
            estimated_sla_seconds=1,
            budget_tokens=budget if limit == "tokens" else LOTS,
            budget_cost_micro=budget if limit == "cost" else LOTS,
        )
    )
    policy = TenantPolicy(daily_tokens=budget) if limit == "day" else TenantPolicy()
    job = jobs.transition(job.job_id, JobStatus.RUNNING, event="job_started")
    run = Run(BudgetStore(table, clock=clock), jobs, job, job.job_id, job.tenant_id, policy, limit, budget)
    order = random.Random(seed)
    pending = [Actor(f"extract_evidence/{i}", list(item)) for i, item in enumerate(items)]
    stages = [pending, [Actor("draft_answer/", [last])]]
    for stage in stages:  # the fan-out (at most `concurrency` items at once, as a Map runs them), then the last step
        active: list[Actor] = []
        while run.failure is None and (stage or active):
            while stage and len(active) < concurrency:
                active.append(stage.pop(0))
            actor = order.choice(active)
            run.step(actor)
            run.check()
            if actor.finished:
                active.remove(actor)
        if run.failure is not None:
            break
    return run


@pytest.mark.parametrize("limit", ["tokens", "cost", "day"])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=jobs, seed=st.integers(0, 2**32))
def test_a_budget_of_1_3_times_the_unbudgeted_use_completes_at_any_concurrency(
    table: Any, clock: Any, limit: Limit, plan: tuple[list[list[Call]], Call, int], seed: int
) -> None:
    run = _run(table, clock, plan, limit, 1.3, seed)
    assert run.failure is None, f"{run.failure} with {run.failed_room} of {run.budget} left"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=jobs,
    limit=st.sampled_from(["tokens", "cost", "day"]),
    fraction=st.floats(0.05, 1.5),
    seed=st.integers(0, 2**32),
)
def test_any_budget_is_never_overspent_and_fails_only_when_the_next_call_cannot_fit(
    table: Any, clock: Any, plan: tuple[list[list[Call]], Call, int], limit: Limit, fraction: float, seed: int
) -> None:
    run = _run(table, clock, plan, limit, fraction, seed)  # (`check` after every move: never over the budget)
    if run.failure is None:
        return
    assert fraction < 1.3
    call, left = run.failed_call, run.failed_room
    assert call is not None and left is not None
    smallest = call.size.reservation(min(call.cap, MIN_OUTPUT_TOKENS))
    # what was left of the budget did not fit the failing call's smallest reservation (refused before the call), or
    # the call was made with the rest of the budget as its cap and used it (cut off there): it spent up to its budget
    needed = smallest.cost_micro if limit == "cost" else smallest.tokens
    assert left < needed, f"failed ({run.failure}) with {left} of {run.budget} left, the next call needing {needed}"
    if run.failure == "cut off":
        assert left < (PRICE.output if limit == "cost" else 1)
