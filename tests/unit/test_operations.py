"""Operator use cases (`longhaul.operations.replay`, `.listings`) against in-memory fakes of the engine and dead
letters, the stores on moto: replay from a step (inside a fan-out only the unfinished items rerun), concurrent replays,
redrive, listings. The sweep's tests are in `test_sweep.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from longhaul.core.auth import Principal
from longhaul.core.contracts import DeadLetter, JobStatus
from longhaul.core.errors import ITEMS_FAILED, JOB_STOPPED, STEP_FAILED
from longhaul.core.ports import ExecutionStatus
from longhaul.core.problems import BadRequest, InvalidRequest, NotFound, Unavailable
from longhaul.core.records import Job
from longhaul.operations import replay as replays
from longhaul.operations.listings import list_dead_letters, list_jobs
from longhaul.operations.replay import NotReplayable, RedriveUnavailable
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore, NewJob
from longhaul.workflows import REGISTRY
from tests.unit.conftest import FakeClock
from tests.unit.fakes import FakeDeadLetters, FakeEngine

S = JobStatus
WORKFLOW = "document-analysis"
SPEC = REGISTRY[WORKFLOW]
STEPS = SPEC.step_names
FAN_OUT = next(s for s in STEPS if s in SPEC.fan_out_steps)
# The fan-out's items are the list in an earlier step's output ("<step>.<field>"): a replay plan counts them there.
PRODUCER, ITEMS_FIELD = next(s.over for s in SPEC.steps if s.name == FAN_OUT).split(".", 1)
BEFORE_FAN_OUT = STEPS[: STEPS.index(FAN_OUT)]
AFTER_FAN_OUT = STEPS[STEPS.index(FAN_OUT) + 1 :]
OPERATOR = Principal(tenant_id="ops", role="operator")
JOB_A = "job_" + "a" * 28


def create(services: Services, job_id: str = JOB_A, *, tenant: str = "tenant-a", with_input: bool = True) -> Job:
    input_key = f"work/{job_id}/input.json"
    job, _ = services.jobs.create_job(
        NewJob(job_id, tenant, WORKFLOW, input_key, "h", "offline:test", 30, total_steps=len(STEPS))
    )
    if with_input:
        services.artifacts.put_bytes(input_key, b"{}", "application/json")
    return job


def read(store: JobStore, job_id: str = JOB_A) -> Job:
    job = store.get_job(job_id)
    assert job is not None
    return job


def fail_in_the_fan_out(
    services: Services, job_id: str = JOB_A, *, items: int = 5, failed: tuple[int, ...] = (1, 3)
) -> Job:
    """A job whose steps before the fan-out succeeded, whose fan-out items `failed` failed, and that then failed."""
    jobs, checkpoints = services.jobs, services.checkpoints
    jobs.transition(job_id, S.RUNNING, event="job_started")
    for step in BEFORE_FAN_OUT:
        output: dict[str, Any] = {"step": step}
        if step == PRODUCER:
            output[ITEMS_FIELD] = [f"items/{item}.json" for item in range(items)]
        checkpoints.commit_step(job_id, step, None, {"status": "succeeded", "output": output})
    for item in range(items):
        if item in failed:
            checkpoints.put_step(job_id, FAN_OUT, item, {"status": "failed"})
        else:
            checkpoints.commit_step(job_id, FAN_OUT, item, {"status": "succeeded", "output": {"item": item}})
    error = {"kind": "invalid-input", "error": "InvalidInputError", "step": FAN_OUT, "message": "items failed"}
    return jobs.transition(job_id, S.FAILED, event="job_failed", step=FAN_OUT, set_fields={"error": error})


def kept(checkpoints: CheckpointStore, job_id: str = JOB_A) -> list[tuple[str, int | None]]:
    return [(r.step, r.item) for r in checkpoints.steps(job_id)]


def replay(services: Services, from_step: str, job_id: str = JOB_A, **kwargs: Any) -> Any:
    return replays.replay(services, OPERATOR, job_id, from_step=from_step, reason="model fixed", **kwargs)


# ---------------------------------------------------------------------- replay


def test_replaying_from_the_fan_out_reruns_only_its_unfinished_items_and_what_follows(
    services: Services, engine: FakeEngine, store: JobStore, checkpoints: CheckpointStore
) -> None:
    # Given a job that failed in its fan-out with items 1 and 3 failed (items 0, 2, 4 committed)
    create(services)
    fail_in_the_fan_out(services)

    # When an operator replays it from the fan-out
    outcome = replay(services, FAN_OUT)

    # Then the outcome says what reruns and what is kept
    name = f"{JOB_A}-r2"
    assert (outcome.status, outcome.attempt, outcome.execution) == (S.QUEUED, 2, name)
    assert outcome.rerun_steps == [FAN_OUT, *AFTER_FAN_OUT]
    assert (outcome.kept_items, outcome.rerun_items) == ({FAN_OUT: [0, 2, 4]}, {FAN_OUT: [1, 3]})

    # and only the failed items' checkpoints are dropped; earlier steps and committed items stay
    assert sorted(kept(checkpoints), key=str) == sorted(
        [(s, None) for s in BEFORE_FAN_OUT] + [(FAN_OUT, i) for i in (0, 2, 4)], key=str
    )

    # and a new execution of the job's workflow starts from the job's initial state
    [started] = engine.started
    assert (started.workflow, started.execution) == (WORKFLOW, name)
    assert started.state == read(store).initial_state().model_dump()

    # and the job is queued for its second attempt, without its old error, the replay recorded with who and why
    job = read(store)
    assert (job.status, job.attempts, job.execution_name, job.error) == (S.QUEUED, 2, name, None)
    event = store.list_events(JOB_A)[0][-1]
    assert event.type == "job_replayed"
    assert event.detail["by"] == "ops" and event.detail["reason"] == "model fixed"
    assert event.detail["rerun_items"] == {FAN_OUT: [1, 3]}


def test_replaying_from_an_earlier_step_drops_it_and_every_later_checkpoint(
    services: Services, checkpoints: CheckpointStore
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    from_step = BEFORE_FAN_OUT[-1]

    outcome = replay(services, from_step)

    assert outcome.rerun_steps == list(STEPS[STEPS.index(from_step) :])
    assert outcome.kept_items == {} and outcome.rerun_items == {
        FAN_OUT: [0, 1, 2, 3, 4]
    }  # every item of the last attempt
    assert sorted(kept(checkpoints)) == sorted((s, None) for s in BEFORE_FAN_OUT[:-1])


def test_a_replay_removes_the_dead_letters_of_the_failures_it_replays(
    services: Services, store: JobStore, dead_letters: FakeDeadLetters, clock: FakeClock
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    dead_letters.record(
        DeadLetter(
            job_id=JOB_A, tenant_id="tenant-a", workflow=WORKFLOW, step=FAN_OUT, error=ITEMS_FAILED, kind="internal",
            message="m", attempts=1, failed_at=clock.now(), replay={},
        )
    )  # fmt: skip

    replay(services, FAN_OUT)

    # the operator path removes them (a step's role may not touch the dead-letter queues)
    assert dead_letters.of_job(JOB_A) == [] and dead_letters.purged == [JOB_A]
    assert any(e.type == "dead_letters_removed" and e.detail == {"messages": 1} for e in store.list_events(JOB_A)[0])


def test_a_dry_run_answers_the_plan_and_changes_nothing(
    services: Services, engine: FakeEngine, store: JobStore, checkpoints: CheckpointStore
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    before, records, events = read(store), kept(checkpoints), store.list_events(JOB_A)[0]

    plan = replay(services, FAN_OUT, dry_run=True)

    assert plan.dry_run and (plan.status, plan.attempt, plan.execution) == (S.FAILED, 2, f"{JOB_A}-r2")
    assert plan.rerun_steps == [FAN_OUT, *AFTER_FAN_OUT]
    assert (plan.kept_items, plan.rerun_items) == ({FAN_OUT: [0, 2, 4]}, {FAN_OUT: [1, 3]})
    assert read(store) == before and kept(checkpoints) == records and store.list_events(JOB_A)[0] == events
    assert engine.started == []
    assert replay(services, FAN_OUT).model_dump(exclude={"status", "dry_run"}) == plan.model_dump(
        exclude={"status", "dry_run"}
    ), "the plan is what the replay then does"


def test_without_a_step_a_replay_starts_where_the_job_failed(services: Services) -> None:
    create(services)
    fail_in_the_fan_out(services)

    plan = replays.replay(services, OPERATOR, JOB_A, from_step=None, reason="model fixed", dry_run=True)

    assert plan.from_step == FAN_OUT and plan.rerun_items == {FAN_OUT: [1, 3]}


def test_without_a_step_a_stopped_job_replays_from_its_first_step_without_a_checkpoint(
    services: Services, store: JobStore, checkpoints: CheckpointStore
) -> None:
    # Given a job cancelled after its first step committed (no error names a step)
    create(services)
    store.transition(JOB_A, S.RUNNING, event="job_started")
    checkpoints.commit_step(JOB_A, STEPS[0], None, {"status": "succeeded", "output": {"step": STEPS[0]}})
    store.transition(JOB_A, S.CANCEL_REQUESTED, event="cancel_requested")
    store.transition(JOB_A, S.CANCELLED, event="job_cancelled")

    outcome = replays.replay(services, OPERATOR, JOB_A, from_step=None, reason="resume")

    assert outcome.from_step == STEPS[1] and outcome.rerun_steps == list(STEPS[1:])
    assert kept(checkpoints) == [(STEPS[0], None)], "nothing that completed is done again"


def test_a_second_replay_is_a_new_attempt_with_its_own_execution(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    replay(services, FAN_OUT)
    store.transition(JOB_A, S.RUNNING, event="job_started")
    store.transition(JOB_A, S.FAILED, event="job_failed")

    outcome = replay(services, FAN_OUT)

    assert (outcome.attempt, outcome.execution) == (3, f"{JOB_A}-r3")
    assert [s.execution for s in engine.started] == [f"{JOB_A}-r2", f"{JOB_A}-r3"]


OLD_VERSION = "arn:aws:states:us-east-1:123456789012:stateMachine:Longhaul-local-document-analysis:3"
CURRENT_VERSION = OLD_VERSION.removesuffix(":3") + ":4"


def ran_on(services: Services, version: str) -> None:
    """The job's first step recorded the version its execution ran (the deploy has moved on since)."""
    services.jobs.table.update_item(
        Key={"pk": f"JOB#{JOB_A}", "sk": "JOB"},
        UpdateExpression="SET state_machine_version = :v",
        ExpressionAttributeValues={":v": version},
    )


def test_a_replay_runs_the_version_the_job_ran_on_by_default(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a job that failed on version 3 of its workflow, and a deploy that has published version 4 since
    create(services)
    fail_in_the_fan_out(services)
    ran_on(services, OLD_VERSION)
    engine.versions.add(OLD_VERSION)
    engine.current[WORKFLOW] = CURRENT_VERSION

    # When an operator replays it without choosing a version
    outcome = replay(services, FAN_OUT)

    # Then the new attempt starts on its own version, and the event says so
    [started] = engine.started
    assert started.version == OLD_VERSION
    assert (outcome.version, outcome.from_version) == ("own", 3)
    assert read(store).state_machine_version == OLD_VERSION
    event = store.list_events(JOB_A)[0][-1]
    assert (event.detail["version"], event.detail["from_version"]) == ("own", 3)


def test_an_operator_may_replay_on_the_current_version_and_it_is_recorded(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    ran_on(services, OLD_VERSION)
    engine.current[WORKFLOW] = CURRENT_VERSION

    outcome = replay(services, FAN_OUT, version="current")

    [started] = engine.started
    assert started.version is None  # through the workflow's alias: the version deployed now
    assert (outcome.version, outcome.from_version) == ("current", 3)
    assert read(store).state_machine_version is None  # its first step records the new one
    assert store.list_events(JOB_A)[0][-1].detail["version"] == "current"


def test_a_job_whose_version_was_pruned_is_replayed_only_on_the_current_one(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    ran_on(services, OLD_VERSION)
    engine.current[WORKFLOW] = CURRENT_VERSION  # version 3 is gone

    with pytest.raises(NotReplayable, match=r'pruned.*"version": "current"'):
        replay(services, FAN_OUT)

    assert engine.started == [] and read(store).status == S.FAILED
    assert replay(services, FAN_OUT, version="current").status == S.QUEUED


def test_a_redrive_cannot_change_the_version(services: Services, engine: FakeEngine) -> None:
    create(services)
    fail_in_the_fan_out(services)
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.TIMED_OUT)

    with pytest.raises(InvalidRequest, match="own version"):
        replay(services, FAN_OUT, mode="redrive", version="current")


def test_a_replay_gets_the_full_deadline_again(services: Services, store: JobStore, clock: FakeClock) -> None:
    create(services)
    fail_in_the_fan_out(services)
    clock.advance(timedelta(days=3))

    replay(services, FAN_OUT)

    deadline = read(store).deadline_at
    assert deadline is not None and deadline == clock.now() + timedelta(seconds=SPEC.deadline_default_seconds)


def test_two_concurrent_replays_start_one_execution_and_the_other_is_a_409(
    services: Services,
    engine: FakeEngine,
    store: JobStore,
    checkpoints: CheckpointStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a failed job; a rival operator's replay lands right after our replay has read the job
    create(services)
    fail_in_the_fan_out(services)
    real_get_job = store.get_job
    raced = {"done": False}

    def read_then_rival_replays(job_id: str, **kwargs: Any) -> Job | None:
        snapshot = real_get_job(job_id, **kwargs)
        if not raced["done"]:
            raced["done"] = True
            replay(services, BEFORE_FAN_OUT[0])  # the rival replays from the very first step
        return snapshot

    monkeypatch.setattr(store, "get_job", read_then_rival_replays)

    # When our replay (from the fan-out) goes on from its stale read
    with pytest.raises(NotReplayable) as raised:
        replay(services, FAN_OUT)

    # Then it is a 409, only the rival's execution started, and our plan dropped nothing of the rival's
    assert raised.value.status == 409
    assert [s.execution for s in engine.started] == [f"{JOB_A}-r2"]
    assert read(store).attempts == 2
    assert kept(checkpoints) == []  # the rival's replay from the first step dropped them all; ours did not run
    assert [e.type for e in store.list_events(JOB_A)[0]].count("job_replayed") == 1


@pytest.mark.parametrize("path", [[], [S.RUNNING], [S.RUNNING, S.COMPLETED]], ids=["queued", "running", "completed"])
def test_only_failed_cancelled_or_expired_jobs_are_replayed(
    services: Services, engine: FakeEngine, store: JobStore, path: list[JobStatus]
) -> None:
    create(services)
    for status in path:
        store.transition(JOB_A, status, event=f"to_{status.value}")
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.RUNNING)  # a live job's execution runs
    before = read(store)

    with pytest.raises(NotReplayable):
        replay(services, FAN_OUT)

    assert read(store) == before and engine.started == []


def test_a_live_job_whose_execution_ended_unrecorded_is_freed_and_replayed(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a running job whose execution was aborted outside Longhaul
    create(services)
    store.transition(JOB_A, S.RUNNING, event="job_started")
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.ABORTED)

    # When it is replayed, the job is first reconciled (failed), then replayed
    outcome = replay(services, STEPS[0])

    assert outcome.status == S.QUEUED
    types = [e.type for e in store.list_events(JOB_A)[0]]
    assert types[-2:] == ["job_failed", "job_replayed"]


def test_replay_rejects_unknown_jobs_steps_and_expired_inputs(services: Services, store: JobStore) -> None:
    with pytest.raises(NotFound):
        replay(services, FAN_OUT, job_id="job_" + "b" * 28)
    with pytest.raises(NotFound):
        replay(services, FAN_OUT, job_id="not-a-job-id")

    create(services)
    fail_in_the_fan_out(services)
    with pytest.raises(InvalidRequest) as raised:
        replay(services, "no_such_step")
    assert raised.value.extra["allowed_steps"] == list(STEPS)

    gone = "job_" + "c" * 28
    create(services, gone, with_input=False)  # its intermediate artifacts have expired
    store.transition(gone, S.FAILED, event="job_failed")
    with pytest.raises(NotReplayable, match="expired"):
        replay(services, FAN_OUT, job_id=gone)


def test_an_engine_that_does_not_start_the_replay_leaves_the_job_as_it_was(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a failed job and an engine that does not answer
    create(services)
    fail_in_the_fan_out(services)
    engine.unavailable = True

    # When it is replayed: a 503, and the job is failed again, with a record of the attempt
    with pytest.raises(Unavailable):
        replay(services, FAN_OUT)

    job = read(store)
    assert job.status == S.FAILED
    assert [e.type for e in store.list_events(JOB_A)[0]][-2:] == ["job_replayed", "replay_not_started"]
    assert engine.started == []


def test_a_replay_that_did_not_start_keeps_the_error_the_job_failed_with(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    create(services)
    failed = fail_in_the_fan_out(services)
    engine.unavailable = True

    with pytest.raises(Unavailable):
        replay(services, FAN_OUT)

    assert read(store).error == failed.error


# ---------------------------------------------------------------------- redrive


def test_a_redrive_resumes_the_same_execution_and_keeps_every_checkpoint(
    services: Services, engine: FakeEngine, store: JobStore, checkpoints: CheckpointStore
) -> None:
    # Given a job whose execution timed out (outside its failure path)
    create(services)
    fail_in_the_fan_out(services)
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.TIMED_OUT)
    before = kept(checkpoints)

    outcome = replay(services, FAN_OUT, mode="redrive")

    # Then the same execution resumes, and the outcome lists what it really runs: the failed items and what follows
    assert engine.redriven == [(WORKFLOW, JOB_A)] and engine.started == []
    assert (outcome.execution, outcome.rerun_steps) == (JOB_A, [FAN_OUT, *AFTER_FAN_OUT])
    assert (outcome.kept_items, outcome.rerun_items) == ({FAN_OUT: [0, 2, 4]}, {FAN_OUT: [1, 3]})
    assert kept(checkpoints) == before
    job = read(store)
    assert (job.status, job.execution_name, job.attempts) == (S.QUEUED, JOB_A, 2)


@pytest.mark.parametrize("error", [STEP_FAILED, JOB_STOPPED])
def test_a_redrive_of_an_execution_that_ended_through_its_failure_path_is_refused(
    services: Services, engine: FakeEngine, store: JobStore, error: str
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.FAILED, error=error)
    before = read(store)

    with pytest.raises(RedriveUnavailable, match="failure path") as raised:
        replay(services, FAN_OUT, mode="redrive")

    assert raised.value.status == 409
    assert read(store) == before and engine.redriven == []


def test_a_redrive_of_an_execution_that_never_started_is_refused(services: Services, store: JobStore) -> None:
    create(services)
    fail_in_the_fan_out(services)

    with pytest.raises(RedriveUnavailable, match="does not exist"):
        replay(services, FAN_OUT, mode="redrive")

    assert read(store).status == S.FAILED


def test_a_redrive_the_engine_refuses_puts_the_job_back_with_the_reason(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    create(services)
    fail_in_the_fan_out(services)
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.ABORTED)
    engine.refuse_redrive = "the execution is older than 14 days"

    with pytest.raises(RedriveUnavailable, match="older than 14 days"):
        replay(services, FAN_OUT, mode="redrive")

    job = read(store)
    assert job.status == S.FAILED
    event = store.list_events(JOB_A)[0][-1]
    assert (event.type, event.detail["error"]) == ("redrive_refused", "the execution is older than 14 days")
    assert job.execution_name == JOB_A


def test_a_refused_redrive_keeps_the_error_the_job_failed_with(
    services: Services, engine: FakeEngine, store: JobStore
) -> None:
    create(services)
    failed = fail_in_the_fan_out(services)
    engine.set_status(WORKFLOW, JOB_A, ExecutionStatus.ABORTED)
    engine.refuse_redrive = "the execution is older than 14 days"

    with pytest.raises(RedriveUnavailable):
        replay(services, FAN_OUT, mode="redrive")

    assert read(store).error == failed.error


# ---------------------------------------------------------------------- listings


def test_dead_letters_are_listed_through_the_port_with_the_filters(
    services: Services, dead_letters: FakeDeadLetters, clock: FakeClock
) -> None:
    def letter(job_id: str, step: str, tenant: str) -> DeadLetter:
        return DeadLetter(
            job_id=job_id, tenant_id=tenant, workflow=WORKFLOW, step=step, error=ITEMS_FAILED, kind="internal",
            message="m", attempts=1, failed_at=clock.now(), replay={},
        )  # fmt: skip

    for letter_ in (letter("j1", FAN_OUT, "tenant-a"), letter("j2", STEPS[0], "tenant-a"), letter("j3", FAN_OUT, "b")):
        dead_letters.record(letter_)

    found = list_dead_letters(services, step=FAN_OUT, workflow=WORKFLOW, tenant="tenant-a", limit=10)

    assert [d.job_id for d in found] == ["j1"]
    assert len(list_dead_letters(services, step=None, workflow=None, tenant=None, limit=2)) == 2


def test_operators_list_every_tenants_jobs_or_filter_them_and_a_foreign_cursor_is_a_400(
    services: Services, store: JobStore, clock: FakeClock
) -> None:
    job_b = "job_" + "b" * 28
    create(services, JOB_A, tenant="tenant-a")
    clock.advance(timedelta(seconds=1))
    create(services, job_b, tenant="tenant-b")
    store.transition(JOB_A, S.RUNNING, event="job_started")

    everyone = list_jobs(services, tenant=None, status=None, limit=10)
    running = list_jobs(services, tenant=None, status=S.RUNNING, limit=10)
    of_b = list_jobs(services, tenant="tenant-b", status=None, limit=10)
    first = list_jobs(services, tenant=None, status=None, limit=1)

    assert [j.job_id for j in everyone.jobs] == [job_b, JOB_A]  # newest first, whatever the tenant
    assert [j.job_id for j in running.jobs] == [JOB_A]
    assert [j.job_id for j in of_b.jobs] == [job_b]
    assert first.next_cursor is not None
    rest = list_jobs(services, tenant=None, status=None, limit=1, cursor=first.next_cursor)
    assert [j.job_id for j in rest.jobs] == [JOB_A]
    with pytest.raises(BadRequest):  # a cursor resumes only the listing that handed it out
        list_jobs(services, tenant="tenant-b", status=None, limit=1, cursor=first.next_cursor)


def test_a_replay_is_a_new_span_in_the_jobs_trace_linked_to_its_root(services: Services) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from longhaul.core import correlation, tracing

    exported = InMemorySpanExporter()
    tracing.install([SimpleSpanProcessor(exported)])
    # Given a failed job whose submission opened its trace
    cid = correlation.new_id()
    input_key = f"work/{JOB_A}/input.json"
    services.jobs.create_job(
        NewJob(JOB_A, "tenant-a", WORKFLOW, input_key, "h", "offline:test", 30, total_steps=len(STEPS),
               correlation_id=cid)
    )  # fmt: skip
    services.artifacts.put_bytes(input_key, b"{}", "application/json")
    with tracing.job_trace(cid, "submit job", root=True):
        pass
    fail_in_the_fan_out(services)

    # When an operator replays it
    replay(services, FAN_OUT)

    # Then the replay is a span of the job's one trace, under its root and linked to it (a dispatch under it)
    trace_id, root = tracing.trace_id_int(cid), tracing.root_span_id_for(cid)
    spans = [s for s in exported.get_finished_spans() if s.context.trace_id == trace_id]
    [replayed] = [s for s in spans if s.name == "replay job"]
    assert replayed.parent is not None and replayed.parent.span_id == root
    assert (replayed.attributes[tracing.JOB_ID], replayed.attributes[tracing.ATTEMPT]) == (JOB_A, 2)
    assert [(link.context.trace_id, link.context.span_id) for link in replayed.links] == [(trace_id, root)]
    dispatched = [s for s in spans if s.name == "dispatch job"]
    assert all(s.parent.span_id == replayed.context.span_id for s in dispatched if s.parent)
