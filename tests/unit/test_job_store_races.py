"""Races on the job aggregate: a writer whose read went stale between its read and its conditional write loses the
compare-and-set (or retries it when still allowed), and the event log stays duplicate-free with no gap a reader
can pass: a number reserved and not written yet holds the events after it back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from longhaul.core.contracts import JobStatus
from longhaul.core.records import Job
from longhaul.storage.dynamo import Cancelled
from longhaul.storage.jobs import GAP_GRACE_SECONDS, JobStore, NewEvent, TransitionRejected
from tests.unit.conftest import FakeClock
from tests.unit.test_job_store import events_of, new_job, read

S = JobStatus


def after_first_read(store: JobStore, race: Callable[[str], Any]) -> dict[str, int]:
    """Make `race(job_id)` happen right after the store's first read of the job: its snapshot is then stale.
    Returns the read counter."""
    real_get_job = store.get_job
    reads = {"n": 0}

    def read_then_race(job_id: str, **kwargs: Any) -> Job | None:
        snapshot = real_get_job(job_id, **kwargs)
        reads["n"] += 1
        if reads["n"] == 1:
            race(job_id)
        return snapshot

    store.get_job = read_then_race  # type: ignore[method-assign]
    return reads


def test_a_stale_read_loses_the_compare_and_set(store: JobStore, table: Any, clock: FakeClock) -> None:
    """Between the read and the write another writer moves the job; the CAS must not apply the stale view."""
    # Given a queued job, and a rival store that completes a transition right after our read
    store.create_job(new_job())
    rival = JobStore(table, clock=clock)
    reads = after_first_read(store, lambda job_id: rival.transition(job_id, S.RUNNING, event="job_started_by_rival"))

    # When we try queued → running from our (now stale) snapshot
    with pytest.raises(TransitionRejected):
        store.transition("job_1", S.RUNNING, event="job_started_by_us")

    # Then only the rival's transition and event exist, and we re-read before giving up
    assert reads["n"] == 2
    assert [(e["seq"], e["type"]) for e in events_of(table, "job_1")] == [
        (1, "job_queued"),
        (2, "job_started_by_rival"),
    ]
    assert read(rival, "job_1").version == 2


def test_a_stale_read_is_retried_when_the_transition_is_still_allowed(
    store: JobStore, table: Any, clock: FakeClock
) -> None:
    # Given a running job and a rival that appends a status-less event between our read and our write
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    rival = JobStore(table, clock=clock)
    real_get_job = store.get_job
    reads = {"n": 0}

    def get_job_then_race(job_id: str, **kwargs: Any) -> Job | None:
        snapshot = real_get_job(job_id, **kwargs)
        reads["n"] += 1
        if reads["n"] == 1:
            rival.append_event(job_id, "step_started", step="parse")
        return snapshot

    store.get_job = get_job_then_race  # type: ignore[method-assign]

    # When we move it to retrying
    store.transition("job_1", S.RETRYING, event="job_retrying")

    # Then the event sequence has no gap and no duplicate: our event comes after the rival's
    assert [(e["seq"], e["type"]) for e in events_of(table, "job_1")] == [
        (1, "job_queued"),
        (2, "job_started"),
        (3, "step_started"),
        (4, "job_retrying"),
    ]
    assert read(store, "job_1").event_seq == 4


class SerializedWrites:
    """A DynamoDB client whose transactions are serialized, as DynamoDB's are (moto's are not thread-safe)."""

    def __init__(self, client: Any, lock: threading.Lock) -> None:
        self._client = client
        self._lock = lock

    def transact_write_items(self, **kwargs: Any) -> Any:
        with self._lock:
            return self._client.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_an_append_racing_a_transition_keeps_both_events(store: JobStore, table: Any, clock: FakeClock) -> None:
    # Given a running job; an append reserves its number, then a rival's transition writes before the append's event
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    rival = JobStore(table, clock=clock)
    real_reserve = store.reserve_events

    def reserve_then_race(job_id: str, count: int, **kwargs: Any) -> int:
        first = real_reserve(job_id, count, **kwargs)
        rival.transition(job_id, S.CANCEL_REQUESTED, event="cancel_requested")
        return first

    store.reserve_events = reserve_then_race  # type: ignore[method-assign]

    # When the append completes
    store.append_event("job_1", "step_started", step="parse")

    # Then both events exist with distinct, gapless sequence numbers, in the order their numbers were taken
    assert [(e["seq"], e["type"]) for e in events_of(table, "job_1")][2:] == [
        (3, "step_started"),
        (4, "cancel_requested"),
    ]


def test_readers_wait_for_a_reserved_number_and_skip_a_filled_one(store: JobStore, clock: FakeClock) -> None:
    # Given a running job whose writer reserved event 3 and has not written it yet, while another wrote event 4
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    pending = store.reserve_events("job_1", 1)
    store.append_event("job_1", "step_finished", step="parse", item=1)

    # Then readers see the events before the gap only (event 4 waits: a reader past it would never see event 3)
    events, cursor = store.list_events("job_1")
    assert [e.seq for e in events] == [1, 2] and cursor is None
    # When the writer's transaction fails, it fills its number: readers skip it and go on
    store._void("job_1", [pending])
    assert [(e.seq, e.type) for e in store.list_events("job_1")[0]] == [
        (1, "job_queued"),
        (2, "job_started"),
        (4, "step_finished"),
    ]


class LostAnswer:
    """A DynamoDB client whose transaction is applied (or not) and then answered with an error, as when the answer
    is lost on the way: the writer cannot tell whether its events were written."""

    def __init__(self, client: Any, *, applied: bool) -> None:
        self._client, self._applied = client, applied

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self._applied:
            self._client.transact_write_items(**kwargs)
        raise EndpointConnectionError(endpoint_url="https://dynamodb.example")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("applied", [False, True], ids=["not-written", "written"])
def test_a_reserved_write_that_errors_leaves_no_gap_and_keeps_what_it_wrote(store: JobStore, applied: bool) -> None:
    # Given a running job whose fan-out writer reserves two numbers and gets an error instead of an answer
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    writer = JobStore(store.table, clock=store.clock)
    writer.client = LostAnswer(store.client, applied=applied)
    current = read(store, "job_1")
    with pytest.raises(EndpointConnectionError):
        writer.write(current, [NewEvent("item_done", item=0), NewEvent("item_done", item=1)], reserve=True)

    # When the job goes on
    store.append_event("job_1", "step_finished", step="fan")

    # Then readers go on at once (no grace): the numbers hold the events if they were written, are skipped if not
    written = [(3, "item_done"), (4, "item_done")] if applied else []
    assert [(e.seq, e.type) for e in store.list_events("job_1")[0]] == [
        (1, "job_queued"),
        (2, "job_started"),
        *written,
        (5, "step_finished"),
    ]


def test_a_number_never_written_is_passed_after_the_grace(store: JobStore, clock: FakeClock) -> None:
    # Given a gap its writer never filled (it died between its reservation and its write)
    store.create_job(new_job())
    store.reserve_events("job_1", 1, only_if=None)
    store.append_event("job_1", "note")
    assert [e.seq for e in store.list_events("job_1")[0]] == [1]
    # When the event after it is older than the grace, the gap is taken for lost
    clock.advance(timedelta(seconds=GAP_GRACE_SECONDS + 1))
    assert [e.seq for e in store.list_events("job_1")[0]] == [1, 3]


def test_a_reservation_for_a_finished_job_is_refused(store: JobStore) -> None:
    store.create_job(new_job())
    store.transition("job_1", S.CANCELLED, event="job_cancelled")
    with pytest.raises(Cancelled):
        store.reserve_events("job_1", 2)


def test_two_racing_transitions_from_threads_exactly_one_wins(store: JobStore, table: Any, clock: FakeClock) -> None:
    # Given a queued job and two writers that read it at the same moment
    store.create_job(new_job())
    barrier = threading.Barrier(2, timeout=5)
    write_lock = threading.Lock()
    outcomes: dict[str, str] = {}

    def contender(name: str) -> None:
        contender_store = JobStore(table, clock=clock)
        contender_store.client = SerializedWrites(contender_store.client, write_lock)
        real_get_job = contender_store.get_job
        first = {"read": True}

        def synchronized_get_job(job_id: str, **kwargs: Any) -> Job | None:
            snapshot = real_get_job(job_id, **kwargs)
            if first["read"]:
                first["read"] = False
                barrier.wait()  # both have read "queued, version 1" before either writes
            return snapshot

        contender_store.get_job = synchronized_get_job  # type: ignore[method-assign]
        try:
            contender_store.transition("job_1", S.RUNNING, event=f"started_by_{name}")
            outcomes[name] = "won"
        except TransitionRejected:
            outcomes[name] = "rejected"

    threads = [threading.Thread(target=contender, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)

    # Then exactly one moved the job to running, with exactly one event
    assert sorted(outcomes.values()) == ["rejected", "won"]
    winner = next(n for n, o in outcomes.items() if o == "won")
    assert [(e["seq"], e["type"]) for e in events_of(table, "job_1")] == [
        (1, "job_queued"),
        (2, f"started_by_{winner}"),
    ]
    job = read(store, "job_1")
    assert job.status == S.RUNNING and job.version == 2
