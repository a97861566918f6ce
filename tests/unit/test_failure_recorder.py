"""The failure recorder (the state machine's Catch target): the job fails once with a sanitized error, the step is
marked, a dead letter goes to the dead-letter port; a fan-out's items fail alone and are summarised after it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.core.errors import ITEMS_FAILED, InvalidInputError, TransientError
from longhaul.engine.failures import MESSAGE_LIMIT, record_failure
from longhaul.engine.runner import run_step
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore
from tests.unit.fakes import FakeDeadLetters
from tests.unit.step_support import (
    JOB_ID,
    SPEC,
    TENANT,
    WORKFLOW,
    FakeWork,
    current,
    event_types,
    events,
    job,
    step_event,
)

S = JobStatus
__all__ = ["job"]  # the fixture, shared with the runner's tests

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
        "workflow": WORKFLOW,
        "error": "InvalidInputError",
        "cause": LAMBDA_CAUSE,
        "execution": f"arn:aws:states:us-east-1:123456789012:execution:document-analysis:{JOB_ID}",
        **overrides,
    }


def error_of(store: JobStore) -> dict[str, Any]:
    error = current(store).error
    assert error is not None
    return error.model_dump()


@pytest.mark.usefixtures("job")
def test_record_failure_marks_the_job_failed_with_a_sanitized_error_and_sends_a_dead_letter(
    store: JobStore, checkpoints: CheckpointStore, services: Services, dead_letters: FakeDeadLetters
) -> None:
    # Given a step that failed twice
    for attempt in (0, 1):
        with pytest.raises(TransientError):
            run_step(step_event("a", attempt=attempt), services, work=FakeWork(TransientError("blip")), spec=SPEC)

    # When the state machine's Catch hands the failure to the recorder
    dead_letter = record_failure(failure_event(), services)

    # Then the job is failed with the error, whose message is the error message only (no stack trace)
    job = current(store)
    assert job.status == S.FAILED
    assert job.finished_at is not None
    assert error_of(store) == {
        "kind": "invalid-input",
        "error": "InvalidInputError",
        "step": "a",
        "item": None,
        "items": None,
        "message": "document 2 is not a readable PDF",
        "detail": None,  # a segment's timeout says which segment; a step's failure needs no more
    }
    assert "runner.py" not in json.dumps(error_of(store))
    failed_event = events(store)[-1]
    assert failed_event.type == "job_failed" and failed_event.status == S.FAILED
    assert failed_event.detail["attempts"] == 2
    assert "stackTrace" not in failed_event.model_dump_json()
    record = checkpoints.get_step(JOB_ID, "a")
    assert record is not None and record.status == "failed"

    # and the dead letter names what an operator needs, and is the one the port received
    assert dead_letter["job_id"] == JOB_ID
    assert dead_letter["tenant_id"] == TENANT
    assert dead_letter["step"] == "a"
    assert dead_letter["error"] == "InvalidInputError"
    assert dead_letter["kind"] == "invalid-input"
    assert dead_letter["attempts"] == 2
    assert dead_letter["message"] == "document 2 is not a readable PDF"
    assert dead_letter["replay"]["path"] == f"/v1/ops/jobs/{JOB_ID}/replay"
    assert "runner.py" not in json.dumps(dead_letter)
    [recorded] = dead_letters.of_job(JOB_ID)
    assert recorded.model_dump(mode="json") == dead_letter


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
    assert error_of(store)["kind"] == kind
    assert error_of(store)["message"] == error  # no cause: the error name stands in


@pytest.mark.usefixtures("job")
def test_record_failure_bounds_a_long_message(store: JobStore, services: Services) -> None:
    cause = json.dumps({"errorMessage": "z" * 5000, "errorType": "OutputInvalidError"})

    dead_letter = record_failure(failure_event(error="OutputInvalidError", cause=cause), services)

    assert len(error_of(store)["message"]) <= MESSAGE_LIMIT
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

    message = error_of(store)["message"]
    assert "Traceback" not in message and "runner.py" not in message
    assert message == "ValueError: bad parse at byte 12"
    assert "runner.py" not in dead_letter["message"]


@pytest.mark.usefixtures("job")
def test_record_failure_on_a_completed_job_does_not_change_its_status(store: JobStore, services: Services) -> None:
    # Given a completed job
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    run_step(step_event("b"), services, work=FakeWork({"result_key": "results/x"}), spec=SPEC)
    before = event_types(store)

    # When a late failure is recorded for it
    dead_letter = record_failure(failure_event(step="b"), services)

    # Then it stays completed, keeps its result, gains no error and no event
    job_now = current(store)
    assert job_now.status == S.COMPLETED
    assert job_now.result_key == "results/x"
    assert job_now.error is None
    assert event_types(store) == before
    assert dead_letter["job_id"] == JOB_ID


@pytest.mark.usefixtures("job")
def test_record_failure_leaves_a_job_being_cancelled_to_its_cancellation(store: JobStore, services: Services) -> None:
    """Locally a stopped execution may still run a Catch (a token wait the stop interrupted): the cancel must still
    end the job `cancelled`, so its review, its events and its status agree."""
    # Given a job asked to cancel while a step was running
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    store.transition(JOB_ID, S.CANCEL_REQUESTED, event="cancel_requested")

    # When a failure of that step is recorded
    record_failure(failure_event(step="b"), services)

    # Then the job is still being cancelled, and the cancellation can end it cancelled
    assert current(store).status == S.CANCEL_REQUESTED
    store.transition(JOB_ID, S.CANCELLED, event="job_cancelled")
    assert current(store).status == S.CANCELLED and "job_failed" not in event_types(store)


# ---------------------------------------------------------------------- fan-out items


@pytest.mark.usefixtures("job")
def test_a_failed_item_marks_only_the_item_and_the_summary_fails_the_job_once(
    store: JobStore, services: Services, dead_letters: FakeDeadLetters
) -> None:
    # Given a running job whose fan-out step "b" had items 0..3, items 1 and 3 failing
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    for item in range(4):
        event = {**step_event("b"), "item": item}
        if item in (1, 3):
            with pytest.raises(InvalidInputError):
                run_step(event, services, work=FakeWork(InvalidInputError(f"item {item} unreadable")), spec=SPEC)
        else:
            run_step(event, services, work=FakeWork({"n": item}), spec=SPEC)

    # When the recorder hears of each failed item
    for item in (1, 3):
        record_failure(failure_event(step="b", item=item, error="InvalidInputError", cause=None), services)

    # Then the job still runs, each item has its own dead letter and event
    assert current(store).status == S.RUNNING
    assert sorted(d.item for d in dead_letters.of_job(JOB_ID) if d.item is not None) == [1, 3]
    assert [e.item for e in events(store) if e.type == "item_failed"] == [1, 3]

    # When the fan-out ends and its summary is recorded
    summary = record_failure(failure_event(step="b", error=ITEMS_FAILED, cause=None), services)

    # Then the job fails once, naming every failed item, and the summary sends no dead letter of its own
    error = error_of(store)
    assert current(store).status == S.FAILED
    assert error["items"] == [1, 3] and error["item"] == 1
    assert error["error"] == "InvalidInputError"
    assert "2 of 4 items failed" in error["message"]
    assert event_types(store).count("job_failed") == 1
    assert len(dead_letters.of_job(JOB_ID)) == 2
    assert (summary["step"], summary["error"]) == ("b", "InvalidInputError")


# ---------------------------------------------------------------------- completion leaves dead letters alone


@pytest.mark.usefixtures("job")
def test_completing_a_job_does_not_touch_the_dead_letter_queues(
    store: JobStore, services: Services, dead_letters: FakeDeadLetters
) -> None:
    # Given a job replayed after a failure whose dead letter the replay did not remove (it removes them itself)
    record_failure(failure_event(), services)
    store.transition(JOB_ID, S.QUEUED, event="job_replayed", set_fields={"attempts": 2})  # as a replay does
    assert dead_letters.of_job(JOB_ID)

    # When the job then completes
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    run_step(step_event("b"), services, work=FakeWork({"result_key": "results/x"}), spec=SPEC)

    # Then no step purged anything: only the operator path reads and deletes dead letters
    assert current(store).status == S.COMPLETED
    assert dead_letters.purged == []
