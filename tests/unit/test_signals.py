"""Signals and segments in the spec, and a signal's way in: refusals (unknown name, wrong body, kept already, a
finished job), an early signal kept and consumed once by its step, the wait's timeout (on moto's DynamoDB and S3)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from longhaul import services as wiring
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import SignalTimedOut, kind_of
from longhaul.core.step_events import StepEvent
from longhaul.engine import signals
from longhaul.engine.context import StepContext
from longhaul.engine.spec import Registry, WorkflowSpec, review, segment, signal, step
from longhaul.workflows.document_analysis.spec import SPEC as DOCUMENT_ANALYSIS
from tests.unit.test_job_store import events_of, new_job
from tests.unit.test_pause import Tokens

S = JobStatus


class Prices(BaseModel):
    currency: str
    prices: dict[str, float]


class Empty(BaseModel):
    pass


def _spec(**options: Any) -> WorkflowSpec:
    return WorkflowSpec(
        name="document-analysis",  # the jobs the store's helpers make are of this workflow
        description="test",
        input_model=Empty,
        result_model=Empty,
        domain="tests.unit.test_signals",
        steps=(step("a"), signal("price_list", model=Prices, timeout_seconds=30), step("b")),
        **options,
    )


@pytest.fixture
def steered(services: wiring.Services, monkeypatch: pytest.MonkeyPatch) -> wiring.Services:
    monkeypatch.setattr(signals, "registry", lambda: Registry(_spec()))
    services.jobs.create_job(new_job())
    services.jobs.transition("job_1", S.RUNNING, event="job_started")
    return dataclasses.replace(services, tokens=Tokens())


def _job(services: wiring.Services) -> Any:
    return services.jobs.get_job("job_1")


def _ctx(services: wiring.Services) -> StepContext:
    event = StepEvent.model_validate(
        {
            "step": "price_list",
            "input": {"job_id": "job_1", "tenant_id": "tenant-a", "workflow": "document-analysis", "input_key": "k"},
        }
    )
    return StepContext(event, services)


# ---------------------------------------------------------------------- the spec


def test_a_segment_bounds_consecutive_existing_steps_without_overlap() -> None:
    with pytest.raises(ValueError, match="unknown steps"):
        _spec(segments=(segment("s", steps=("a", "zzz"), timeout_seconds=5),))
    with pytest.raises(ValueError, match="not consecutive"):
        _spec(segments=(segment("s", steps=("a", "b"), timeout_seconds=5),))
    with pytest.raises(ValueError, match="overlaps"):
        _spec(
            segments=(
                segment("s", steps=("a", "price_list"), timeout_seconds=5),
                segment("t", steps=("price_list", "b"), timeout_seconds=5),
            )
        )
    with pytest.raises(ValueError, match="no review follows"):
        _spec(segments=(segment("s", steps=("a",), timeout_seconds=5, on_timeout="review"),))
    with pytest.raises(ValueError, match="positive"):
        segment("s", steps=("a",), timeout_seconds=0)
    ok = _spec(segments=(segment("s", steps=("a", "price_list"), timeout_seconds=5),))
    assert ok.segment_of("price_list") is not None and ok.segment_of("b") is None


def test_a_segment_may_hand_over_to_a_later_review() -> None:
    spec = WorkflowSpec(
        name="w",
        description="test",
        input_model=Empty,
        result_model=Empty,
        domain="tests.unit.test_signals",
        steps=(step("a"), review("r", policy=DOCUMENT_ANALYSIS.review_step.review), step("b")),  # type: ignore[union-attr]
        segments=(segment("s", steps=("a",), timeout_seconds=5, on_timeout="review"),),
    )
    assert spec.segments[0].on_timeout == "review"


def test_a_segments_bound_comes_from_its_setting_when_set() -> None:
    (ocr,) = DOCUMENT_ANALYSIS.segments
    assert ocr.steps == ("plan_ocr", "ocr_pages", "build_index")
    assert ocr.bound({}) == 1200
    assert ocr.bound({"LONGHAUL_OCR_INDEX_SEGMENT_SECONDS": "7"}) == 7


def test_a_signal_step_needs_its_policy_and_times_out_as_kind_timeout() -> None:
    assert _spec().signal_steps[0].signal is not None
    assert kind_of("SignalTimedOut") == kind_of("SegmentTimedOut") == "timeout"


# ---------------------------------------------------------------------- the API's side


def test_a_signal_the_workflow_does_not_have_is_unknown(steered: wiring.Services) -> None:
    with pytest.raises(signals.UnknownSignal):
        signals.send(steered, _job(steered), "nope", {}, requested_by="tenant-a")


def test_a_wrong_body_is_refused_with_its_errors_and_nothing_kept(steered: wiring.Services) -> None:
    with pytest.raises(signals.InvalidSignal) as refused:
        signals.send(steered, _job(steered), "price_list", {"currency": 3}, requested_by="tenant-a")
    assert {tuple(e["loc"]) for e in refused.value.errors} >= {("body", "prices")}
    assert steered.jobs.signal("job_1", "price_list") is None


def test_an_early_signal_is_kept_then_consumed_once(steered: wiring.Services, table: Any) -> None:
    body = {"currency": "EUR", "prices": {"A-1": 9.5}}
    accepted = signals.send(steered, _job(steered), "price_list", body, requested_by="tenant-a")
    assert accepted.early and accepted.status == S.RUNNING
    with pytest.raises(signals.SignalRefused):  # a second one: 409
        signals.send(steered, _job(steered), "price_list", body, requested_by="tenant-a")
    received = [e for e in events_of(table, "job_1") if e["type"] == "signal_received"]
    assert len(received) == 1 and received[0]["detail"] == {"name": "price_list", "early": True}
    output = signals.arrive(_ctx(steered))  # the step arrives: no wait
    assert output["next"] == "done" and output["received"] and output["early"]
    ctx = _ctx(steered)
    ctx.event.input.steps["price_list"] = output
    assert ctx.signal("price_list", Prices) == Prices(**body)
    assert steered.jobs.signal("job_1", "price_list")["status"] == "consumed"  # type: ignore[index]


def test_a_signal_to_a_waiting_step_resumes_its_wait(steered: wiring.Services) -> None:
    opened = signals.arrive(_ctx(steered))
    assert opened["next"] == "wait" and opened["wait_seconds"] == 30 and opened["until"]
    waiting = _job(steered).wait_state
    assert waiting.reason == "signal" and waiting.until is not None and waiting.step == "price_list"
    signals.wait({"action": "signal", "step": "price_list", "job_id": "job_1", "token": "tok"}, steered)
    accepted = signals.send(steered, _job(steered), "price_list", {"currency": "EUR", "prices": {}}, requested_by="t")
    assert not accepted.early and steered.tokens.succeeded == ["tok"]  # type: ignore[union-attr]


def test_a_finished_job_takes_no_signal(steered: wiring.Services) -> None:
    steered.jobs.transition("job_1", S.CANCEL_REQUESTED, event="cancel_requested")
    with pytest.raises(signals.SignalRefused):
        signals.send(steered, _job(steered), "price_list", {"currency": "EUR", "prices": {}}, requested_by="t")


def test_a_wait_that_times_out_proceeds_and_refuses_a_late_signal(steered: wiring.Services, table: Any) -> None:
    event = {"action": "signal_timeout", "step": "price_list", "job_id": "job_1", "seconds": 30}
    assert signals.timed_out(event, steered) == {"timed_out": True}
    assert signals.arrive(_ctx(steered)) | {} == signals.SignalOutput(signal="price_list", timed_out=True).model_dump()
    (timed,) = [e for e in events_of(table, "job_1") if e["type"] == "signal_timed_out"]
    assert timed["detail"]["timeout_seconds"] == 30
    with pytest.raises(signals.SignalRefused) as refused:
        signals.send(steered, _job(steered), "price_list", {"currency": "EUR", "prices": {}}, requested_by="t")
    assert refused.value.extra == {"signal_status": "timed_out"}


def test_a_wait_that_must_not_time_out_fails(steered: wiring.Services, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = _spec()
    policy = failing.step("price_list").signal
    assert policy is not None
    strict = dataclasses.replace(failing.step("price_list"), signal=policy._replace(on_timeout="fail"))
    spec = dataclasses.replace(failing, steps=(failing.step("a"), strict, failing.step("b")))
    monkeypatch.setattr(signals, "registry", lambda: Registry(spec))
    with pytest.raises(SignalTimedOut, match="price_list"):
        signals.timed_out({"action": "signal_timeout", "step": "price_list", "job_id": "job_1"}, steered)


def a(ctx: Any) -> dict[str, Any]:  # the test workflow's domain functions (never run here)
    return {}


b = a
