"""A job you can watch: its wait state (`waiting`), its provisional result, its history for later ETAs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from longhaul.core import limits
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import RateLimitedError, TransientError, UpstreamUnavailableError
from longhaul.engine.context import StepContext
from longhaul.engine.runner import run_step
from longhaul.engine.spec import WorkflowSpec, step
from longhaul.services import Services
from longhaul.storage.jobs import JobStore
from longhaul.workflows import REGISTRY
from tests.unit.conftest import FakeClock
from tests.unit.step_support import JOB_ID, WORKFLOW, FakeWork, current, event_types, events, job, spec_of, step_event

S = JobStatus
SPEC = spec_of("a", "b", "c")
__all__ = ["job"]  # the fixture


@pytest.mark.usefixtures("job")
@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RateLimitedError("429 Too Many Requests"), "rate_limited"),
        (UpstreamUnavailableError("circuit open for openai:gpt-4o"), "provider_unavailable"),
        (TransientError("blip"), "retry_scheduled"),
    ],
)
def test_a_retryable_failure_says_what_the_job_waits_on_until_its_retry(
    store: JobStore, services: Services, clock: FakeClock, error: Exception, reason: str
) -> None:
    # Given a running job whose second step fails retryably on its second attempt (retried once already)
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    with pytest.raises(type(error)):
        run_step(step_event("b", attempt=1), services, work=FakeWork(error), spec=SPEC)

    # Then the job's view says what it waits on, until the latest time of the retry's backoff
    waiting = current(store).view(now=clock.now()).waiting
    assert waiting is not None and waiting.reason == reason
    # (a `rate-limited` failure is retried further apart: `limits.RATE_LIMITED_RETRY_*`)
    interval = (
        limits.RATE_LIMITED_RETRY_INTERVAL_SECONDS
        if isinstance(error, RateLimitedError)
        else limits.RETRY_INTERVAL_SECONDS
    )
    assert waiting.until == clock.now() + timedelta(seconds=interval * limits.RETRY_BACKOFF_RATE)
    assert waiting.step == "b" and str(error) in waiting.detail

    # When the retry starts, the job waits on nothing any more
    run_step(step_event("b", attempt=2), services, work=FakeWork(), spec=SPEC)
    assert current(store).view().waiting is None


@pytest.mark.usefixtures("job")
def test_a_failure_with_no_retry_left_sets_no_wait(store: JobStore, services: Services) -> None:
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)
    with pytest.raises(RateLimitedError):
        run_step(
            step_event("b", attempt=limits.RATE_LIMITED_RETRY_MAX_ATTEMPTS),
            services,
            work=FakeWork(RateLimitedError("429")),
            spec=SPEC,
        )

    assert current(store).view().waiting is None


@pytest.mark.usefixtures("job")
def test_the_wait_helper_sets_and_clears_only_its_own_reason(store: JobStore, clock: FakeClock) -> None:
    # Given a job waiting on an external system
    assert store.set_waiting(JOB_ID, "external_system", detail="the ERP export", until=clock.now() + timedelta(hours=1))

    # Then clearing another reason leaves it; clearing its own clears it
    assert store.clear_waiting(JOB_ID, reason="paused") is False
    assert current(store).view().waiting.reason == "external_system"  # type: ignore[union-attr]
    assert store.clear_waiting(JOB_ID, reason="external_system") is True
    assert current(store).view().waiting is None
    assert store.clear_waiting(JOB_ID) is False  # nothing to clear

    # and a finished job waits on nothing, whatever was set
    store.set_waiting(JOB_ID, "signal", detail="price list")
    store.transition(JOB_ID, S.CANCELLED, event="job_cancelled")
    assert current(store).wait_state is None
    assert store.set_waiting(JOB_ID, "signal", detail="late") is False


def _provisional_spec() -> WorkflowSpec:
    real = REGISTRY[WORKFLOW]
    return WorkflowSpec(
        name=WORKFLOW,
        description="a draft, then its check",
        input_model=real.input_model,
        result_model=real.result_model,
        steps=(step("a"), step("draft", provisional=True), step("check")),
        domain="tests.unit.test_runner",
    )


@pytest.mark.usefixtures("job")
def test_a_provisional_steps_output_becomes_the_jobs_provisional_result(
    store: JobStore, services: Services, table: Any
) -> None:
    spec = _provisional_spec()
    run_step(step_event("a"), services, work=FakeWork(), spec=spec)

    def draft(ctx: StepContext) -> dict[str, Any]:
        return {"draft_key": "k", **ctx.provisional(_draft_result())}

    run_step(step_event("draft"), services, work=draft, spec=spec)

    job = current(store)
    assert (job.provisional_step, job.provisional_key) == ("draft", f"work/{JOB_ID}/draft/provisional.json")
    assert job.view().provisional is not None and job.view().provisional.as_of_step == "draft"  # type: ignore[union-attr]
    provisional = next(e for e in events(store) if e.type == "provisional_result")
    assert provisional.step == "draft" and provisional.detail == {"step": "draft"}
    assert event_types(store)[-2:] == ["step_finished", "provisional_result"]
    assert services.artifacts.get_json(job.provisional_key or "")["answer"] == "drafted"


def test_only_a_plain_step_may_be_provisional() -> None:
    from longhaul.engine.spec import fan_out

    with pytest.raises(ValueError, match="provisional"):
        fan_out("items", over="a.list", provisional=True)


def _draft_result() -> Any:
    from longhaul.core.contracts import JobResult

    return JobResult(
        job_id=JOB_ID,
        question="q?",
        answer="drafted",
        claims=[],
        citations=[],
        verification=None,
        model="m",
        documents=[],
    )
