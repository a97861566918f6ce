"""The step runner around a fake work function: status moves, events, checkpoints, typed errors.

Each test runs a small workflow spec of its own (steps "a", "b") with `work=`, so it says what the runner does
around any step; the failure recorder (the Catch target) is in `test_failure_recorder.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from longhaul.core.contracts import JobStatus
from longhaul.core.errors import (
    CancelledError,
    InternalError,
    InvalidInputError,
    LonghaulError,
    PlatformConfigurationError,
    TransientError,
)
from longhaul.core.records import Job
from longhaul.engine.context import StepContext
from longhaul.engine.failures import MESSAGE_LIMIT
from longhaul.engine.runner import run_step
from longhaul.engine.spec import fan_out, step
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore
from longhaul.workflows import REGISTRY, WorkflowSpec
from tests.unit.step_support import (
    JOB_ID,
    SPEC,
    WORKFLOW,
    FakeWork,
    current,
    event_types,
    events,
    job,
    partition,
    spec_of,
    status,
    step_event,
    step_status,
)

S = JobStatus
__all__ = ["job"]  # the fixture


# ---------------------------------------------------------------------- the happy path


@pytest.mark.usefixtures("job")
def test_the_first_step_starts_the_job_and_checkpoints_its_output(
    store: JobStore, checkpoints: CheckpointStore, services: Services
) -> None:
    # Given a queued job / When its first step runs
    work = FakeWork({"parsed_key": "work/job/parse/out.json", "pages": 3})
    output = run_step(step_event("a"), services, work=work, spec=SPEC)

    # Then the work ran once with the step's context and its output is returned
    assert output == {"parsed_key": "work/job/parse/out.json", "pages": 3}
    assert len(work.calls) == 1
    assert work.calls[0].job_id == JOB_ID and work.calls[0].event.step == "a"

    # and the job is running, with one event per fact, in order
    job = current(store)
    assert job.status == S.RUNNING
    assert job.started_at is not None
    assert [(e.seq, e.type) for e in events(store)] == [
        (1, "job_queued"),
        (2, "job_started"),
        (3, "step_started"),
        (4, "step_finished"),
    ]
    started, finished = events(store)[2:]
    assert (started.step, started.attempt) == ("a", 1)
    assert (finished.step, finished.attempt) == ("a", 1)
    assert "duration_ms" in finished.detail

    # and the step record is a succeeded checkpoint carrying the output
    record = checkpoints.get_step(JOB_ID, "a")
    assert record is not None
    assert record.status == "succeeded"
    assert record.output == output
    assert record.attempts == 1
    assert job.progress.completed == 1 and job.progress.total == 2


@pytest.mark.usefixtures("job")
def test_a_duplicate_delivery_returns_the_checkpoint_without_running_or_writing(services: Services, table: Any) -> None:
    # Given a step that already succeeded
    first = run_step(step_event("a"), services, work=FakeWork({"n": 1}), spec=SPEC)
    before = partition(table)

    # When the same step is delivered again
    again = FakeWork({"n": 2})
    output = run_step(step_event("a"), services, work=again, spec=SPEC)

    # Then the checkpointed output comes back, the work is not run, and nothing is written but the invocation's
    # usage (a duplicate delivery is billed too)
    assert output == first == {"n": 1}
    assert again.calls == []
    assert unmetered(partition(table)) == unmetered(before)
    assert metered_requests(partition(table)) == metered_requests(before) + 1


@pytest.mark.usefixtures("job")
def test_a_concurrent_delivery_that_read_before_the_commit_neither_runs_nor_commits_again(
    store: JobStore, checkpoints: CheckpointStore, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a step that committed after another delivery of it read no checkpoint (a Task retried on its timeout
    # while the first invocation still ran)
    first = run_step(step_event("a"), services, work=FakeWork({"n": 1}), spec=SPEC)
    job_now, _ = checkpoints.read(JOB_ID, "a", None)
    reads = iter([(job_now, None)])
    real_read = checkpoints.read
    monkeypatch.setattr(checkpoints, "read", lambda *a: next(reads, None) or real_read(*a))

    # When that delivery starts
    again = FakeWork({"n": 2})
    output = run_step(step_event("a"), services, work=again, spec=SPEC)

    # Then its start meets the checkpoint: it returns it, runs nothing, and the step is committed once, still
    assert output == first and again.calls == []
    assert event_types(store).count("step_finished") == 1
    record = checkpoints.get_step(JOB_ID, "a")
    assert record is not None and record.status == "succeeded" and record.output == {"n": 1}


def metered_requests(items: list[dict[str, Any]]) -> int:
    return int(next(i for i in items if i["sk"] == "JOB").get("metered_dynamodb_requests", 0))


def unmetered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if not k.startswith("metered_")} for item in items]


@pytest.mark.usefixtures("job")
def test_a_checkpoint_of_other_inputs_is_not_reused(services: Services, checkpoints: CheckpointStore) -> None:
    # Given step b checkpointed over one output of a
    run_step(step_event("b", steps={"a": {"k": 1}}), services, work=FakeWork({"n": 1}), spec=spec_of("a", "b", "c"))

    # When b is delivered again over a different output of a (a replay changed it)
    again = FakeWork({"n": 2})
    output = run_step(step_event("b", steps={"a": {"k": 2}}), services, work=again, spec=spec_of("a", "b", "c"))

    # Then the work runs again and the new output is the checkpoint
    assert output == {"n": 2} and len(again.calls) == 1
    record = checkpoints.get_step(JOB_ID, "b")
    assert record is not None and record.output == {"n": 2} and record.attempts == 2


@pytest.mark.usefixtures("job")
def test_the_last_step_completes_the_job_with_its_result_key(store: JobStore, services: Services) -> None:
    # Given the first step done
    run_step(step_event("a"), services, work=FakeWork({"chunks_key": "work/x"}), spec=SPEC)

    # When the last step returns the result reference
    output = run_step(
        step_event("b", steps={"a": {"chunks_key": "work/x"}}),
        services,
        work=FakeWork({"result_key": "results/x"}),
        spec=SPEC,
    )

    # Then the job is completed with that result key and full progress
    assert output == {"result_key": "results/x"}
    job = current(store)
    assert job.status == S.COMPLETED
    assert job.result_key == "results/x"
    assert job.finished_at is not None
    assert job.progress.completed == job.progress.total == 2
    assert job.current_step is None
    assert event_types(store)[-1] == "job_completed"
    assert events(store)[-1].status == S.COMPLETED


@pytest.mark.usefixtures("job")
def test_the_last_step_of_the_spec_is_the_end_whatever_its_name(store: JobStore, services: Services) -> None:
    """Only the spec's last step completes a job: here "b" is a middle step."""
    three = spec_of("a", "b", "c")

    run_step(step_event("b"), services, work=FakeWork({"result_key": "results/early"}), spec=three)
    assert status(store) == S.RUNNING
    run_step(step_event("c"), services, work=FakeWork({"result_key": "results/y"}), spec=three)

    assert status(store) == S.COMPLETED
    assert current(store).result_key == "results/y"


@pytest.mark.usefixtures("job")
def test_without_a_spec_the_runner_takes_the_events_own_workflow(store: JobStore, services: Services) -> None:
    """The registry's document-analysis spec: its last step completes the job, an earlier one does not."""
    *middle, last = REGISTRY[WORKFLOW].step_names

    run_step(step_event(middle[-1]), services, work=FakeWork({"x": 1}))
    assert status(store) == S.RUNNING
    run_step(step_event(last), services, work=FakeWork({"result_key": "results/y"}))

    assert status(store) == S.COMPLETED
    assert current(store).result_key == "results/y"


@pytest.mark.usefixtures("job")
def test_the_step_context_exposes_earlier_outputs(services: Services) -> None:
    seen: dict[str, Any] = {}

    def work(ctx: StepContext) -> dict[str, Any]:
        seen.update(ctx.output_of("a"))
        return {}

    run_step(step_event("b", steps={"a": {"chunks_key": "k"}}), services, work=work, spec=spec_of("a", "b", "c"))

    assert seen == {"chunks_key": "k"}


# ---------------------------------------------------------------------- failures of an attempt


@pytest.mark.usefixtures("job")
def test_a_transient_error_is_reraised_recorded_and_moves_the_job_to_retrying(
    store: JobStore, checkpoints: CheckpointStore, services: Services
) -> None:
    # Given a running job
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    boom = TransientError("model endpoint throttled")

    # When the next step's work fails transiently
    with pytest.raises(TransientError) as raised:
        run_step(step_event("b", attempt=0), services, work=FakeWork(boom), spec=SPEC)

    # Then the very same error class reaches the state machine (its Retry matches on the class name)
    assert type(raised.value) is TransientError
    assert raised.value is boom
    # and the attempt failure is recorded with will_retry, then the job is retrying
    failed = next(e for e in events(store) if e.type == "step_attempt_failed")
    assert failed.step == "b" and failed.attempt == 1
    assert failed.detail == {
        "error": "TransientError",
        "kind": "transient",
        "message": "model endpoint throttled",
        "will_retry": True,
    }
    assert event_types(store)[-2:] == ["step_attempt_failed", "job_retrying"]
    assert status(store) == S.RETRYING
    assert step_status(checkpoints, "b") == "retrying"


@pytest.mark.usefixtures("job")
def test_a_retried_step_resumes_the_job_and_counts_its_attempts(
    store: JobStore, checkpoints: CheckpointStore, services: Services
) -> None:
    with pytest.raises(TransientError):
        run_step(step_event("a", attempt=0), services, work=FakeWork(TransientError("blip")), spec=SPEC)

    output = run_step(step_event("a", attempt=1), services, work=FakeWork({"ok": True}), spec=SPEC)

    assert output == {"ok": True}
    assert status(store) == S.RUNNING
    assert "job_resumed" in event_types(store)
    record = checkpoints.get_step(JOB_ID, "a")
    assert record is not None and record.status == "succeeded" and record.attempts == 2
    assert [e.attempt for e in events(store) if e.type == "step_started"] == [1, 2]


@pytest.mark.usefixtures("job")
def test_an_unexpected_exception_becomes_an_internal_error_that_is_not_retried(
    store: JobStore, checkpoints: CheckpointStore, services: Services
) -> None:
    with pytest.raises(InternalError) as raised:
        run_step(step_event("a"), services, work=FakeWork(ValueError("bad parse at byte 12")), spec=SPEC)

    assert type(raised.value).__name__ == "InternalError"
    assert isinstance(raised.value.__cause__, ValueError)
    failed = events(store)[-1]
    assert failed.type == "step_attempt_failed"
    assert failed.detail["error"] == "InternalError"
    assert failed.detail["kind"] == "internal"
    assert failed.detail["will_retry"] is False
    assert status(store) == S.RUNNING  # the state machine's Catch decides; no retrying status
    assert step_status(checkpoints, "a") == "failed"


@pytest.mark.parametrize(
    ("code", "http_status", "expected"),
    [
        ("ThrottlingException", 400, TransientError),
        ("InternalServerError", 500, TransientError),
        ("ValidationException", 400, InternalError),
        # a grant the deployment lacks (JSON APIs, then S3 and query APIs): the operators' fault, never retried
        ("AccessDeniedException", 403, PlatformConfigurationError),
        ("AccessDenied", 403, PlatformConfigurationError),
    ],
)
@pytest.mark.usefixtures("job")
def test_aws_client_errors_are_classified(
    services: Services, code: str, http_status: int, expected: type[LonghaulError]
) -> None:
    error = ClientError(
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": http_status}}, "Op"
    )

    with pytest.raises(LonghaulError) as raised:
        run_step(step_event("a"), services, work=FakeWork(error), spec=SPEC)

    assert type(raised.value) is expected


@pytest.mark.usefixtures("job")
def test_a_deterministic_typed_error_keeps_its_class(store: JobStore, services: Services) -> None:
    with pytest.raises(InvalidInputError):
        run_step(step_event("a"), services, work=FakeWork(InvalidInputError("not a PDF")), spec=SPEC)

    assert events(store)[-1].detail["will_retry"] is False
    assert status(store) == S.RUNNING


@pytest.mark.usefixtures("job")
def test_the_recorded_attempt_message_is_sanitized(store: JobStore, services: Services) -> None:
    long = "line one\n\tline two " + "y" * 2000

    with pytest.raises(TransientError):
        run_step(step_event("a"), services, work=FakeWork(TransientError(long)), spec=SPEC)

    message = str(events(store)[-2].detail["message"])
    assert "\n" not in message and "\t" not in message
    assert message.startswith("line one line two y")
    assert len(message) <= MESSAGE_LIMIT


# ---------------------------------------------------------------------- cancelled or finished jobs


@pytest.mark.parametrize(
    "path",
    [[S.CANCEL_REQUESTED], [S.RUNNING, S.COMPLETED], [S.FAILED], [S.CANCELLED]],
    ids=["cancel_requested", "completed", "failed", "cancelled"],
)
@pytest.mark.usefixtures("job")
def test_a_step_for_a_stopped_job_raises_cancelled_and_writes_nothing(
    store: JobStore, services: Services, table: Any, path: list[JobStatus]
) -> None:
    for to in path:
        store.transition(JOB_ID, to, event=f"to_{to.value}")
    before = partition(table)
    work = FakeWork()

    with pytest.raises(CancelledError):
        run_step(step_event("a"), services, work=work, spec=SPEC)

    assert work.calls == []
    assert unmetered(partition(table)) == unmetered(before)  # but the invocation's usage


def test_a_step_for_a_missing_job_is_invalid_input(services: Services, table: Any) -> None:
    with pytest.raises(InvalidInputError):
        run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    assert partition(table) == []


@pytest.mark.usefixtures("job")
def test_a_cancel_during_the_last_step_does_not_complete_the_job(store: JobStore, services: Services) -> None:
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)

    def cancelled_meanwhile(ctx: StepContext) -> dict[str, Any]:
        store.transition(JOB_ID, S.CANCEL_REQUESTED, event="cancel_requested")
        return {"result_key": "results/x"}

    with pytest.raises(CancelledError):
        run_step(step_event("b"), services, work=cancelled_meanwhile, spec=SPEC)

    assert status(store) == S.CANCEL_REQUESTED
    assert current(store).result_key is None


@pytest.mark.usefixtures("job")
def test_a_cancel_during_a_step_leaves_no_checkpoint(
    store: JobStore, checkpoints: CheckpointStore, services: Services
) -> None:
    def cancelled_meanwhile(ctx: StepContext) -> dict[str, Any]:
        store.transition(JOB_ID, S.CANCEL_REQUESTED, event="cancel_requested")
        return {"x": 1}

    with pytest.raises(CancelledError):
        run_step(step_event("a"), services, work=cancelled_meanwhile, spec=SPEC)

    assert step_status(checkpoints, "a") == "running"  # started, never committed
    assert "step_finished" not in event_types(store)


# ---------------------------------------------------------------------- completion durability


def _throttle_completion_once(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last step's commit (which completes the job) is throttled once."""
    real = store.write
    state = {"thrown": False}

    def flaky_write(current: Job, events: Any, **kwargs: Any) -> Job:
        if kwargs.get("to") == S.COMPLETED and not state["thrown"]:
            state["thrown"] = True
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems")
        return real(current, events, **kwargs)

    monkeypatch.setattr(store, "write", flaky_write)


@pytest.mark.usefixtures("job")
def test_a_failed_completion_is_completed_by_the_retried_delivery(
    store: JobStore, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the last step whose work succeeds but whose completion write is throttled once
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    _throttle_completion_once(store, monkeypatch)
    with pytest.raises((ClientError, TransientError)):  # which one is the subject of the next test
        run_step(step_event("b"), services, work=FakeWork({"result_key": "results/x"}), spec=SPEC)

    # When Step Functions retries the step
    run_step(step_event("b", attempt=1), services, work=FakeWork({"result_key": "results/x"}), spec=SPEC)

    # Then the job is completed with the result
    assert status(store) == S.COMPLETED
    assert current(store).result_key == "results/x"


@pytest.mark.usefixtures("job")
def test_an_aws_error_while_completing_is_a_typed_transient_error(
    store: JobStore, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    _throttle_completion_once(store, monkeypatch)

    with pytest.raises(TransientError):
        run_step(step_event("b"), services, work=FakeWork({"result_key": "results/x"}), spec=SPEC)


@pytest.mark.usefixtures("job")
def test_an_item_is_counted_once_however_often_it_is_delivered(
    store: JobStore, checkpoints: CheckpointStore, services: Services
) -> None:
    # Given a fan-out over three items, whose items 0 and 1 have committed
    spec = WorkflowSpec(
        name=WORKFLOW,
        description="a fan-out",
        input_model=SPEC.input_model,
        result_model=SPEC.result_model,
        steps=(step("list"), fan_out("each", over="list.parts", item_unit="part"), step("end")),
        domain="tests.unit.test_runner",
    )
    steps = {"list": {"parts": ["p0", "p1", "p2"]}}

    def item(n: int, attempt: int = 0) -> dict[str, Any]:
        return {**step_event("each", attempt, steps=steps), "item": n}

    run_step(item(0), services, work=FakeWork({"part": 0}), spec=spec)
    assert current(store).view().progress.message == "each: 1 of 3 parts"
    run_step(item(1), services, work=FakeWork({"part": 1}), spec=spec)

    # When item 1 is delivered again: its checkpoint is reused, and it is not counted twice
    work = FakeWork({"part": 1})
    assert run_step(item(1, attempt=1), services, work=work, spec=spec) == {"part": 1}
    assert work.calls == []
    assert current(store).view().progress.message == "each: 2 of 3 parts"
