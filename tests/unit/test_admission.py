"""Admission control: the submission rate (429 for one tenant, nobody else), the in-flight counters (never above
their limits, given back once), the dispatcher's weighted-fair order with aging, and a cancelled waiting job that
never starts. The stores run on moto; the engine, the intake queues and the wake-up are in-memory fakes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local import moto_patches
from longhaul import services as wiring
from longhaul.api.jobs import JobService
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy
from longhaul.core.contracts import JobStatus
from longhaul.core.ports import Waiting
from longhaul.core.records import Job
from longhaul.operations.admission import Admission, estimated_start_seconds, fair_order
from longhaul.operations.replay import replay
from longhaul.storage.admission import AdmissionStore
from longhaul.storage.budgets import BudgetStore
from longhaul.storage.jobs import JobStore, NewJob
from longhaul.workflows import JOB_REQUEST
from tests.unit.api_helpers import BODY, assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, TENANT_A, TENANT_B, CallApi, FakeClock
from tests.unit.fakes import FakeEngine, FakeIntake, FakeWake
from tests.unit.test_job_store_races import SerializedWrites

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
STEP = "list_documents"  # the first step of the workflow the tests' jobs run


def waiting(job_id: str, tenant: str, sla_class: str, seconds_ago: float = 0) -> Waiting:
    return Waiting(job_id, tenant, sla_class, NOW - timedelta(seconds=seconds_ago))


def new_job(job_id: str, tenant: str = TENANT_A, sla_class: str = "standard") -> NewJob:
    return NewJob(
        job_id=job_id,
        tenant_id=tenant,
        workflow="document-analysis",
        input_key=f"work/{job_id}/input.json",
        payload_hash="h",
        model="offline:test",
        estimated_sla_seconds=30,
        total_steps=8,
        sla_class=sla_class,
    )


@pytest.fixture
def admitted(services: wiring.Services) -> wiring.Services:
    """The services with admission control: fake intake queues and wake-up, a platform limit of 4."""
    settings = services.settings.model_copy(update={"max_jobs_in_flight": 4, "intake_queues": {"x": "y"}})
    return wiring.Services(
        settings=settings,
        jobs=services.jobs,
        checkpoints=services.checkpoints,
        artifacts=services.artifacts,
        engine=services.engine,
        dead_letters=services.dead_letters,
        intake=FakeIntake(),
        wake=FakeWake(),
    )


def policy_of(table: Any, tenant: str, **fields: Any) -> TenantPolicy:
    policy = TenantPolicy(**fields)
    BudgetStore(table).put_policy(tenant, policy)
    return policy


def counters(services: wiring.Services, tenant: str) -> tuple[int, int, int, int]:
    c = services.admission.counters(tenant)
    return c.global_in_flight, c.global_queued, c.tenant_in_flight, c.tenant_queued


def create(services: wiring.Services, job_id: str, tenant: str = TENANT_A, sla_class: str = "standard") -> Job:
    job, _ = services.jobs.create_job(new_job(job_id, tenant, sla_class))
    return job


# ---------------------------------------------------------------------- the submission rate


def test_a_tenant_over_its_rate_gets_429_with_retry_after_and_another_tenant_is_unaffected(
    call_api: CallApi, table: Any, api_keys: dict[str, str]
) -> None:
    # Given tenant A may submit 2 jobs a minute
    policy_of(table, TENANT_A, submissions_per_minute=2)
    first = submit(call_api, key=KEY_A, **{"Idempotency-Key": "first"})
    assert first.status == 202, first.raw_body
    assert submit(call_api, key=KEY_A).status == 202

    # When it submits a third
    refused = submit(call_api, key=KEY_A)

    # Then 429 rate-limited, with Retry-After in seconds (and the same in the body), and nothing stored for it
    problem = assert_problem(refused, 429, "rate-limited")
    retry_after = int(refused.header("Retry-After") or "0")
    assert 1 <= retry_after <= 61  # when the first submission leaves the window (a second counts 61 s)
    assert problem["retry_after_seconds"] == retry_after
    assert problem["submissions_per_minute"] == 2
    # while tenant B's submissions keep being accepted
    for _ in range(3):
        assert submit(call_api, key=KEY_B).status == 202
    # and an idempotent retry of A's accepted job is answered (the same job), not refused
    again = submit(call_api, key=KEY_A, **{"Idempotency-Key": "first"})
    assert again.status == 202 and again.body["job_id"] == first.body["job_id"]


def test_the_rate_holds_over_any_60_seconds_not_per_clock_minute(table: Any, clock: FakeClock) -> None:
    store = AdmissionStore(table, clock=clock)
    clock.current = datetime(2025, 1, 2, 3, 4, 50, tzinfo=UTC)
    assert store.take_submission(TENANT_A, 1) is None
    # the next one fits when that submission's second (50) has left the window: 61 s after it began
    assert store.take_submission(TENANT_A, 1) == 61
    assert store.take_submission(TENANT_B, 1) is None  # another tenant's window
    clock.advance(timedelta(seconds=10))  # a new clock minute changes nothing (a fixed window admitted here)
    assert store.take_submission(TENANT_A, 1) == 51
    clock.advance(timedelta(seconds=50.5))
    assert store.take_submission(TENANT_A, 1) == 1
    clock.advance(timedelta(seconds=0.5))
    assert store.take_submission(TENANT_A, 1) is None


def test_a_burst_across_a_minute_boundary_is_held_to_the_limit(table: Any, clock: FakeClock) -> None:
    # Given 30 a minute, and 30 submissions at the end of a clock minute
    store = AdmissionStore(table, clock=clock)
    clock.current = datetime(2025, 1, 2, 3, 4, 59, 500_000, tzinfo=UTC)
    assert [store.take_submission(TENANT_A, 30) for _ in range(30)] == [None] * 30

    # When 30 more come at the start of the next (a fixed window let them all through)
    clock.advance(timedelta(seconds=0.6))
    refused = [store.take_submission(TENANT_A, 30) for _ in range(30)]

    # Then none is accepted, and each is told when the next fits: when the first 30 leave the window
    assert refused == [60] * 30
    clock.advance(timedelta(seconds=60))
    assert store.take_submission(TENANT_A, 30) is None


@pytest.fixture
def atomic_dynamodb() -> Iterator[None]:
    """Each of moto's DynamoDB operations atomic, as DynamoDB's are (the local runtime's patch; moto's own are not)."""
    moto_patches.serialize_dynamodb_operations()
    try:
        yield
    finally:
        moto_patches.unserialize_dynamodb_operations()


def test_a_concurrent_burst_of_60_at_30_a_minute_accepts_30(
    table: Any, clock: FakeClock, atomic_dynamodb: None
) -> None:
    """60 submissions from 20 writers at once, over a second and a minute boundary: conditional writes, no lost
    update, and concurrent submissions within one second never conflict."""
    store = AdmissionStore(table, clock=clock)
    clock.current = datetime(2025, 1, 2, 3, 4, 58, 900_000, tzinfo=UTC)
    answers: list[int | None] = []
    lock = threading.Lock()
    start = threading.Barrier(20)

    def submitter() -> None:
        start.wait()
        for _ in range(3):
            answer = store.take_submission(TENANT_A, 30)
            with lock:
                answers.append(answer)
                clock.advance(timedelta(milliseconds=20))  # the burst crosses second and minute boundaries

    threads = [threading.Thread(target=submitter) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(answers) == 60 and answers.count(None) == 30
    assert all(1 <= a <= 61 for a in answers if a is not None)


def test_an_sla_class_the_tenant_may_not_use_is_a_422_naming_the_allowed_classes(
    call_api: CallApi, table: Any, api_keys: dict[str, str], nothing_stored: Any
) -> None:
    policy_of(table, TENANT_A, sla_classes=["batch"])
    response = submit(call_api, {**BODY, "sla_class": "interactive"}, key=KEY_A)
    problem = assert_problem(response, 422, "invalid-request")
    assert problem["allowed_sla_classes"] == ["batch"]
    assert [e["loc"] for e in problem["errors"]] == [["body", "sla_class"]]
    nothing_stored()


@pytest.mark.parametrize(("policy", "allowed"), [(None, ["interactive", "standard", "batch"]), (["batch"], ["batch"])])
def test_an_unknown_sla_class_is_a_422_naming_the_tenants_classes_too(
    call_api: CallApi, table: Any, api_keys: dict[str, str], nothing_stored: Any, policy: Any, allowed: list[str]
) -> None:
    if policy:
        policy_of(table, TENANT_A, sla_classes=policy)
    response = submit(call_api, {**BODY, "sla_class": "urgent"}, key=KEY_A)
    problem = assert_problem(response, 422, "invalid-request")
    assert problem["allowed_sla_classes"] == allowed
    assert [e["loc"] for e in problem["errors"]] == [["body", "sla_class"]]
    nothing_stored()


# ---------------------------------------------------------------------- counters


def test_concurrent_acquisitions_never_exceed_the_tenant_limit(admitted: wiring.Services) -> None:
    # Given 12 queued jobs of one tenant whose limit is 3 (the platform's is 4)
    jobs = [create(admitted, f"job_{i:028x}") for i in range(12)]
    results: list[bool] = []
    lock = threading.Lock()
    serialized = SerializedWrites(admitted.jobs.table.meta.client, threading.Lock())  # as DynamoDB's are

    def take(job: Job) -> None:
        store = AdmissionStore(admitted.jobs.table)
        store.client = serialized
        taken = store.acquire(job.job_id, TENANT_A, tenant_limit=3, global_limit=4, waiting=False)
        with lock:
            results.append(taken)

    # When they all take a slot at once
    threads = [threading.Thread(target=take, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then exactly 3 hold one, and the counters say 3
    assert results.count(True) == 3
    assert sum(1 for j in jobs if (admitted.jobs.get_job(j.job_id) or j).slot) == 3
    assert counters(admitted, TENANT_A)[::2] == (3, 3)


def test_the_platform_limit_holds_across_tenants(admitted: wiring.Services) -> None:
    taken = [
        admitted.admission.acquire(
            create(admitted, f"job_{i:028x}", tenant).job_id, tenant, tenant_limit=10, global_limit=4, waiting=False
        )
        for i, tenant in enumerate([TENANT_A, TENANT_B] * 3)
    ]
    assert taken == [True, True, True, True, False, False]


def test_a_slot_is_given_back_once_by_the_terminal_transition(admitted: wiring.Services) -> None:
    # Given a job holding a slot
    job = create(admitted, "job_" + "1" * 28)
    assert admitted.admission.acquire(job.job_id, TENANT_A, tenant_limit=2, global_limit=4, waiting=False)
    assert counters(admitted, TENANT_A)[::2] == (1, 1)
    released: list[str] = []
    jobs = JobStore(admitted.jobs.table, clock=admitted.jobs.clock, on_release=lambda j: released.append(j.job_id))

    # When it runs and completes, and a late duplicate tries to end it again
    jobs.transition(job.job_id, JobStatus.RUNNING, event="job_started")
    assert counters(admitted, TENANT_A)[::2] == (1, 1)  # running keeps the slot
    done = jobs.transition(job.job_id, JobStatus.COMPLETED, event="job_completed")
    with pytest.raises(Exception, match="not allowed"):
        jobs.transition(job.job_id, JobStatus.FAILED, event="job_failed")

    # Then the slot was given back exactly once, the job says so, and the dispatcher was woken once
    assert counters(admitted, TENANT_A)[::2] == (0, 0)
    assert not done.slot and not (jobs.get_job(job.job_id) or done).slot
    assert released == [job.job_id]


# ---------------------------------------------------------------------- fairness


def test_another_tenants_interactive_job_goes_before_a_batch_backlog() -> None:
    backlog = [waiting(f"a{i:03d}", TENANT_A, "batch", seconds_ago=5) for i in range(200)]
    order = fair_order([*backlog, waiting("b-interactive", TENANT_B, "interactive")], {}, NOW)
    assert order[0].job_id == "b-interactive"
    assert [w.job_id for w in order[1:4]] == ["a000", "a001", "a002"]  # A's own order is kept


def test_tenants_share_by_weight() -> None:
    items = [waiting(f"a{i}", TENANT_A, "standard") for i in range(6)]
    items += [waiting(f"b{i}", TENANT_B, "standard") for i in range(6)]
    first_six = fair_order(items, {TENANT_A: 2, TENANT_B: 1}, NOW)[:6]
    assert sum(1 for w in first_six if w.tenant_id == TENANT_A) == 4  # twice B's share


def test_aging_lets_an_old_batch_job_precede_new_interactive_ones() -> None:
    fresh = [waiting(f"i{i}", TENANT_B, "interactive") for i in range(3)]
    assert fair_order([waiting("old", TENANT_A, "batch", seconds_ago=10), *fresh], {}, NOW)[0].job_id == "i0"
    assert fair_order([waiting("old", TENANT_A, "batch", seconds_ago=3600), *fresh], {}, NOW)[0].job_id == "old"


def test_the_estimate_counts_rounds_of_the_jobs_ahead() -> None:
    assert (
        estimated_start_seconds(sla_seconds=30, tenant_waiting=5, tenant_limit=2, platform_waiting=0, platform_limit=10)
        == 90
    )
    assert (
        estimated_start_seconds(sla_seconds=30, tenant_waiting=1, tenant_limit=2, platform_waiting=0, platform_limit=10)
        == 30
    )


# ---------------------------------------------------------------------- submission and the dispatcher


def submit_as(services: wiring.Services, tenant: str, sla_class: str) -> tuple[str, int, JobStatus]:
    request = JOB_REQUEST.validate_python({**BODY, "sla_class": sla_class})
    accepted, _ = JobService(services).submit(Principal(tenant_id=tenant), request, None, "https://api.test")
    return accepted.job_id, accepted.estimated_start_seconds, accepted.status


def test_over_its_jobs_in_flight_a_job_waits_and_starts_when_a_slot_frees(
    admitted: wiring.Services, table: Any, engine: FakeEngine
) -> None:
    # Given tenant A may run 2 jobs
    policy_of(table, TENANT_A, jobs_in_flight=2)
    intake, wake = admitted.intake, admitted.wake
    assert isinstance(intake, FakeIntake) and isinstance(wake, FakeWake)

    # When it submits 5 batch jobs
    submitted = [submit_as(admitted, TENANT_A, "batch") for _ in range(5)]

    # Then 2 start at once, 3 wait queued with an honest estimate that grows with their place
    assert [s[1] for s in submitted[:2]] == [0, 0]
    assert len(engine.started) == 2
    estimates = [s[1] for s in submitted[2:]]
    assert all(e > 0 for e in estimates) and estimates == sorted(estimates)
    assert intake.waiting_ids() == [s[0] for s in submitted[2:]]
    assert wake.woken == 0  # at its limit nothing could start: a release wakes the dispatcher, not these
    view = JobService(admitted).view(Principal(tenant_id=TENANT_A), submitted[2][0])
    assert view.status == JobStatus.QUEUED and view.estimated_start_seconds and view.sla_class == "batch"

    # and tenant B's interactive job starts at once: A's backlog is A's
    b_job, b_wait, _ = submit_as(admitted, TENANT_B, "interactive")
    assert b_wait == 0 and engine.started[-1].execution == b_job

    # When a round runs with A still at its limit, nothing of A starts
    assert Admission(admitted).dispatch().started == []
    # and when one of A's jobs ends, the oldest waiting one starts
    admitted.jobs.transition(submitted[0][0], JobStatus.FAILED, event="job_failed")
    report = Admission(admitted).dispatch()
    assert report.started == [submitted[2][0]]
    assert counters(admitted, TENANT_A)[2:] == (2, 2)
    assert JobService(admitted).view(Principal(tenant_id=TENANT_A), submitted[2][0]).estimated_start_seconds is None


def test_a_waiting_submission_wakes_the_dispatcher_only_when_it_may_start_now(
    admitted: wiring.Services, table: Any, engine: FakeEngine
) -> None:
    # Given tenant A may run 2 jobs, runs 2 and has 2 waiting
    policy_of(table, TENANT_A, jobs_in_flight=2)
    wake = admitted.wake
    assert isinstance(wake, FakeWake)
    submitted = [submit_as(admitted, TENANT_A, "standard")[0] for _ in range(4)]
    assert wake.woken == 0

    # When one of its running jobs ends (one slot free, two jobs waiting ahead of the next submission)
    admitted.jobs.transition(submitted[0], JobStatus.FAILED, event="job_failed")
    behind, estimate, status = submit_as(admitted, TENANT_A, "standard")
    # Then a submission behind that backlog waits without a round: the jobs ahead take the free slot first
    assert status == JobStatus.QUEUED and estimate > 0
    assert wake.woken == 0

    # When the round runs, the oldest waiting job takes the slot (the one behind keeps waiting)
    assert Admission(admitted).dispatch().started == [submitted[2]]
    # and when both running jobs end (each release wakes a round: `JobStore.on_release`, not wired here), two slots
    # are free for two waiting jobs: a submission behind them still waits its turn
    admitted.jobs.transition(submitted[1], JobStatus.FAILED, event="job_failed")
    admitted.jobs.transition(submitted[2], JobStatus.FAILED, event="job_failed")
    assert counters(admitted, TENANT_A)[2:] == (0, 2)
    submit_as(admitted, TENANT_A, "standard")
    assert wake.woken == 0
    # but with one job ahead of it and two slots free, a submission may start at once: it wakes a round
    assert Admission(admitted).dispatch().started == [submitted[3], behind]
    admitted.jobs.transition(submitted[3], JobStatus.FAILED, event="job_failed")
    admitted.jobs.transition(behind, JobStatus.FAILED, event="job_failed")
    assert counters(admitted, TENANT_A)[2:] == (0, 1)
    submit_as(admitted, TENANT_A, "standard")
    assert wake.woken == 1


def test_a_replay_goes_through_admission_like_a_submission(
    admitted: wiring.Services, table: Any, engine: FakeEngine
) -> None:
    # Given tenant A may run 1 job, and its first job failed (giving its slot back) while a second one runs
    policy_of(table, TENANT_A, jobs_in_flight=1)
    intake = admitted.intake
    assert isinstance(intake, FakeIntake)
    first, _, _ = submit_as(admitted, TENANT_A, "standard")
    admitted.jobs.transition(first, JobStatus.FAILED, event="job_failed")
    second, second_wait, _ = submit_as(admitted, TENANT_A, "standard")
    assert second_wait == 0 and counters(admitted, TENANT_A)[2:] == (1, 0)
    started = len(engine.started)

    # When an operator replays the failed job
    replay(admitted, Principal(tenant_id="ops", role="operator"), first, from_step=STEP, reason="fixed")

    # Then it does not start beside the running one: it waits for the tenant's slot, in its class's queue
    assert len(engine.started) == started
    assert counters(admitted, TENANT_A)[2:] == (1, 1) and intake.waiting_ids() == [first]
    replayed = admitted.jobs.get_job(first)
    assert replayed is not None and replayed.status == JobStatus.QUEUED and replayed.waiting

    # and when the running job ends, the replay starts (its new execution) holding the slot
    admitted.jobs.transition(second, JobStatus.FAILED, event="job_failed")
    assert Admission(admitted).dispatch().started == [first]
    assert engine.started[-1].execution == f"{first}-r{replayed.attempts}"
    assert counters(admitted, TENANT_A)[2:] == (1, 0)


def test_the_dispatcher_starts_interactive_work_of_another_tenant_before_a_backlog(
    admitted: wiring.Services, table: Any, engine: FakeEngine
) -> None:
    # Given the platform is full (4 slots) with A's jobs and A has 6 batch jobs waiting
    policy_of(table, TENANT_A, jobs_in_flight=10)
    running = [submit_as(admitted, TENANT_A, "batch")[0] for _ in range(4)]
    backlog = [submit_as(admitted, TENANT_A, "batch")[0] for _ in range(6)]
    b_job, b_wait, _ = submit_as(admitted, TENANT_B, "interactive")
    assert b_wait > 0  # the platform is full: B waits too

    # When one slot frees
    admitted.jobs.transition(running[0], JobStatus.FAILED, event="job_failed")
    report = Admission(admitted).dispatch()

    # Then it goes to B's interactive job, and A's backlog waits for the next
    assert report.started == [b_job]
    assert engine.started[-1].execution == b_job
    assert len(intake_of(admitted).waiting_ids()) == len(backlog)


def intake_of(services: wiring.Services) -> FakeIntake:
    assert isinstance(services.intake, FakeIntake)
    return services.intake


def test_a_cancelled_waiting_job_never_starts_and_its_message_is_dropped(
    admitted: wiring.Services, table: Any, engine: FakeEngine
) -> None:
    policy_of(table, TENANT_A, jobs_in_flight=1)
    first = submit_as(admitted, TENANT_A, "standard")[0]
    queued = submit_as(admitted, TENANT_A, "standard")[0]
    assert counters(admitted, TENANT_A) == (1, 1, 1, 1)

    # When the waiting job is cancelled, then a slot frees
    outcome = JobService(admitted).cancel(Principal(tenant_id=TENANT_A), queued)
    assert outcome.status == JobStatus.CANCELLED
    assert counters(admitted, TENANT_A) == (1, 0, 1, 0)  # it left the queue
    admitted.jobs.transition(first, JobStatus.FAILED, event="job_failed")
    report = Admission(admitted).dispatch()

    # Then it never started, and its message is gone
    assert report.dropped == [queued] and report.started == []
    assert queued not in [s.execution for s in engine.started]
    assert intake_of(admitted).waiting_ids() == []
    assert counters(admitted, TENANT_A) == (0, 0, 0, 0)


def test_the_sweep_never_fails_a_waiting_job_and_sends_a_forgotten_one_again(
    admitted: wiring.Services, table: Any, clock: FakeClock
) -> None:
    from longhaul.operations.sweep import sweep

    # Given a job waiting for a slot (its tenant is at its limit), and one that never reached admission (a crash)
    policy_of(table, TENANT_A, jobs_in_flight=1)
    submit_as(admitted, TENANT_A, "standard")
    waiting_job = submit_as(admitted, TENANT_A, "standard")[0]
    lost = create(admitted, "job_" + "2" * 28, TENANT_B)
    intake = intake_of(admitted)
    assert intake.waiting_ids() == [waiting_job]

    # When the sweep runs 20 minutes later (no execution exists for either)
    clock.advance(timedelta(minutes=20))
    counts = sweep(admitted, clock.now())

    # Then neither failed: the waiting one was sent to its queue again, the lost one was admitted and started
    assert (admitted.jobs.get_job(waiting_job) or lost).status == JobStatus.QUEUED
    assert counts["requeued"] == 2 and counts["reconciled"] == 0
    assert intake.waiting_ids() == [waiting_job, waiting_job]  # a duplicate: the dispatcher drops the second
    assert (admitted.jobs.get_job(lost.job_id) or lost).slot
