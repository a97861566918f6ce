"""The failure recorder tells a failure plainly: the real attempt count and what happened, in words."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.core.errors import ITEMS_FAILED, LonghaulError, TransientError
from longhaul.core.records import Job
from longhaul.engine.failures import record_failure
from longhaul.engine.runner import run_step
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore
from tests.unit.step_support import JOB_ID, SPEC, WORKFLOW, step_event
from tests.unit.step_support import job as job  # the fixture

#: What the builder passes for a step with a 60 s function timeout under the house policy.
LIMITS = {"task_timeout_seconds": 75, "function_timeout_seconds": 60, "timeout_attempts": 2}
STEP = SPEC.step_names[-1]


def failure(error: str, **overrides: Any) -> dict[str, Any]:
    return {"job_id": JOB_ID, "step": STEP, "workflow": WORKFLOW, "error": error, **overrides}


def start_attempt(services: Services, attempt: int, error: Exception | None = None) -> None:
    """The step's handler begins an attempt (and fails it with `error`, or hangs: the Task times it out)."""

    def work(_: Any) -> dict[str, Any]:
        raise error or TimeoutError("still running when the Task timed out")

    with pytest.raises(LonghaulError):  # typed by the runner; the attempt was counted either way
        run_step(step_event(STEP, attempt=attempt), services, work=work, spec=SPEC)


def job_failed_detail(store: JobStore) -> dict[str, Any]:
    events = store.list_events(JOB_ID, limit=200)[0]
    return next(dict(e.detail) for e in events if e.type == "job_failed")


def test_a_step_that_timed_out_on_every_attempt_without_starting_says_so_everywhere(
    store: JobStore, checkpoints: CheckpointStore, services: Services, job: Job
) -> None:
    # Given a step whose handler never started (a hang before it): the Task timed out on both attempts
    dead_letter = record_failure(failure("States.Timeout", cause="", limits=LIMITS), services)

    message = "timed out after 75 s on each of 2 attempts"
    failed = store.get_job(JOB_ID)
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and (failed.error.message, failed.error.kind) == (message, "timeout")
    detail = job_failed_detail(store)
    assert detail["attempts"] == 2 and detail["message"] == message
    record = checkpoints.get_step(JOB_ID, STEP)
    assert record is not None and record.attempts == 2
    assert record.error is not None and record.error.message == message
    assert dead_letter["attempts"] == 2 and dead_letter["message"] == message


def test_the_functions_own_timeout_is_told_with_the_functions_limit(services: Services, job: Job) -> None:
    start_attempt(services, 0)
    start_attempt(services, 1)

    dead_letter = record_failure(
        failure("Sandbox.Timedout", cause='{"errorMessage": "Task timed out after 60.00 seconds"}', limits=LIMITS),
        services,
    )

    assert dead_letter["attempts"] == 2
    assert dead_letter["message"] == "the function timed out after 60 s on each of 2 attempts"


def test_attempts_that_failed_otherwise_before_the_timeouts_are_counted(
    store: JobStore, services: Services, job: Job
) -> None:
    start_attempt(services, 0, TransientError("blip"))
    start_attempt(services, 1)
    start_attempt(services, 2)

    dead_letter = record_failure(failure("States.Timeout", limits=LIMITS), services)

    assert dead_letter["attempts"] == 3
    assert dead_letter["message"] == "timed out after 75 s on 2 of 3 attempts"
    assert job_failed_detail(store)["attempts"] == 3


def test_a_fan_out_summary_carries_its_timed_out_items_attempts_and_message(
    store: JobStore, services: Services, job: Job
) -> None:
    for item in (1, 3):
        record_failure(failure("States.Timeout", item=item, limits=LIMITS), services)

    summary = record_failure(failure(ITEMS_FAILED), services)

    assert summary["attempts"] == 2
    assert summary["message"].endswith("first: timed out after 75 s on each of 2 attempts")
    failed = store.get_job(JOB_ID)
    assert failed is not None and failed.error is not None and failed.error.items == [1, 3]


def test_without_the_limits_a_failure_still_counts_at_least_one_attempt(services: Services, job: Job) -> None:
    # a definition deployed before the limits were passed
    dead_letter = record_failure(failure("States.Timeout", cause=""), services)

    assert dead_letter["attempts"] == 1
    assert dead_letter["message"] == "States.Timeout"


def test_a_fan_out_summary_names_the_items_the_map_saw_fail_even_unrecorded(
    store: JobStore, services: Services, job: Job
) -> None:
    """Items whose recorders had not finished (or failed) when the Map ended: the summary names them from the Map's
    outcomes, as timed out; the one item whose failure was recorded keeps its own error."""
    record_failure(failure("InvalidInputError", item=2, cause='{"errorMessage": "not a document"}'), services)

    summary = record_failure(failure(ITEMS_FAILED, outcomes=[True, False, True, True]), services)

    failed = store.get_job(JOB_ID)
    assert failed is not None and failed.error is not None
    assert (failed.error.items, failed.error.kind, failed.error.error) == ([0, 2, 3], "timeout", "States.Timeout")
    assert summary["message"].startswith("3 of 4 items failed (items [0, 2, 3]); first: no attempt returned")


def test_a_distributed_fan_out_summary_names_every_item_that_did_not_commit(
    store: JobStore, services: Services, job: Job
) -> None:
    for item in (0, 2):
        services.checkpoints.put_step(JOB_ID, STEP, item, {"status": "succeeded"})
    record_failure(failure("States.Timeout", item=3, limits=LIMITS), services)

    record_failure(failure(ITEMS_FAILED, count=5), services)

    failed = store.get_job(JOB_ID)
    assert failed is not None and failed.error is not None
    assert (failed.error.items, failed.error.kind) == ([1, 3, 4], "timeout")
