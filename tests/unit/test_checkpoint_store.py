"""Checkpoints (`longhaul.storage.checkpoints.CheckpointStore`) against moto's DynamoDB: step records and their
attempts, commits that hold only while the job runs, replay's deletions, and charges made once per charge id."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore, TransitionRejected
from tests.unit.conftest import FakeClock
from tests.unit.test_job_store import items_of, new_job

S = JobStatus


@pytest.fixture
def running(store: JobStore) -> str:
    store.create_job(new_job())
    store.transition("job_1", S.RUNNING, event="job_started")
    return "job_1"


def test_a_step_record_counts_each_entry_into_running(checkpoints: CheckpointStore, running: str) -> None:
    # Given a step that starts, fails for a retry, and starts again
    checkpoints.put_step(running, "parse", None, {"status": "running"})
    checkpoints.put_step(
        running, "parse", None, {"status": "retrying", "error": {"kind": "transient", "error": "T", "message": "m"}}
    )
    checkpoints.put_step(running, "parse", None, {"status": "running"})

    # Then it is one record with two attempts, still carrying the last error until a commit clears it
    record = checkpoints.get_step(running, "parse")
    assert record is not None
    assert (record.step, record.item, record.status, record.attempts) == ("parse", None, "running", 2)
    assert record.error is not None and record.error.kind == "transient"
    assert checkpoints.get_step(running, "other") is None


def test_a_committed_checkpoint_carries_its_output_and_clears_the_error(
    checkpoints: CheckpointStore, running: str, clock: FakeClock
) -> None:
    checkpoints.put_step(
        running, "parse", None, {"status": "retrying", "error": {"kind": "transient", "error": "T", "message": "m"}}
    )
    clock.advance(timedelta(seconds=3))

    checkpoints.commit_step(
        running,
        "parse",
        None,
        {"status": "succeeded", "output": {"parsed_key": "work/k"}, "input_version": "v1", "error": None},
    )

    record = checkpoints.get_step(running, "parse")
    assert record is not None and record.succeeded
    assert record.output == {"parsed_key": "work/k"} and record.input_version == "v1"
    assert record.error is None
    assert record.updated_at == clock.now()


@pytest.mark.parametrize("status", [S.CANCEL_REQUESTED, S.FAILED, S.EXPIRED])
def test_a_commit_for_a_job_that_no_longer_runs_is_rejected_and_writes_nothing(
    store: JobStore, checkpoints: CheckpointStore, running: str, table: Any, status: JobStatus
) -> None:
    store.transition(running, status, event=f"to_{status.value}")
    before = items_of(table, running)

    with pytest.raises(TransitionRejected):
        checkpoints.commit_step(running, "parse", None, {"status": "succeeded", "output": {}})

    assert items_of(table, running) == before


def test_fan_out_items_are_records_of_their_own(checkpoints: CheckpointStore, running: str) -> None:
    for item in (2, 0, 1):
        checkpoints.put_step(running, "extract", item, {"status": "running"})
    checkpoints.commit_step(running, "extract", 1, {"status": "succeeded", "output": {"n": 1}})
    checkpoints.put_step(running, "parse", None, {"status": "succeeded"})

    records = checkpoints.steps(running)

    # one per (step, item), items in item order within their step
    assert [(r.step, r.item, r.status) for r in records] == [
        ("extract", 0, "running"),
        ("extract", 1, "succeeded"),
        ("extract", 2, "running"),
        ("parse", None, "succeeded"),
    ]
    assert checkpoints.get_step(running, "extract") is None  # the step itself has no record of its own


def test_delete_steps_removes_exactly_the_named_records(checkpoints: CheckpointStore, running: str) -> None:
    for item in (0, 1, 2):
        checkpoints.put_step(running, "extract", item, {"status": "succeeded"})
    checkpoints.put_step(running, "parse", None, {"status": "succeeded"})
    checkpoints.put_step(running, "draft", None, {"status": "failed"})

    checkpoints.delete_steps(running, [("extract", 1), ("draft", None), ("never_ran", None)])

    assert [(r.step, r.item) for r in checkpoints.steps(running)] == [("extract", 0), ("extract", 2), ("parse", None)]
