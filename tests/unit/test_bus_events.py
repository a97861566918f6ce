"""Events out (`longhaul.core.bus`, `longhaul.storage.bus`): the events' shape, their outbox written with each status
change, and its publishing in each job's order, once, retried after a failure."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from longhaul.core.bus import (
    JOB_STATUS_CHANGED,
    REVIEW_DECIDED,
    REVIEW_REQUESTED,
    SOURCE,
    entries_for_change,
    registry_schema,
)
from longhaul.core.contracts import JobStatus
from longhaul.storage.bus import CLAIM_SECONDS, PENDING, PUBLISHED, BusOutbox
from longhaul.storage.jobs import JobStore, NewEvent
from tests.unit.conftest import FakeClock
from tests.unit.test_job_store import new_job

S = JobStatus
DETAIL_FIELDS = {"job_id", "tenant_id", "workflow", "status", "previous_status", "at", "correlation_id", "seq"}


class Bus:
    """A publisher that keeps what it was given, and fails the puts it is told to."""

    def __init__(self) -> None:
        self.put_events: list[tuple[str, dict[str, Any]]] = []
        self.fail_next = 0

    def put(self, detail_type: str, detail: str) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("the bus is down")
        self.put_events.append((detail_type, json.loads(detail)))

    def changes(self, job_id: str) -> list[tuple[int, str | None, str]]:
        return [
            (d["seq"], d["previous_status"], d["status"])
            for t, d in self.put_events
            if t == JOB_STATUS_CHANGED and d["job_id"] == job_id
        ]


@pytest.fixture
def bus() -> Bus:
    return Bus()


@pytest.fixture
def outbox(table: Any, clock: FakeClock, bus: Bus) -> BusOutbox:
    return BusOutbox(table, bus, clock=clock)


@pytest.fixture
def jobs(table: Any, clock: FakeClock, outbox: BusOutbox) -> JobStore:
    return JobStore(table, clock=clock, on_bus=outbox.drain)


# ---------------------------------------------------------------------- the events' shape


def test_a_status_change_is_one_event_with_exactly_the_documented_detail() -> None:
    (entry,) = entries_for_change(
        job_id="job_1",
        tenant_id="tenant-a",
        workflow="document-analysis",
        correlation_id="corr-1",
        to=S.COMPLETED,
        previous=S.RUNNING,
        seq=9,
        at="2026-01-02T03:04:05.123456Z",
        event="job_completed",
    )

    assert entry.detail_type == JOB_STATUS_CHANGED
    detail = json.loads(entry.detail)
    assert set(detail) == DETAIL_FIELDS
    assert detail == {
        "job_id": "job_1",
        "tenant_id": "tenant-a",
        "workflow": "document-analysis",
        "status": "completed",
        "previous_status": "running",
        "at": "2026-01-02T03:04:05.123456Z",
        "correlation_id": "corr-1",
        "seq": 9,
    }


def test_a_review_request_follows_its_change_and_a_decision_comes_before_the_resume() -> None:
    common: dict[str, Any] = {
        "job_id": "job_1",
        "tenant_id": "t",
        "workflow": "w",
        "correlation_id": None,
        "at": "2026-01-02T03:04:05Z",
    }
    requested = entries_for_change(
        **common,
        to=S.WAITING_FOR_REVIEW,
        previous=S.RUNNING,
        seq=5,
        event="review_requested",
        step="review",
        detail={"review_id": "rev_1", "assignee_group": "legal", "deadline": "2026-01-03T00:00:00Z"},
    )
    decided = entries_for_change(
        **common,
        to=S.RUNNING,
        previous=S.WAITING_FOR_REVIEW,
        seq=6,
        event="review_decided",
        step="review",
        detail={"review_id": "rev_1", "decision": "approve", "decided_by": "key_1"},
    )
    rejected = entries_for_change(
        **common, to=S.FAILED, previous=S.WAITING_FOR_REVIEW, seq=6, event="job_failed",
        detail={"review_id": "rev_1", "decision": "reject"},
    )  # fmt: skip

    assert [e.detail_type for e in requested] == [JOB_STATUS_CHANGED, REVIEW_REQUESTED]
    assert json.loads(requested[1].detail)["assignee_group"] == "legal"
    assert [e.detail_type for e in decided] == [REVIEW_DECIDED, JOB_STATUS_CHANGED]
    assert json.loads(decided[0].detail).items() >= {"review_id": "rev_1", "decision": "approve", "seq": 6}.items()
    assert [e.detail_type for e in rejected] == [REVIEW_DECIDED, JOB_STATUS_CHANGED]


@pytest.mark.parametrize("detail_type", [JOB_STATUS_CHANGED, REVIEW_REQUESTED, REVIEW_DECIDED])
def test_each_detail_type_has_an_openapi_schema_of_the_envelope_and_its_detail(detail_type: str) -> None:
    document = registry_schema(detail_type)

    schemas = document["components"]["schemas"]
    envelope = schemas["AWSEvent"]
    assert envelope["properties"]["source"]["enum"] == [SOURCE]
    assert envelope["properties"]["detail-type"]["enum"] == [detail_type]
    detail = schemas[envelope["properties"]["detail"]["$ref"].rsplit("/", 1)[1]]
    assert {"job_id", "tenant_id", "workflow", "at", "correlation_id", "seq"} <= set(detail["properties"])
    assert "anyOf" not in json.dumps(document)  # OpenAPI 3.0: nullable, not a union with null
    if detail_type == JOB_STATUS_CHANGED:
        assert set(detail["properties"]) == DETAIL_FIELDS


# ---------------------------------------------------------------------- the outbox


def test_every_status_change_is_put_once_in_order_with_its_previous_status(jobs: JobStore, bus: Bus) -> None:
    jobs.create_job(new_job("job_1"))
    jobs.transition("job_1", S.RUNNING, event="job_started")
    jobs.write(jobs.get_job("job_1"), [NewEvent("step_started", step="a")])  # type: ignore[arg-type]
    jobs.transition("job_1", S.RETRYING, event="step_retrying")
    jobs.transition("job_1", S.RUNNING, event="step_started")
    jobs.transition("job_1", S.COMPLETED, event="job_completed")

    assert bus.changes("job_1") == [
        (1, None, "queued"),
        (2, "queued", "running"),
        (4, "running", "retrying"),
        (5, "retrying", "running"),
        (6, "running", "completed"),
    ]
    assert all(set(d) == DETAIL_FIELDS for _, d in bus.put_events)


def test_a_failed_put_leaves_the_event_pending_and_nothing_after_it_overtakes_it(
    jobs: JobStore, outbox: BusOutbox, bus: Bus, clock: FakeClock
) -> None:
    jobs.create_job(new_job("job_1"))
    bus.fail_next = 1
    jobs.transition("job_1", S.RUNNING, event="job_started")  # its put fails: the transition stands
    jobs.transition("job_1", S.COMPLETED, event="job_completed")  # published only after `running`, which failed

    assert bus.changes("job_1") == [(1, None, "queued")]
    assert [e["state"] for e in outbox.events("job_1")] == [PUBLISHED, PENDING, PENDING]
    assert outbox.events("job_1")[1]["attempts"] == 1

    clock.advance(timedelta(minutes=1))
    assert outbox.relay_pending() == 2  # the sweep's safety net

    assert bus.changes("job_1") == [(1, None, "queued"), (2, "queued", "running"), (3, "running", "completed")]
    assert outbox.relay_pending() == 0
    assert all(e["state"] == PUBLISHED and "gsi2pk" not in e for e in outbox.events("job_1"))


def test_an_event_claimed_by_a_live_publisher_is_not_put_again_until_its_claim_expires(
    table: Any, clock: FakeClock, outbox: BusOutbox, bus: Bus
) -> None:
    jobs = JobStore(table, clock=clock)  # nobody publishes after the commits
    jobs.create_job(new_job("job_1"))
    jobs.transition("job_1", S.RUNNING, event="job_started")
    assert outbox._claim("job_1", 1) is not None  # a publisher that dies after its claim (and maybe its put)

    assert outbox.drain("job_1") == 0  # neither the claimed event nor the one after it
    clock.advance(timedelta(seconds=CLAIM_SECONDS + 1))
    assert outbox.drain("job_1") == 2
    assert bus.changes("job_1") == [(1, None, "queued"), (2, "queued", "running")]


def test_concurrent_drains_put_each_event_once(table: Any, clock: FakeClock, outbox: BusOutbox, bus: Bus) -> None:
    jobs = JobStore(table, clock=clock)
    jobs.create_job(new_job("job_1"))
    for to in (S.RUNNING, S.PAUSED, S.RUNNING, S.COMPLETED):
        jobs.transition("job_1", to, event="changed")
    other = BusOutbox(table, bus, clock=clock)
    # the second publisher drains while the first is between its claim and its put of the first event
    put = bus.put
    raced: list[int] = []

    def put_racing(detail_type: str, detail: str) -> None:
        if not raced:
            raced.append(other.drain("job_1"))
        put(detail_type, detail)

    bus.put = put_racing  # type: ignore[method-assign]
    assert outbox.drain("job_1") == 5

    assert raced == [0]
    assert [seq for seq, _, _ in bus.changes("job_1")] == [1, 2, 3, 4, 5]


def test_a_decision_recorded_while_the_job_runs_goes_on_the_bus_with_its_event(jobs: JobStore, bus: Bus) -> None:
    jobs.create_job(new_job("job_1"))
    jobs.transition("job_1", S.RUNNING, event="job_started")

    jobs.append_with_bus(
        "job_1",
        NewEvent("review_decided", step="review", detail={"review_id": "rev_1", "decision": "approve"}),
        {"current_step": "review"},
    )

    decided = [d for t, d in bus.put_events if t == REVIEW_DECIDED]
    assert [(d["review_id"], d["decision"], d["seq"]) for d in decided] == [("rev_1", "approve", 3)]
    assert jobs.get_job("job_1").bus_count == 3  # type: ignore[union-attr]


def test_without_a_bus_nothing_is_published_and_the_events_wait(table: Any, clock: FakeClock) -> None:
    silent = BusOutbox(table, None, clock=clock)
    jobs = JobStore(table, clock=clock, on_bus=silent.drain)
    jobs.create_job(new_job("job_1"))

    assert silent.drain("job_1") == 0 and silent.relay_pending(older_than=timedelta(0)) == 0
    assert [e["state"] for e in silent.events("job_1")] == [PENDING]
