"""The step runner around a fake work function: status moves, events, checkpoints, typed errors, dead letters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from longhaul import document_analysis
from longhaul.artifacts import ArtifactStore
from longhaul.contracts import JobStatus
from longhaul.errors import CancelledError, InternalError, InvalidInputError, LonghaulError, TransientError
from longhaul.runner import MESSAGE_LIMIT, StepContext, record_failure, run_step
from longhaul.settings import Settings
from longhaul.storage.jobs import JobStore, NewJob
from longhaul.wiring import Services
from tests.unit.conftest import TABLE_NAME

S = JobStatus
JOB_ID = "job_runner_1"
TENANT = "tenant-a"
STEPS = ("a", "b")


@pytest.fixture
def services(store: JobStore, s3: Any, bucket: str) -> Services:
    settings = Settings.model_validate({"LONGHAUL_TABLE": TABLE_NAME, "LONGHAUL_BUCKET": bucket})
    return Services(settings=settings, store=store, artifacts=ArtifactStore(s3, bucket), stepfunctions=None, sqs=None)


@pytest.fixture
def job(store: JobStore) -> dict[str, Any]:
    created, _ = store.create_job(
        NewJob(
            job_id=JOB_ID,
            tenant_id=TENANT,
            workflow="document-analysis",
            input_key=f"work/{JOB_ID}/input.json",
            payload_hash="h",
            model="offline:test",
            estimated_sla_seconds=30,
            total_steps=len(STEPS),
        )
    )
    return created


def step_event(step: str, attempt: int = 0, steps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "step": step,
        "attempt": attempt,
        "input": {
            "job_id": JOB_ID,
            "tenant_id": TENANT,
            "workflow": "document-analysis",
            "input_key": f"work/{JOB_ID}/input.json",
            "steps": steps or {},
        },
    }


class FakeWork:
    """A work function that records its calls and returns (or raises) what it is told to."""

    def __init__(self, result: dict[str, Any] | Exception | None = None) -> None:
        self.result = {"chunks_key": "work/x/chunks.json"} if result is None else result
        self.calls: list[StepContext] = []

    def __call__(self, ctx: StepContext) -> dict[str, Any]:
        self.calls.append(ctx)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def partition(table: Any) -> list[dict[str, Any]]:
    return table.query(KeyConditionExpression=Key("pk").eq(f"JOB#{JOB_ID}"), ConsistentRead=True)["Items"]


def events(store: JobStore) -> list[dict[str, Any]]:
    return store.list_events(JOB_ID, limit=200)[0]


def event_types(store: JobStore) -> list[str]:
    return [e["type"] for e in events(store)]


def status(store: JobStore) -> str:
    return store.get_job(JOB_ID)["status"]


# ---------------------------------------------------------------------- the happy path


@pytest.mark.usefixtures("job")
def test_the_first_step_starts_the_job_and_checkpoints_its_output(store: JobStore, services: Services) -> None:
    # Given a queued job / When its first step runs
    work = FakeWork({"parsed_key": "work/job/parse/out.json", "pages": 3})
    output = run_step(step_event("a"), work, services, steps=STEPS)

    # Then the work ran once with the step's context and its output is returned
    assert output == {"parsed_key": "work/job/parse/out.json", "pages": 3}
    assert len(work.calls) == 1
    assert work.calls[0].job_id == JOB_ID and work.calls[0].event.step == "a"

    # and the job is running, with one event per fact, in order
    job = store.get_job(JOB_ID)
    assert job["status"] == "running"
    assert job["started_at"]
    assert [(e["seq"], e["type"]) for e in events(store)] == [
        (1, "job_queued"),
        (2, "job_started"),
        (3, "step_started"),
        (4, "step_finished"),
    ]
    started, finished = events(store)[2:]
    assert (started["step"], started["attempt"]) == ("a", 1)
    assert (finished["step"], finished["attempt"]) == ("a", 1)
    assert "duration_ms" in finished["detail"]

    # and the step record is a succeeded checkpoint carrying the output
    record = store.get_step(JOB_ID, "a")
    assert record["status"] == "succeeded"
    assert record["output"] == output
    assert record["attempts"] == 1
    assert job["progress"]["completed"] == 1 and job["progress"]["total"] == 2


@pytest.mark.usefixtures("job")
def test_a_duplicate_delivery_returns_the_checkpoint_without_running_or_writing(
    store: JobStore, services: Services, table: Any
) -> None:
    # Given a step that already succeeded
    first = run_step(step_event("a"), FakeWork({"n": 1}), services, steps=STEPS)
    before = partition(table)

    # When the same step is delivered again
    again = FakeWork({"n": 2})
    output = run_step(step_event("a"), again, services, steps=STEPS)

    # Then the checkpointed output comes back, the work is not run, and nothing is written
    assert output == first == {"n": 1}
    assert again.calls == []
    assert partition(table) == before


@pytest.mark.usefixtures("job")
def test_the_last_step_completes_the_job_with_its_result_key(store: JobStore, services: Services) -> None:
    # Given the first step done
    run_step(step_event("a"), FakeWork({"chunks_key": "work/x"}), services, steps=STEPS)

    # When the last step returns the result reference
    output = run_step(
        step_event("b", steps={"a": {"chunks_key": "work/x"}}),
        FakeWork({"result_key": "results/x"}),
        services,
        steps=STEPS,
    )

    # Then the job is completed with that result key and full progress
    assert output == {"result_key": "results/x"}
    job = store.get_job(JOB_ID)
    assert job["status"] == "completed"
    assert job["result_key"] == "results/x"
    assert job["finished_at"]
    assert job["progress"]["completed"] == job["progress"]["total"] == 2
    assert job.get("current_step") is None
    assert event_types(store)[-1] == "job_completed"
    assert events(store)[-1]["status"] == "completed"


def test_the_runner_treats_the_last_document_analysis_step_as_the_end(store: JobStore, services: Services) -> None:
    """The handlers pass `document_analysis.STEPS`; only its last step completes a job."""
    store.create_job(NewJob(JOB_ID, TENANT, "document-analysis", f"work/{JOB_ID}/input.json", "h", "offline:test", 30))
    *middle, last = document_analysis.STEPS

    run_step(step_event(middle[-1]), FakeWork({"x": 1}), services, steps=document_analysis.STEPS)
    assert status(store) == "running"
    run_step(step_event(last), FakeWork({"result_key": "results/y"}), services, steps=document_analysis.STEPS)

    assert status(store) == "completed"
    assert store.get_job(JOB_ID)["result_key"] == "results/y"


@pytest.mark.usefixtures("job")
def test_the_step_context_exposes_earlier_outputs(services: Services) -> None:
    seen: dict[str, Any] = {}

    def work(ctx: StepContext) -> dict[str, Any]:
        seen.update(ctx.output_of("a"))
        return {}

    run_step(step_event("b", steps={"a": {"chunks_key": "k"}}), work, services, steps=("a", "b", "c"))

    assert seen == {"chunks_key": "k"}


# ---------------------------------------------------------------------- failures of an attempt


@pytest.mark.usefixtures("job")
def test_a_transient_error_is_reraised_recorded_and_moves_the_job_to_retrying(
    store: JobStore, services: Services
) -> None:
    # Given a running job
    run_step(step_event("a"), FakeWork(), services, steps=STEPS)
    boom = TransientError("model endpoint throttled")

    # When the next step's work fails transiently
    with pytest.raises(TransientError) as raised:
        run_step(step_event("b", attempt=0), FakeWork(boom), services, steps=STEPS)

    # Then the very same error class reaches the state machine (its Retry matches on the class name)
    assert type(raised.value) is TransientError
    assert raised.value is boom
    # and the attempt failure is recorded with will_retry, then the job is retrying
    failed = next(e for e in events(store) if e["type"] == "step_attempt_failed")
    assert failed["step"] == "b" and failed["attempt"] == 1
    assert failed["detail"] == {
        "error": "TransientError",
        "kind": "transient",
        "message": "model endpoint throttled",
        "will_retry": True,
    }
    assert event_types(store)[-2:] == ["step_attempt_failed", "job_retrying"]
    assert status(store) == "retrying"
    assert store.get_step(JOB_ID, "b")["status"] == "retrying"


@pytest.mark.usefixtures("job")
def test_a_retried_step_resumes_the_job_and_counts_its_attempts(store: JobStore, services: Services) -> None:
    with pytest.raises(TransientError):
        run_step(step_event("a", attempt=0), FakeWork(TransientError("blip")), services, steps=STEPS)

    output = run_step(step_event("a", attempt=1), FakeWork({"ok": True}), services, steps=STEPS)

    assert output == {"ok": True}
    assert status(store) == "running"
    assert "job_resumed" in event_types(store)
    record = store.get_step(JOB_ID, "a")
    assert record["status"] == "succeeded" and record["attempts"] == 2
    assert [e["attempt"] for e in events(store) if e["type"] == "step_started"] == [1, 2]


@pytest.mark.usefixtures("job")
def test_an_unexpected_exception_becomes_an_internal_error_that_is_not_retried(
    store: JobStore, services: Services
) -> None:
    with pytest.raises(InternalError) as raised:
        run_step(step_event("a"), FakeWork(ValueError("bad parse at byte 12")), services, steps=STEPS)

    assert type(raised.value).__name__ == "InternalError"
    assert isinstance(raised.value.__cause__, ValueError)
    failed = events(store)[-1]
    assert failed["type"] == "step_attempt_failed"
    assert failed["detail"]["error"] == "InternalError"
    assert failed["detail"]["kind"] == "internal"
    assert failed["detail"]["will_retry"] is False
    assert status(store) == "running"  # the state machine's Catch decides; no retrying status
    assert store.get_step(JOB_ID, "a")["status"] == "failed"


@pytest.mark.parametrize(
    ("code", "http_status", "expected"),
    [
        ("ThrottlingException", 400, TransientError),
        ("InternalServerError", 500, TransientError),
        ("AccessDeniedException", 403, InternalError),
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
        run_step(step_event("a"), FakeWork(error), services, steps=STEPS)

    assert type(raised.value) is expected


@pytest.mark.usefixtures("job")
def test_a_deterministic_typed_error_keeps_its_class(store: JobStore, services: Services) -> None:
    with pytest.raises(InvalidInputError):
        run_step(step_event("a"), FakeWork(InvalidInputError("not a PDF")), services, steps=STEPS)

    assert events(store)[-1]["detail"]["will_retry"] is False
    assert status(store) == "running"


@pytest.mark.usefixtures("job")
def test_the_recorded_attempt_message_is_sanitized(store: JobStore, services: Services) -> None:
    long = "line one\n\tline two " + "y" * 2000

    with pytest.raises(TransientError):
        run_step(step_event("a"), FakeWork(TransientError(long)), services, steps=STEPS)

    message = events(store)[-2]["detail"]["message"]
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
        run_step(step_event("a"), work, services, steps=STEPS)

    assert work.calls == []
    assert partition(table) == before


def test_a_step_for_a_missing_job_is_invalid_input(services: Services, table: Any) -> None:
    with pytest.raises(InvalidInputError):
        run_step(step_event("a"), FakeWork(), services, steps=STEPS)
    assert partition(table) == []


@pytest.mark.usefixtures("job")
def test_a_cancel_during_the_last_step_does_not_complete_the_job(store: JobStore, services: Services) -> None:
    run_step(step_event("a"), FakeWork(), services, steps=STEPS)

    def cancelled_meanwhile(ctx: StepContext) -> dict[str, Any]:
        store.transition(JOB_ID, S.CANCEL_REQUESTED, event="cancel_requested")
        return {"result_key": "results/x"}

    with pytest.raises(CancelledError):
        run_step(step_event("b"), cancelled_meanwhile, services, steps=STEPS)

    assert status(store) == "cancel_requested"
    assert "result_key" not in store.get_job(JOB_ID)


# ---------------------------------------------------------------------- completion durability


def _throttle_completion_once(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    real = store.transition
    state = {"thrown": False}

    def flaky_transition(job_id: str, to: JobStatus, **kwargs: Any) -> dict[str, Any]:
        if to == S.COMPLETED and not state["thrown"]:
            state["thrown"] = True
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems")
        return real(job_id, to, **kwargs)

    monkeypatch.setattr(store, "transition", flaky_transition)


@pytest.mark.usefixtures("job")
def test_a_failed_completion_is_completed_by_the_retried_delivery(
    store: JobStore, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the last step whose work succeeds but whose completion write is throttled once
    run_step(step_event("a"), FakeWork(), services, steps=STEPS)
    _throttle_completion_once(store, monkeypatch)
    with pytest.raises((ClientError, TransientError)):  # which one is the subject of the next test
        run_step(step_event("b"), FakeWork({"result_key": "results/x"}), services, steps=STEPS)

    # When Step Functions retries the step
    run_step(step_event("b", attempt=1), FakeWork({"result_key": "results/x"}), services, steps=STEPS)

    # Then the job is completed with the result
    assert status(store) == "completed"
    assert store.get_job(JOB_ID)["result_key"] == "results/x"


@pytest.mark.usefixtures("job")
def test_an_aws_error_while_completing_is_a_typed_transient_error(
    store: JobStore, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_step(step_event("a"), FakeWork(), services, steps=STEPS)
    _throttle_completion_once(store, monkeypatch)

    with pytest.raises(TransientError):
        run_step(step_event("b"), FakeWork({"result_key": "results/x"}), services, steps=STEPS)


# ---------------------------------------------------------------------- record_failure (the Catch target)

LAMBDA_CAUSE = json.dumps(
    {
        "errorMessage": "document 2 is not a readable PDF",
        "errorType": "InvalidInputError",
        "requestId": "0b1c",
        "stackTrace": [
            '  File "/var/task/longhaul/runner.py", line 98, in run_step\n    output = work(ctx)\n',
            '  File "/var/task/longhaul/documents.py", line 41, in parse\n    raise InvalidInputError(msg)\n',
        ],
    }
)


def failure_event(**overrides: Any) -> dict[str, Any]:
    return {
        "job_id": JOB_ID,
        "step": "a",
        "workflow": "document-analysis",
        "error": "InvalidInputError",
        "cause": LAMBDA_CAUSE,
        "execution": f"arn:aws:states:us-east-1:123456789012:execution:document-analysis:{JOB_ID}",
        **overrides,
    }


@pytest.mark.usefixtures("job")
def test_record_failure_marks_the_job_failed_with_a_sanitized_error_and_returns_a_dead_letter(
    store: JobStore, services: Services
) -> None:
    # Given a step that failed twice
    for attempt in (0, 1):
        with pytest.raises(TransientError):
            run_step(step_event("a", attempt=attempt), FakeWork(TransientError("blip")), services, steps=STEPS)

    # When the state machine's Catch hands the failure to the recorder
    dead_letter = record_failure(failure_event(), services)

    # Then the job is failed with the error, whose message is the error message only (no stack trace)
    job = store.get_job(JOB_ID)
    assert job["status"] == "failed"
    assert job["finished_at"]
    assert job["error"] == {
        "kind": "invalid-input",
        "error": "InvalidInputError",
        "step": "a",
        "item": None,
        "message": "document 2 is not a readable PDF",
    }
    assert "File" not in job["error"]["message"] and "runner.py" not in json.dumps(job["error"])
    failed_event = events(store)[-1]
    assert failed_event["type"] == "job_failed" and failed_event["status"] == "failed"
    assert failed_event["detail"]["attempts"] == 2
    assert "stackTrace" not in json.dumps(failed_event)
    assert store.get_step(JOB_ID, "a")["status"] == "failed"

    # and the dead letter names what an operator needs
    assert dead_letter["job_id"] == JOB_ID
    assert dead_letter["tenant_id"] == TENANT
    assert dead_letter["step"] == "a"
    assert dead_letter["error"] == "InvalidInputError"
    assert dead_letter["kind"] == "invalid-input"
    assert dead_letter["attempts"] == 2
    assert dead_letter["message"] == "document 2 is not a readable PDF"
    assert "runner.py" not in json.dumps(dead_letter)


@pytest.mark.parametrize(
    ("error", "kind"),
    [("States.Timeout", "timeout"), ("TransientError", "transient"), ("Lambda.Unknown", "internal")],
)
@pytest.mark.usefixtures("job")
def test_record_failure_maps_the_error_name_to_its_kind(
    store: JobStore, services: Services, error: str, kind: str
) -> None:
    dead_letter = record_failure(failure_event(error=error, cause=None), services)

    assert dead_letter["kind"] == kind
    assert store.get_job(JOB_ID)["error"]["kind"] == kind
    assert store.get_job(JOB_ID)["error"]["message"] == error  # no cause: the error name stands in


@pytest.mark.usefixtures("job")
def test_record_failure_bounds_a_long_message(store: JobStore, services: Services) -> None:
    cause = json.dumps({"errorMessage": "z" * 5000, "errorType": "OutputInvalidError"})

    dead_letter = record_failure(failure_event(error="OutputInvalidError", cause=cause), services)

    message = store.get_job(JOB_ID)["error"]["message"]
    assert len(message) <= MESSAGE_LIMIT
    assert len(dead_letter["message"]) <= MESSAGE_LIMIT


@pytest.mark.usefixtures("job")
def test_record_failure_drops_a_plain_text_stack_trace(store: JobStore, services: Services) -> None:
    cause = (
        "Traceback (most recent call last):\n"
        '  File "/var/task/longhaul/runner.py", line 98, in run_step\n'
        "    output = work(ctx)\n"
        "ValueError: bad parse at byte 12"
    )

    dead_letter = record_failure(failure_event(error="InternalError", cause=cause), services)

    message = store.get_job(JOB_ID)["error"]["message"]
    assert "Traceback" not in message and "runner.py" not in message
    assert "runner.py" not in dead_letter["message"]


def test_record_failure_on_a_completed_job_does_not_change_its_status(
    store: JobStore, services: Services, job: dict[str, Any]
) -> None:
    # Given a completed job
    run_step(step_event("a"), FakeWork(), services, steps=STEPS)
    run_step(step_event("b"), FakeWork({"result_key": "results/x"}), services, steps=STEPS)
    before = event_types(store)

    # When a late failure is recorded for it
    dead_letter = record_failure(failure_event(step="b"), services)

    # Then it stays completed, keeps its result, gains no error and no event
    job_now = store.get_job(JOB_ID)
    assert job_now["status"] == "completed"
    assert job_now["result_key"] == "results/x"
    assert "error" not in job_now
    assert event_types(store) == before
    assert dead_letter["job_id"] == JOB_ID
