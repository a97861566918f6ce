"""Deadlines and stuck jobs: the sweep expires jobs past their deadline and reports jobs without progress."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul import operations
from longhaul.settings import function_environment
from longhaul.storage.jobs import JobStore
from longhaul.wiring import Services, services
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
    assert operations.sweep(before, before.now())["expired"] == 0
    later = sweeper_services(platform, timedelta(minutes=61))
    summary = operations.sweep(later, later.now())
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
    assert operations.sweep(stale, stale.now())["stuck"] >= 1
    again = sweeper_services(platform, timedelta(minutes=21))
    operations.sweep(again, again.now())
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
