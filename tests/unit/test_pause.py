"""Pause and resume against the job's status machine: the request, the runner's pause at a step boundary, resume,
withdrawal, and the refusals (on moto's DynamoDB, a fake clock)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from longhaul import services as wiring
from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import JobPaused
from longhaul.engine import pause
from longhaul.engine.runner import _live_job
from longhaul.storage.jobs import TRANSITIONS, TransitionRejected
from tests.unit.conftest import FakeClock
from tests.unit.test_job_store import events_of, new_job, read

S = JobStatus


class Tokens:
    def __init__(self) -> None:
        self.succeeded: list[str] = []

    def succeed(self, token: str, output: Mapping[str, Any]) -> bool:
        self.succeeded.append(token)
        return True

    def fail(self, token: str, *, error: str, cause: str = "") -> bool:
        return True


@pytest.fixture
def steered(services: wiring.Services) -> wiring.Services:
    return dataclasses.replace(services, tokens=Tokens())


def _running(services: wiring.Services) -> None:
    services.jobs.create_job(new_job())
    services.jobs.transition("job_1", S.RUNNING, event="job_started")


def _types(table: Any) -> list[str]:
    return [e["type"] for e in events_of(table, "job_1")]


def test_paused_is_entered_only_from_running_or_retrying_and_left_for_running_cancel_or_expiry() -> None:
    assert {s for s, to in TRANSITIONS.items() if S.PAUSED in to} == {S.RUNNING, S.RETRYING}
    assert TRANSITIONS[S.PAUSED] == {S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}


def test_a_pause_is_reached_at_the_next_step_boundary_once_and_a_resume_wakes_the_wait(
    steered: wiring.Services, table: Any
) -> None:
    _running(steered)
    # Given a pause asked for (twice: the second answers the first)
    first = pause.request_pause(steered, read(steered.jobs, "job_1"), requested_by="tenant-a")
    again = pause.request_pause(steered, read(steered.jobs, "job_1"), requested_by="tenant-a")
    assert first.pause is not None and again.pause == first.pause
    # When the runner starts the next step (and a sibling item after it)
    for item in (0, 1):
        with pytest.raises(JobPaused):
            _live_job(steered, read(steered.jobs, "job_1"), "job_1", "extract", item)
    job = read(steered.jobs, "job_1")
    assert job.status == S.PAUSED and job.pause is not None and job.pause.step == "extract"
    assert _types(table).count("pause_requested") == 1 and _types(table).count("job_paused") == 1
    # And a second pause is refused with the status
    with pytest.raises(pause.NotPausable):
        pause.request_pause(steered, job, requested_by="tenant-a")
    # When the wait stores its token and the job is resumed
    assert pause.wait({"action": "pause", "step": "extract", "job_id": "job_1", "token": "tok"}, steered) == {
        "waiting": True
    }
    resumed = pause.resume(steered, read(steered.jobs, "job_1"), requested_by="tenant-a", stops_deadline=False)
    # Then the job runs, its token was resumed, and the next step starts
    assert resumed.status == S.RUNNING and resumed.pause is None
    assert steered.tokens.succeeded == ["tok"]  # type: ignore[union-attr]
    assert _live_job(steered, read(steered.jobs, "job_1"), "job_1", "extract", 0).status == S.RUNNING
    # And a duplicate resume changes nothing
    pause.resume(steered, read(steered.jobs, "job_1"), requested_by="tenant-a", stops_deadline=False)
    assert _types(table).count("job_resumed") == 1


def test_a_resume_before_the_pause_is_reached_withdraws_it(steered: wiring.Services, table: Any) -> None:
    _running(steered)
    pause.request_pause(steered, read(steered.jobs, "job_1"), requested_by="tenant-a")
    outcome = pause.resume(steered, read(steered.jobs, "job_1"), requested_by="tenant-a", stops_deadline=False)
    assert outcome.status == S.RUNNING and outcome.pause is None
    assert _live_job(steered, read(steered.jobs, "job_1"), "job_1", "extract", None).status == S.RUNNING
    assert "job_paused" not in _types(table) and _types(table).count("pause_withdrawn") == 1


def test_the_wait_resumes_itself_when_the_job_was_resumed_before_it_stored_its_token(
    steered: wiring.Services,
) -> None:
    _running(steered)
    pause.request_pause(steered, read(steered.jobs, "job_1"), requested_by="tenant-a")
    with pytest.raises(JobPaused):
        _live_job(steered, read(steered.jobs, "job_1"), "job_1", "extract", None)
    pause.resume(steered, read(steered.jobs, "job_1"), requested_by="tenant-a", stops_deadline=False)
    assert pause.wait({"action": "pause", "step": "extract", "job_id": "job_1", "token": "late"}, steered) == {
        "waiting": False
    }
    assert steered.tokens.succeeded == ["late"]  # type: ignore[union-attr]


def test_with_pause_stops_deadline_the_resume_moves_the_deadline_by_the_paused_time(
    steered: wiring.Services, clock: FakeClock
) -> None:
    _running(steered)
    deadline = clock.now() + timedelta(hours=1)
    steered.jobs.update_job("job_1", {"deadline_at": iso(deadline)})
    pause.request_pause(steered, read(steered.jobs, "job_1"), requested_by="tenant-a")
    with pytest.raises(JobPaused):
        _live_job(steered, read(steered.jobs, "job_1"), "job_1", "extract", None)
    clock.advance(timedelta(minutes=10))
    pause.resume(steered, read(steered.jobs, "job_1"), requested_by="tenant-a", stops_deadline=True)
    assert read(steered.jobs, "job_1").deadline_at == deadline + timedelta(minutes=10)


def test_a_finished_job_cannot_be_paused_or_resumed(steered: wiring.Services) -> None:
    _running(steered)
    steered.jobs.transition("job_1", S.FAILED, event="job_failed")
    job = read(steered.jobs, "job_1")
    with pytest.raises(pause.NotPausable):
        pause.request_pause(steered, job, requested_by="tenant-a")
    with pytest.raises(pause.NotPausable):
        pause.resume(steered, job, requested_by="tenant-a", stops_deadline=False)
    with pytest.raises(TransitionRejected):
        steered.jobs.transition("job_1", S.PAUSED, event="job_paused")
