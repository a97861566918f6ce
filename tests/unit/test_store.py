"""JobStore behaviour against moto's DynamoDB: atomic creation, CAS transitions, idempotency, tenancy, paging."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from longhaul.contracts import JobStatus
from longhaul.store import BadCursor, IdempotencyConflict, JobStore, NewJob, TransitionRejected
from tests.unit.conftest import FakeClock
from tests.unit.jobs_table import create_jobs_table

S = JobStatus


def new_job(
    job_id: str = "job_1",
    *,
    tenant: str = "tenant-a",
    payload_hash: str = "hash-1",
    idempotency_key: str | None = None,
) -> NewJob:
    return NewJob(
        job_id=job_id,
        tenant_id=tenant,
        workflow="document-analysis",
        input_key=f"work/{job_id}/input.json",
        payload_hash=payload_hash,
        model="offline:test",
        estimated_sla_seconds=42,
        idempotency_key=idempotency_key,
        total_steps=8,
    )


def items_of(table: Any, job_id: str) -> list[dict[str, Any]]:
    return table.query(KeyConditionExpression=Key("pk").eq(f"JOB#{job_id}"), ConsistentRead=True)["Items"]


def events_of(table: Any, job_id: str) -> list[dict[str, Any]]:
    return [i for i in items_of(table, job_id) if i["sk"].startswith("EVENT#")]


def all_items(table: Any) -> list[dict[str, Any]]:
    return table.scan(ConsistentRead=True)["Items"]


# ---------------------------------------------------------------------- create


def after_first_read(store: JobStore, race: Callable[[str], Any]) -> dict[str, int]:
    """Make `race(job_id)` happen right after the store's first read of the job: its snapshot is then stale.
    Returns the read counter."""
    real_get_job = store.get_job
    reads = {"n": 0}

    def read_then_race(job_id: str, **kwargs: Any) -> dict[str, Any] | None:
        snapshot = real_get_job(job_id, **kwargs)
        reads["n"] += 1
        if reads["n"] == 1:
            race(job_id)
        return snapshot

    store.get_job = read_then_race  # type: ignore[method-assign]
    return reads


def test_create_job_writes_the_queued_job_and_its_first_event_together(store: JobStore, table: Any) -> None:
    # Given an empty table / When a job is created
    job, created = store.create_job(new_job())

    # Then the job is queued at version 1 and exactly one `job_queued` event (seq 1) exists
    assert created is True
    assert job["status"] == "queued"
    assert job["version"] == 1 and job["event_seq"] == 1
    stored = store.get_job("job_1")
    assert stored == job
    assert stored["gsi1pk"] == "TENANT#tenant-a"
    events = events_of(table, "job_1")
    assert [(e["seq"], e["type"], e["status"]) for e in events] == [(1, "job_queued", "queued")]


def test_create_job_is_listed_under_its_tenant_in_the_by_tenant_index(store: JobStore, table: Any) -> None:
    store.create_job(new_job("job_1"))
    store.create_job(new_job("job_2", tenant="tenant-b"))

    listed = table.query(IndexName="by_tenant", KeyConditionExpression=Key("gsi1pk").eq("TENANT#tenant-a"))["Items"]

    assert [i["job_id"] for i in listed] == ["job_1"]


def test_creating_an_existing_job_id_fails_and_writes_nothing(store: JobStore, table: Any, clock: FakeClock) -> None:
    # Given a job
    store.create_job(new_job())
    before = all_items(table)
    clock.advance(timedelta(minutes=5))

    # When the same job id is created again (no idempotency key)
    with pytest.raises(ClientError) as raised:
        store.create_job(new_job(payload_hash="other"))

    # Then the transaction is cancelled as a whole: neither the job nor its first event is overwritten
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert all_items(table) == before


# ---------------------------------------------------------------------- transitions


def test_valid_transitions_append_exactly_one_event_each_with_increasing_seq(store: JobStore, table: Any) -> None:
    # Given a queued job
    store.create_job(new_job())

    # When it runs, retries, runs again and completes
    store.transition("job_1", S.RUNNING, event="job_started", step="parse")
    store.transition("job_1", S.RETRYING, event="job_retrying", step="parse")
    store.transition("job_1", S.RUNNING, event="job_resumed", step="parse")
    done = store.transition("job_1", S.COMPLETED, event="job_completed", set_fields={"result_key": "results/x"})

    # Then each transition wrote one event, numbered 2, 3, 4, 5, and the job carries version and timestamps
    events = events_of(table, "job_1")
    assert [(e["seq"], e["type"], e.get("status")) for e in events] == [
        (1, "job_queued", "queued"),
        (2, "job_started", "running"),
        (3, "job_retrying", "retrying"),
        (4, "job_resumed", "running"),
        (5, "job_completed", "completed"),
    ]
    job = store.get_job("job_1")
    assert job["status"] == "completed"
    assert job["version"] == 5 and job["event_seq"] == 5
    assert job["result_key"] == "results/x"
    assert job["started_at"] and job["finished_at"]
    assert done["status"] == "completed"


@pytest.mark.parametrize(
    ("path", "rejected"),
    [
        ([S.RUNNING, S.COMPLETED], S.RUNNING),
        ([S.FAILED], S.RUNNING),
        ([S.CANCELLED], S.RUNNING),
        ([S.RUNNING, S.COMPLETED], S.FAILED),
        ([], S.RETRYING),
        ([], S.COMPLETED),
        ([S.CANCEL_REQUESTED], S.RUNNING),
    ],
    ids=[
        "completed-to-running",
        "failed-to-running",
        "cancelled-to-running",
        "completed-to-failed",
        "queued-to-retrying",
        "queued-to-completed",
        "cancel_requested-to-running",
    ],
)
def test_invalid_transition_is_rejected_and_writes_nothing(
    store: JobStore, table: Any, path: list[JobStatus], rejected: JobStatus
) -> None:
    # Given a job that went through `path`
    store.create_job(new_job())
    for status in path:
        store.transition("job_1", status, event=f"to_{status.value}")
    before = all_items(table)

    # When a transition that the state table forbids is attempted
    with pytest.raises(TransitionRejected):
        store.transition("job_1", rejected, event="should_not_exist")

    # Then nothing changed
    assert all_items(table) == before


def test_transition_outside_allowed_from_is_rejected(store: JobStore, table: Any) -> None:
    store.create_job(new_job())
    before = all_items(table)

    with pytest.raises(TransitionRejected):
        store.transition("job_1", S.RUNNING, event="job_resumed", allowed_from=[S.RETRYING])

    assert all_items(table) == before


def test_transition_of_a_missing_job_is_rejected(store: JobStore, table: Any) -> None:
    with pytest.raises(TransitionRejected):
        store.transition("job_missing", S.RUNNING, event="job_started")
    assert all_items(table) == []


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
    assert rival.get_job("job_1")["version"] == 2


def test_a_stale_read_is_retried_when_the_transition_is_still_allowed(
    store: JobStore, table: Any, clock: FakeClock
) -> None:
    # Given a running job and a rival that appends a status-less event between our read and our write
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    rival = JobStore(table, clock=clock)
    real_get_job = store.get_job
    reads = {"n": 0}

    def get_job_then_race(job_id: str, **kwargs: Any) -> dict[str, Any] | None:
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
    assert real_get_job("job_1")["event_seq"] == 4


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
    # Given a running job; an append reads the job, then a rival's transition writes before the append does
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    rival = JobStore(table, clock=clock)
    after_first_read(store, lambda job_id: rival.transition(job_id, S.CANCEL_REQUESTED, event="cancel_requested"))

    # When the append completes
    store.append_event("job_1", "step_started", step="parse")

    # Then both events exist with distinct, gapless sequence numbers
    assert sorted(e["type"] for e in events_of(table, "job_1")[2:]) == ["cancel_requested", "step_started"]
    assert [e["seq"] for e in events_of(table, "job_1")] == [1, 2, 3, 4]


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

        def synchronized_get_job(job_id: str, **kwargs: Any) -> dict[str, Any] | None:
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
    job = store.get_job("job_1")
    assert job["status"] == "running" and job["version"] == 2


# ---------------------------------------------------------------------- idempotency


def test_same_idempotency_key_and_payload_returns_the_same_job(store: JobStore, table: Any) -> None:
    # Given a job created with an idempotency key
    first, created_first = store.create_job(new_job("job_1", idempotency_key="k-1"))

    # When the same payload is submitted again under the same key (with a fresh job id)
    second, created_second = store.create_job(new_job("job_2", idempotency_key="k-1"))

    # Then the first job is returned, nothing new is written
    assert created_first is True and created_second is False
    assert second["job_id"] == first["job_id"] == "job_1"
    assert store.get_job("job_2") is None
    assert items_of(table, "job_2") == []


def test_same_idempotency_key_with_a_different_payload_conflicts(store: JobStore, table: Any) -> None:
    store.create_job(new_job("job_1", idempotency_key="k-1"))

    with pytest.raises(IdempotencyConflict) as raised:
        store.create_job(new_job("job_2", idempotency_key="k-1", payload_hash="hash-2"))

    assert raised.value.job_id == "job_1"
    assert items_of(table, "job_2") == []


def test_an_expired_idempotency_record_allows_a_new_job(store: JobStore, clock: FakeClock) -> None:
    # Given a job created under a key, and the record's TTL has passed
    store.create_job(new_job("job_1", idempotency_key="k-1"))
    clock.advance(store.idempotency_ttl + timedelta(seconds=2))
    assert store.find_idempotent("tenant-a", "k-1") is None

    # When the same key is used again
    job, created = store.create_job(new_job("job_2", idempotency_key="k-1", payload_hash="hash-2"))

    # Then a new job is created and the key now points to it
    assert created is True and job["job_id"] == "job_2"
    assert store.find_idempotent("tenant-a", "k-1")["job_id"] == "job_2"


def test_an_idempotency_record_within_its_ttl_still_holds(store: JobStore, clock: FakeClock) -> None:
    store.create_job(new_job("job_1", idempotency_key="k-1"))
    clock.advance(store.idempotency_ttl - timedelta(seconds=2))

    job, created = store.create_job(new_job("job_2", idempotency_key="k-1"))

    assert created is False and job["job_id"] == "job_1"


def test_idempotency_keys_are_scoped_to_the_tenant(store: JobStore) -> None:
    a, created_a = store.create_job(new_job("job_a", tenant="tenant-a", idempotency_key="shared"))
    b, created_b = store.create_job(new_job("job_b", tenant="tenant-b", idempotency_key="shared"))

    assert created_a and created_b
    assert (a["tenant_id"], b["tenant_id"]) == ("tenant-a", "tenant-b")
    assert store.find_idempotent("tenant-a", "shared")["job_id"] == "job_a"
    assert store.find_idempotent("tenant-b", "shared")["job_id"] == "job_b"


# ---------------------------------------------------------------------- tenancy and reads


def test_get_job_for_another_tenant_is_none(store: JobStore) -> None:
    store.create_job(new_job("job_1", tenant="tenant-a"))

    assert store.get_job("job_1", tenant_id="tenant-b") is None
    assert store.get_job("job_1", tenant_id="tenant-a")["job_id"] == "job_1"
    assert store.get_job("job_1")["job_id"] == "job_1"


def test_numbers_come_back_as_plain_ints(store: JobStore) -> None:
    store.create_job(new_job())
    job = store.get_job("job_1")
    assert type(job["version"]) is int
    assert type(job["progress"]["total"]) is int


def test_list_events_pages_return_every_event_exactly_once_in_order(store: JobStore) -> None:
    # Given a job with 11 events (1 from creation, 10 appended)
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    for i in range(9):
        store.append_event("job_1", "step_started", step=f"s{i}", attempt=1)
    # and a step record, which shares the partition but is not an event
    store.put_step("job_1", "s0", None, {"status": "running"})

    # When they are read 4 at a time following the cursor
    seen: list[int] = []
    cursor: int | None = 0
    pages = 0
    while cursor is not None:
        page, cursor = store.list_events("job_1", after=cursor, limit=4)
        seen.extend(e["seq"] for e in page)
        pages += 1
        assert pages <= 5, "paging does not terminate"

    # Then every event comes exactly once, oldest first
    assert seen == list(range(1, 12))


def test_list_events_after_a_cursor_starts_after_it(store: JobStore) -> None:
    store.create_job(new_job())
    for _ in range(3):
        store.append_event("job_1", "tick")

    page, cursor = store.list_events("job_1", after=2, limit=100)

    assert [e["seq"] for e in page] == [3, 4]
    assert cursor is None


# ---------------------------------------------------------------------- job listings


@pytest.fixture
def table(aws: None) -> Any:
    return create_jobs_table()


def listed(store: JobStore, **query: Any) -> tuple[list[list[str]], list[str | None]]:
    """Every page of a listing (page size 2): the job ids of each page and each page's cursor."""
    pages: list[list[str]] = []
    cursors: list[str | None] = []
    cursor = None
    for _ in range(20):
        jobs, cursor = store.page_jobs(limit=2, cursor=cursor, **query)
        pages.append([j["job_id"] for j in jobs])
        cursors.append(cursor)
        if cursor is None:
            break
    return pages, cursors


def seed(store: JobStore, clock: FakeClock, tenants: list[str]) -> list[str]:
    """One job per entry, a second apart, oldest first; returns the job ids."""
    ids = []
    for n, tenant in enumerate(tenants):
        clock.advance(timedelta(seconds=1))
        store.create_job(new_job(f"job_{n:02d}", tenant=tenant))
        ids.append(f"job_{n:02d}")
    return ids


def test_every_tenants_jobs_are_listed_newest_first_in_pages_without_gaps_or_repeats(
    store: JobStore, clock: FakeClock
) -> None:
    ids = seed(store, clock, ["tenant-a", "tenant-b", "tenant-c", "tenant-a", "tenant-b"])
    store.transition("job_00", S.RUNNING, event="job_started")  # updates do not reorder the listing

    pages, cursors = listed(store)

    assert pages == [["job_04", "job_03"], ["job_02", "job_01"], ["job_00"]]
    assert cursors[-1] is None and all(cursors[:-1])
    assert sorted(j for page in pages for j in page) == ids
    [first] = [j for j in store.page_jobs(limit=50)[0] if j["job_id"] == "job_00"]
    assert first["status"] == "running" and first["tenant_id"] == "tenant-a", "the listing returns whole jobs"


def test_a_tenants_jobs_in_a_status_are_paged_through_the_filter(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a"] * 6 + ["tenant-b"])
    for job_id in ("job_01", "job_02", "job_04"):
        store.transition(job_id, S.RUNNING, event="job_started")

    pages, _ = listed(store, tenant_id="tenant-a", status=S.RUNNING)
    everyone, _ = listed(store, status=S.QUEUED)

    assert [j for page in pages for j in page] == ["job_04", "job_02", "job_01"]
    assert [j for page in everyone for j in page] == ["job_06", "job_05", "job_03", "job_00"]


def test_an_exact_last_page_ends_the_listing(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a"] * 2)

    jobs, cursor = store.page_jobs(tenant_id="tenant-a", limit=2)

    assert [j["job_id"] for j in jobs] == ["job_01", "job_00"]
    assert cursor is None or store.page_jobs(tenant_id="tenant-a", limit=2, cursor=cursor)[0] == []


def test_a_cursor_resumes_only_the_listing_that_handed_it_out(store: JobStore, clock: FakeClock) -> None:
    seed(store, clock, ["tenant-a", "tenant-a", "tenant-a", "tenant-b", "tenant-b", "tenant-b"])
    _, of_a = store.page_jobs(tenant_id="tenant-a", limit=1)
    _, of_all = store.page_jobs(limit=1)
    assert of_a and of_all

    for misuse in (
        {"tenant_id": "tenant-b", "cursor": of_a},  # never into another tenant's jobs
        {"cursor": of_a},
        {"tenant_id": "tenant-a", "cursor": of_all},
        {"cursor": "not-a-cursor"},
        {"cursor": "eyJpbmRleCI6ICJieV9jcmVhdGVkIn0"},  # {"index": "by_created"}: no key
    ):
        with pytest.raises(BadCursor):
            store.page_jobs(limit=1, **misuse)
