"""Deadlines and stuck jobs: the sweep expires jobs past their deadline and reports jobs without progress."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from local import lambda_runtime, schedules
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core.settings import function_environment
from longhaul.operations.sweep import sweep
from longhaul.services import Services, services
from longhaul.storage.jobs import JobStore
from tests.faults.helpers import DOCUMENT_ANALYSIS, assert_consistent
from tests.workflows.conftest import Client


class ShiftedClock:
    def __init__(self, ahead: timedelta) -> None:
        self.ahead = ahead

    def now(self) -> datetime:
        return datetime.now(UTC) + self.ahead


def sweeper_services(platform: LocalPlatform, ahead: timedelta) -> Services:
    """The sweeper function's adapters, with its clock moved forward (time-skipping)."""
    name = platform.deployment.function_for_handler("handlers.ops.sweep")
    env = platform.client("lambda").get_function_configuration(FunctionName=name)["Environment"]["Variables"]
    with function_environment(env):
        real = services()
    return dataclasses.replace(real, jobs=JobStore(real.jobs.table, clock=ShiftedClock(ahead)))


@pytest.fixture
def hanging_job(platform: LocalPlatform, alpha: Client, sample_request, inject) -> Iterator[str]:
    """A job whose draft_answer hangs (at real time, for minutes) while the sweep looks at it."""
    before = platform.time_scale
    platform.set_time_scale(1.0)
    inject("draft_answer=hang")
    job_id = alpha.submit({**sample_request, "deadline_seconds": 3600})
    wait_until(
        lambda: any("draftanswer" in name.lower() for name in lambda_runtime.hanging()) or None,
        timeout=30,
        what="the hang",
    )
    yield job_id
    lambda_runtime.interrupt_waits()
    platform.set_time_scale(before)


def test_the_sweep_expires_a_job_past_its_deadline_and_stops_its_execution(
    platform: LocalPlatform, alpha: Client, hanging_job: str
):
    before = sweeper_services(platform, timedelta(minutes=5))
    assert sweep(before, before.now())["expired"] == 0
    later = sweeper_services(platform, timedelta(minutes=61))
    summary = sweep(later, later.now())
    assert summary["expired"] >= 1
    job = alpha.get(f"/v1/jobs/{hanging_job}").json()
    assert job["status"] == "expired"
    sfn = platform.client("stepfunctions")
    machine = platform.deployment.state_machine(DOCUMENT_ANALYSIS)
    arn = machine.replace(":stateMachine:", ":execution:") + f":{hanging_job}"
    wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] == "ABORTED" or None, timeout=10)
    events = alpha.events(hanging_job)
    assert events[-1]["type"] == "job_expired"
    assert_consistent(events)


def test_the_sweep_reports_a_job_without_progress_once(platform: LocalPlatform, alpha: Client, hanging_job: str):
    stale = sweeper_services(platform, timedelta(minutes=20))
    assert sweep(stale, stale.now())["stuck"] >= 1
    again = sweeper_services(platform, timedelta(minutes=21))
    sweep(again, again.now())
    stuck = [e for e in alpha.events(hanging_job) if e["type"] == "job_stuck"]
    assert len(stuck) == 1
    # the hang is in draft_answer's invocation, before its handler could record a start
    assert stuck[0]["step"] == "extract_evidence" and stuck[0]["detail"]["idle_seconds"] >= 1200
    assert alpha.get(f"/v1/jobs/{hanging_job}").json()["status"] in ("running", "retrying")
    alpha.post(f"/v1/jobs/{hanging_job}/cancel")


def test_a_deadline_outside_the_policy_is_rejected(alpha: Client, sample_request):
    for seconds in (5, 10 * 86_400):
        response = alpha.post("/v1/jobs", {**sample_request, "deadline_seconds": seconds})
        assert response.status_code == 422
        assert response.json()["errors"][0]["loc"][-1] == "deadline_seconds"


def _sweep_schedule(platform: LocalPlatform) -> schedules.Schedule:
    scheduler = platform.scheduler
    assert scheduler is not None
    (sweep,) = [s for s in scheduler.schedules if s.expression == "rate(5 minutes)"]
    return sweep


def test_the_local_runtime_fires_the_deployed_sweep_on_the_scaled_clock(platform: LocalPlatform):
    sweep = _sweep_schedule(platform)
    sweeper = platform.deployment.function_for_handler("handlers.ops.sweep")
    assert sweep.seconds == 300 and any(t.endswith(f":function:{sweeper}") for t in sweep.targets)
    delivered: list[dict] = []

    def capture(invocation, call_next):
        if invocation.function_name == sweeper:
            delivered.append(invocation.event)
        return call_next()

    before = platform.time_scale
    with lambda_runtime.middleware(capture):
        platform.set_time_scale(0.002)  # every 0.6 s
        try:
            wait_until(lambda: len(delivered) >= 2 or None, timeout=30, what="two scheduled sweeps")
        finally:
            platform.set_time_scale(before)
    event = delivered[0]
    assert event["detail-type"] == "Scheduled Event" and event["source"] == "aws.events"
    assert event["resources"] == [sweep.rule_arn] and event["detail"] == {}
    assert event["account"] == sweep.rule_arn.split(":")[4] and event["region"] == sweep.rule_arn.split(":")[3]


def test_a_deadline_is_scaled_like_the_other_local_waits(platform: LocalPlatform, alpha: Client, sample_request):
    before = platform.time_scale
    platform.set_time_scale(0.01)
    try:
        job = alpha.get(f"/v1/jobs/{alpha.submit({**sample_request, 'deadline_seconds': 60})}").json()
    finally:
        platform.set_time_scale(before)
    allowed = datetime.fromisoformat(job["deadline_at"]) - datetime.fromisoformat(job["created_at"])
    assert timedelta(seconds=0.5) <= allowed <= timedelta(seconds=0.7)  # 60 s x 0.01
    alpha.wait(job["job_id"])


def test_an_overdue_job_is_expired_by_the_scheduled_sweep(
    platform: LocalPlatform, alpha: Client, sample_request, inject
):
    # Given a job whose 60 s deadline (0.6 s at 0.01) passes while its first step hangs (then held at real time)
    before = platform.time_scale
    platform.set_time_scale(0.01)
    inject("list_documents=hang")
    job_id = alpha.submit({**sample_request, "deadline_seconds": 60})
    wait_until(lambda: lambda_runtime.hanging() or None, timeout=60, what="the hang")
    platform.set_time_scale(1.0)
    deadline = datetime.fromisoformat(alpha.get(f"/v1/jobs/{job_id}").json()["deadline_at"])
    wait_until(lambda: datetime.now(UTC) > deadline or None, timeout=5, what="the deadline")
    try:
        # When the schedule fires (what its thread does every 5 minutes x the scale)
        assert platform.scheduler is not None
        platform.scheduler.fire(_sweep_schedule(platform))
        # Then the job is expired and its execution stopped, without anyone calling the sweep
        assert alpha.get(f"/v1/jobs/{job_id}").json()["status"] == "expired"
        arn = platform.deployment.state_machine(DOCUMENT_ANALYSIS).replace(":stateMachine:", ":execution:")
        assert platform.wait_for_execution(f"{arn}:{job_id}", timeout=10)["status"] == "ABORTED"
        assert_consistent(alpha.events(job_id))
    finally:
        lambda_runtime.interrupt_waits()
        platform.set_time_scale(before)
