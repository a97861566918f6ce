"""The sweep (`longhaul.operations.sweep`) against a fake engine, the stores on moto, time from the fake clock:
finish cancellations, expire jobs past their deadline, reconcile jobs whose execution ended unrecorded, report
stuck jobs once per window."""

from __future__ import annotations

from datetime import timedelta

import pytest

from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus
from longhaul.core.ports import ExecutionStatus
from longhaul.core.records import FAN_OUT_UNIT, Job
from longhaul.core.schema import ITEMS_DONE_PREFIX
from longhaul.operations import sweep as sweeping
from longhaul.operations.sweep import START_GRACE
from longhaul.services import Services
from longhaul.storage.jobs import JobStore, NewJob
from tests.unit.conftest import FakeClock
from tests.unit.fakes import FakeEngine, Stopped

S = JobStatus
WORKFLOW = "document-analysis"
HOUR = timedelta(hours=1)


def job_id(n: int) -> str:
    return f"job_{n:028x}"


def create(services: Services, n: int = 1, *, deadline: timedelta = 2 * HOUR, to: list[JobStatus] | None = None) -> str:
    """A job of the fake clock's now with its deadline `deadline` ahead, moved through `to`; its id."""
    jid = job_id(n)
    at = services.now() + deadline
    services.jobs.create_job(
        NewJob(jid, "tenant-a", WORKFLOW, f"work/{jid}/input.json", "h", "offline:test", 30, deadline_at=iso(at))
    )
    for status in to or []:
        services.jobs.transition(jid, status, event=f"to_{status.value}")
    return jid


def read(store: JobStore, jid: str) -> Job:
    job = store.get_job(jid)
    assert job is not None
    return job


def events(store: JobStore, jid: str) -> list[str]:
    return [e.type for e in store.list_events(jid)[0]]


def sweep(services: Services, clock: FakeClock, **kwargs: timedelta) -> dict[str, int]:
    return sweeping.sweep(services, clock.now(), **kwargs)


def test_a_job_past_its_deadline_is_stopped_and_expired(
    services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock
) -> None:
    # Given a running job whose execution runs, and its deadline passes
    jid = create(services, deadline=HOUR, to=[S.RUNNING])
    engine.set_status(WORKFLOW, jid, ExecutionStatus.RUNNING)
    clock.advance(HOUR + timedelta(seconds=1))

    counts = sweep(services, clock)

    # Then its execution is stopped and the job is expired, once
    assert counts["expired"] == 1
    assert [(s.execution, s.error) for s in engine.stopped] == [(jid, "JobExpired")]
    assert read(store, jid).status == S.EXPIRED
    assert events(store, jid)[-1] == "job_expired"
    assert sweep(services, clock)["expired"] == 0


def test_a_queued_job_past_its_deadline_is_expired_too(
    services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock
) -> None:
    jid = create(services, deadline=HOUR)
    clock.advance(2 * HOUR)

    assert sweep(services, clock)["expired"] == 1
    assert read(store, jid).status == S.EXPIRED


@pytest.mark.parametrize(
    ("ended", "error", "kind"),
    [
        (ExecutionStatus.ABORTED, "ExecutionAborted", "internal"),
        (ExecutionStatus.TIMED_OUT, "ExecutionTimedOut", "timeout"),
        (ExecutionStatus.FAILED, "ExecutionFailed", "internal"),
    ],
)
def test_a_running_job_whose_execution_ended_unrecorded_is_failed(
    services: Services,
    engine: FakeEngine,
    store: JobStore,
    clock: FakeClock,
    ended: ExecutionStatus,
    error: str,
    kind: str,
) -> None:
    jid = create(services, to=[S.RUNNING])
    store.update_job(jid, {"current_step": "build_index"})
    engine.set_status(WORKFLOW, jid, ended)

    counts = sweep(services, clock)

    assert counts["reconciled"] == 1
    job = read(store, jid)
    assert job.status == S.FAILED
    assert job.error is not None
    assert (job.error.error, job.error.kind, job.error.step) == (error, kind, "build_index")


def test_a_queued_job_without_an_execution_waits_out_the_start_grace_then_fails(
    services: Services, store: JobStore, clock: FakeClock
) -> None:
    jid = create(services)  # its execution never appeared

    clock.advance(START_GRACE - timedelta(seconds=1))
    assert sweep(services, clock)["reconciled"] == 0
    assert read(store, jid).status == S.QUEUED

    clock.advance(timedelta(seconds=2))
    assert sweep(services, clock)["reconciled"] == 1
    job = read(store, jid)
    assert job.status == S.FAILED and job.error is not None and job.error.error == "ExecutionNotStarted"


def test_a_job_of_a_workflow_that_is_not_deployed_here_is_left_alone(
    services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock
) -> None:
    jid = create(services, to=[S.RUNNING])
    store.update_job(jid, {"workflow": "not-deployed-here"})
    clock.advance(START_GRACE * 2)

    counts = sweep(services, clock, stuck_after=timedelta(days=1))

    assert counts["reconciled"] == 0 and read(store, jid).status == S.RUNNING


def test_a_job_without_progress_is_reported_stuck_once_per_window(
    services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock
) -> None:
    # Given a running job whose execution runs but which has not moved for 20 minutes
    jid = create(services, to=[S.RUNNING])
    store.update_job(jid, {"current_step": "draft_answer"})
    engine.set_status(WORKFLOW, jid, ExecutionStatus.RUNNING)
    clock.advance(timedelta(minutes=20))

    # When the sweep runs: it is reported stuck with how long it has been idle
    assert sweep(services, clock, stuck_after=timedelta(minutes=15))["stuck"] == 1
    stuck = store.list_events(jid)[0][-1]
    assert (stuck.type, stuck.step, stuck.detail) == ("job_stuck", "draft_answer", {"idle_seconds": 1200})

    # and not again within the window, again after it; the job itself is untouched
    clock.advance(timedelta(minutes=5))
    assert sweep(services, clock, stuck_after=timedelta(minutes=15))["stuck"] == 0
    clock.advance(timedelta(minutes=11))
    assert sweep(services, clock, stuck_after=timedelta(minutes=15))["stuck"] == 1
    assert events(store, jid).count("job_stuck") == 2
    assert read(store, jid).status == S.RUNNING and engine.stopped == []


def test_a_job_with_recent_progress_is_not_stuck(services: Services, engine: FakeEngine, clock: FakeClock) -> None:
    jid = create(services, to=[S.RUNNING])
    engine.set_status(WORKFLOW, jid, ExecutionStatus.RUNNING)
    clock.advance(timedelta(minutes=10))

    assert sweep(services, clock, stuck_after=timedelta(minutes=15)) == {
        "checked": 1,
        "expired": 0,
        "stuck": 0,
        "reconciled": 0,
        "cancelled": 0,
        "requeued": 0,
    }


def test_a_cancellation_left_requested_is_finished_by_the_sweep(
    services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock
) -> None:
    # Given a cancellation whose execution could not be stopped at the time
    jid = create(services, to=[S.RUNNING, S.CANCEL_REQUESTED])
    engine.set_status(WORKFLOW, jid, ExecutionStatus.RUNNING)

    counts = sweep(services, clock)

    assert counts["cancelled"] == 1
    assert engine.stopped == [Stopped(WORKFLOW, jid, "JobCancelled", "")]
    assert engine.status(WORKFLOW, jid) == ExecutionStatus.ABORTED
    assert read(store, jid).status == S.CANCELLED
    assert events(store, jid)[-1] == "job_cancelled"


def test_a_cancellation_stays_requested_while_the_engine_cannot_stop_the_execution(
    services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock
) -> None:
    jid = create(services, to=[S.RUNNING, S.CANCEL_REQUESTED])
    engine.set_status(WORKFLOW, jid, ExecutionStatus.RUNNING)
    engine.unavailable = True

    sweep(services, clock)

    assert read(store, jid).status == S.CANCEL_REQUESTED


def test_finished_jobs_are_not_swept(services: Services, engine: FakeEngine, store: JobStore, clock: FakeClock) -> None:
    for n, path in enumerate([[S.RUNNING, S.COMPLETED], [S.FAILED], [S.CANCELLED], [S.EXPIRED]], start=1):
        create(services, n, deadline=HOUR, to=path)
    clock.advance(3 * HOUR)

    counts = sweep(services, clock)

    assert counts["checked"] == 0
    assert engine.stopped == []


def test_the_sweep_reports_which_state_machine_versions_live_jobs_still_run(
    services: Services, engine: FakeEngine, clock: FakeClock
) -> None:
    # Given jobs running on versions 3 and 4 of their workflow, one finished on version 2, one not started yet
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:Longhaul-prod-document-analysis"
    for n, version, to in (
        (1, 3, [S.RUNNING]),
        (2, 4, [S.RUNNING]),
        (3, 4, [S.RUNNING, S.WAITING_FOR_REVIEW]),
        (4, 2, [S.RUNNING, S.COMPLETED]),
    ):
        jid = create(services, n, to=to)
        services.jobs.table.update_item(
            Key={"pk": f"JOB#{jid}", "sk": "JOB"},
            UpdateExpression="SET state_machine_version = :v",
            ExpressionAttributeValues={":v": f"{machine}:{version}"},
        )
        engine.set_status(WORKFLOW, jid, ExecutionStatus.RUNNING)
    create(services, 5)

    report = sweeping.sweep(services, clock.now())

    # Then it names the versions still in use and how many jobs run each (the finished job's version is free)
    assert report.versions == {WORKFLOW: {"3": 1, "4": 2}}


@pytest.mark.parametrize("stop", [JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.EXPIRED])
def test_a_job_stopped_mid_fan_out_shows_what_it_did_and_that_it_stopped(services: Services, stop: JobStatus) -> None:
    # Given a job 1,931 documents into a fan-out of 5,000 (its items' set, the running fan-out's progress)
    jid = create(services, to=[JobStatus.RUNNING])
    fan_out = {"step": "parse_documents", "total": 5000, "unit": "document"}
    progress = {"completed": 0, "total": 5000, "unit": FAN_OUT_UNIT, "message": "parse_documents running"}
    services.jobs.update_job(jid, {"current_step": "parse_documents", "fan_out": fan_out, "progress": progress})
    services.jobs.table.update_item(
        Key={"pk": f"JOB#{jid}", "sk": "JOB"},
        UpdateExpression="ADD #done :items",
        ExpressionAttributeNames={"#done": f"{ITEMS_DONE_PREFIX}parse_documents"},
        ExpressionAttributeValues={":items": set(range(1931))},
    )
    assert read(services.jobs, jid).view().progress.message == "parse_documents: 1,931 of 5,000 documents"

    # When it stops (whoever stops it: a cancel clears its current step)
    fields = {"current_step": None} if stop == JobStatus.CANCELLED else {}
    services.jobs.transition(jid, JobStatus.CANCEL_REQUESTED if stop == JobStatus.CANCELLED else stop, event="x")
    if stop == JobStatus.CANCELLED:
        services.jobs.transition(jid, stop, event="job_cancelled", set_fields=fields)

    # Then its progress keeps the count and says it stopped: nothing "running"
    shown = read(services.jobs, jid).view(now=services.now()).progress
    assert (shown.completed, shown.total, shown.unit) == (1931, 5000, "documents")
    assert shown.message == f"{stop.value}: 1,931 of 5,000 documents done (at parse_documents)"
    assert shown.eta_seconds is None
