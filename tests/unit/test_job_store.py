"""The job aggregate (`longhaul.storage.jobs.JobStore`) against moto's DynamoDB: atomic creation, CAS transitions,
idempotency, tenancy and event paging. Reads come back as typed `Job`/`EventView` records. Job listings are in
`test_job_listing.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from longhaul.core.auth import api_key_item
from longhaul.core.contracts import JobStatus
from longhaul.core.records import Job
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.dynamo import Cancelled
from longhaul.storage.jobs import IdempotencyConflict, JobStore, NewJob, TransitionRejected
from tests.unit.conftest import FakeClock

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


def read(store: JobStore, job_id: str) -> Job:
    job = store.get_job(job_id)
    assert job is not None, f"no job {job_id}"
    return job


def items_of(table: Any, job_id: str) -> list[dict[str, Any]]:
    return table.query(KeyConditionExpression=Key("pk").eq(f"JOB#{job_id}"), ConsistentRead=True)["Items"]


def events_of(table: Any, job_id: str) -> list[dict[str, Any]]:
    return [i for i in items_of(table, job_id) if i["sk"].startswith("EVENT#")]


def all_items(table: Any) -> list[dict[str, Any]]:
    return table.scan(ConsistentRead=True)["Items"]


# ---------------------------------------------------------------------- create


def test_create_job_writes_the_queued_job_and_its_first_event_together(store: JobStore, table: Any) -> None:
    # Given an empty table / When a job is created
    job, created = store.create_job(new_job())

    # Then the job is queued at version 1 and exactly one `job_queued` event (seq 1) exists
    assert created is True
    assert job.status == S.QUEUED
    assert job.version == 1 and job.event_seq == 1
    assert store.get_job("job_1") == job
    assert table.get_item(Key={"pk": "JOB#job_1", "sk": "JOB"})["Item"]["gsi1pk"] == "TENANT#tenant-a"
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
    with pytest.raises(Cancelled) as raised:
        store.create_job(new_job(payload_hash="other"))

    # Then the transaction is cancelled as a whole: neither the job nor its first event is overwritten
    assert raised.value.guard_failed
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
    job = read(store, "job_1")
    assert job.status == S.COMPLETED
    assert job.version == 5 and job.event_seq == 5
    assert job.result_key == "results/x"
    assert job.started_at is not None and job.finished_at is not None
    assert done == job  # what the transition returns is what was stored


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


# ---------------------------------------------------------------------- idempotency


def test_same_idempotency_key_and_payload_returns_the_same_job(store: JobStore, table: Any) -> None:
    # Given a job created with an idempotency key
    first, created_first = store.create_job(new_job("job_1", idempotency_key="k-1"))

    # When the same payload is submitted again under the same key (with a fresh job id)
    second, created_second = store.create_job(new_job("job_2", idempotency_key="k-1"))

    # Then the first job is returned, nothing new is written
    assert created_first is True and created_second is False
    assert second.job_id == first.job_id == "job_1"
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
    assert created is True and job.job_id == "job_2"
    record = store.find_idempotent("tenant-a", "k-1")
    assert record is not None and record.job_id == "job_2" and record.payload_hash == "hash-2"


def test_an_idempotency_record_within_its_ttl_still_holds(store: JobStore, clock: FakeClock) -> None:
    store.create_job(new_job("job_1", idempotency_key="k-1"))
    clock.advance(store.idempotency_ttl - timedelta(seconds=2))

    job, created = store.create_job(new_job("job_2", idempotency_key="k-1"))

    assert created is False and job.job_id == "job_1"


def test_idempotency_keys_are_scoped_to_the_tenant(store: JobStore) -> None:
    a, created_a = store.create_job(new_job("job_a", tenant="tenant-a", idempotency_key="shared"))
    b, created_b = store.create_job(new_job("job_b", tenant="tenant-b", idempotency_key="shared"))

    assert created_a and created_b
    assert (a.tenant_id, b.tenant_id) == ("tenant-a", "tenant-b")
    records = [store.find_idempotent(t, "shared") for t in ("tenant-a", "tenant-b")]
    assert [(r.job_id, r.payload_hash) if r else None for r in records] == [("job_a", "hash-1"), ("job_b", "hash-1")]


# ---------------------------------------------------------------------- tenancy and reads


def test_get_job_for_another_tenant_is_none(store: JobStore) -> None:
    store.create_job(new_job("job_1", tenant="tenant-a"))

    assert store.get_job("job_1", tenant_id="tenant-b") is None
    assert read(store, "job_1").tenant_id == "tenant-a"
    assert store.get_job("job_1", tenant_id="tenant-a") == read(store, "job_1")


def test_numbers_and_times_come_back_typed(store: JobStore, clock: FakeClock) -> None:
    store.create_job(new_job())
    job = read(store, "job_1")
    assert type(job.version) is int
    assert type(job.progress.total) is int and job.progress.total == 8
    assert job.created_at == clock.now()  # stored as an ISO string, read back as the same instant


def test_list_events_pages_return_every_event_exactly_once_in_order(store: JobStore, table: Any) -> None:
    # Given a job with 11 events (1 from creation, 10 appended)
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    for i in range(9):
        store.append_event("job_1", "step_started", step=f"s{i}", attempt=1)
    # and a step record, which shares the partition but is not an event
    CheckpointStore(table).put_step("job_1", "s0", None, {"status": "running"})

    # When they are read 4 at a time following the cursor
    seen: list[int] = []
    cursor: int | None = 0
    pages = 0
    while cursor is not None:
        page, cursor = store.list_events("job_1", after=cursor, limit=4)
        seen.extend(e.seq for e in page)
        pages += 1
        assert pages <= 5, "paging does not terminate"

    # Then every event comes exactly once, oldest first
    assert seen == list(range(1, 12))


def test_list_events_after_a_cursor_starts_after_it(store: JobStore) -> None:
    store.create_job(new_job())
    for _ in range(3):
        store.append_event("job_1", "tick")

    page, cursor = store.list_events("job_1", after=2, limit=100)

    assert [e.seq for e in page] == [3, 4]
    assert cursor is None


# ---------------------------------------------------------------------- bookkeeping


def test_update_job_sets_fields_only_while_the_job_is_in_an_allowed_status(store: JobStore) -> None:
    store.create_job(new_job())

    # A queued job is not active: informational fields are not written
    assert store.update_job("job_1", {"current_step": "parse"}) is False
    assert read(store, "job_1").current_step is None

    store.transition("job_1", S.RUNNING, event="job_started")
    assert store.update_job("job_1", {"current_step": "parse"}) is True
    assert store.update_job("job_1", {"current_step": None}, only_if=[S.QUEUED]) is False
    job = read(store, "job_1")
    assert job.current_step == "parse" and job.version == 2  # no version bump: not a transition


def test_mark_stuck_records_the_report_without_making_the_job_look_updated(store: JobStore, clock: FakeClock) -> None:
    store.create_job(new_job())
    before = read(store, "job_1")
    clock.advance(timedelta(hours=1))

    store.mark_stuck("job_1", "2025-01-02T04:04:05+00:00")

    after = read(store, "job_1")
    assert after.stuck_reported_at is not None and after.stuck_reported_at.hour == 4
    assert after.updated_at == before.updated_at
    with pytest.raises(ClientError):  # a report never creates a job
        store.mark_stuck("job_missing", "2025-01-02T04:04:05+00:00")


def test_discard_new_job_leaves_nothing_and_frees_the_idempotency_key(store: JobStore, table: Any) -> None:
    # Given a new job created under a key whose execution could not be started
    job, _ = store.create_job(new_job("job_1", idempotency_key="k-1"))

    # When it is discarded
    store.discard_new_job(job)

    # Then neither the job, its event nor its idempotency record remain, and the key makes a new job
    assert all_items(table) == []
    again, created = store.create_job(new_job("job_2", idempotency_key="k-1", payload_hash="hash-2"))
    assert created and again.job_id == "job_2"


def test_a_job_that_started_is_not_discarded(store: JobStore) -> None:
    job, _ = store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")

    with pytest.raises(Cancelled):
        store.discard_new_job(job)

    assert read(store, "job_1").status == S.RUNNING


def test_an_api_key_resolves_to_its_tenant_and_role(store: JobStore, table: Any) -> None:
    table.put_item(Item=api_key_item("key-of-a-0123456789", "tenant-a"))
    table.put_item(Item=api_key_item("key-of-ops-0123456789", "ops", role="operator"))

    tenant, operator = store.principal_for_key("key-of-a-0123456789"), store.principal_for_key("key-of-ops-0123456789")
    assert tenant is not None and operator is not None
    assert (tenant.tenant_id, tenant.role) == ("tenant-a", "tenant")
    assert (operator.tenant_id, operator.role) == ("ops", "operator")
    assert tenant.key_id and tenant.key_id != operator.key_id  # names the key in audit records, never is it
    assert store.principal_for_key("key-unknown-0123456789") is None
