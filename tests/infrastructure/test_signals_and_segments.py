"""Signal steps and segments in the synthesized state machines: a signal's wait is bounded by the job's own wait and
its timeout is caught into a record that returns to the step; every declared segment is a Parallel whose timer
branch fails `SegmentTimedOut` at the segment's bound and is resumed by the segment's end."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.core.errors import SegmentTimedOut
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import definition, resources, workflow_level

WAIT_ENDED = {"States.Timeout", "States.HeartbeatTimeout"}


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for machine in resources(template, "AWS::StepFunctions::StateMachine").values():
        asl = definition(machine)
        if str(asl.get("Comment", "")).startswith("Longhaul workflow "):
            found[asl["Comment"].removeprefix("Longhaul workflow ")] = asl
    return found


def _payload(state: dict[str, Any]) -> dict[str, Any]:
    parameters = state.get("Parameters") or {}
    return dict(parameters.get("Payload", parameters))


def _catch(state: dict[str, Any], errors: set[str]) -> dict[str, Any]:
    (catcher,) = [c for c in state.get("Catch", []) if set(c["ErrorEquals"]) & errors]
    return dict(catcher)


def test_a_signal_steps_wait_is_the_jobs_own_and_its_timeout_returns_to_the_step(
    machines: dict[str, dict[str, Any]],
) -> None:
    checked = 0
    for workflow, asl in machines.items():
        states = workflow_level(asl["States"])
        for step in REGISTRY[workflow].signal_steps:
            name = step.name
            choice = states[states[name]["Next"]]
            assert choice["Type"] == "Choice"
            (rule,) = choice["Choices"]
            assert rule["Variable"] == f"$.steps.{name}.next" and rule["StringEquals"] == "wait"
            wait = states[rule["Next"]]
            assert wait["Type"] == "Task" and wait["Resource"].endswith(".waitForTaskToken")
            assert wait["TimeoutSecondsPath"] == f"$.steps.{name}.wait_seconds" and "TimeoutSeconds" not in wait
            assert _payload(wait)["action"] == "signal" and "token.$" in _payload(wait)
            assert wait["Next"] == name, "the signal came: the step consumes it"
            timed_out = states[_catch(wait, WAIT_ENDED)["Next"]]
            assert _payload(timed_out)["action"] == "signal_timeout" and timed_out["Next"] == name
            assert "TimeoutSeconds" in timed_out and timed_out.get("Catch"), "a house-policy Task"
            checked += 1
    assert checked >= 1, "invoice reconciliation waits for a late price list"


def test_every_segment_is_a_parallel_whose_timer_fails_it_and_whose_end_resumes_the_timer(
    machines: dict[str, dict[str, Any]],
) -> None:
    checked = 0
    for workflow, asl in machines.items():
        states = workflow_level(asl["States"])
        for segment in REGISTRY[workflow].segments:
            parallel = states[f"segment {segment.name}"]
            assert parallel["Type"] == "Parallel" and parallel["OutputPath"] == "$[0]"
            steps, timer_branch = parallel["Branches"]
            assert steps["StartAt"] == segment.steps[0]
            assert set(segment.steps) <= set(steps["States"]), "the segment's steps run in its first branch"
            (last,) = [s for s in steps["States"].values() if s.get("End") and s["Type"] == "Task"]
            assert _payload(last) == {**_payload(last), "action": "segment_end", "step": segment.name}
            timer = timer_branch["States"][timer_branch["StartAt"]]
            assert timer["Resource"].endswith(".waitForTaskToken") and timer["TimeoutSeconds"] == segment.bound({})
            assert _payload(timer)["action"] == "segment"
            ran_out = timer_branch["States"][_catch(timer, WAIT_ENDED)["Next"]]
            assert ran_out == {**ran_out, "Type": "Fail", "Error": SegmentTimedOut.__name__}
            recorded = states[_catch(parallel, {SegmentTimedOut.__name__})["Next"]]
            assert _payload(recorded)["action"] == "segment_timeout"
            if segment.on_timeout == "fail":
                assert states[recorded["Next"]]["Type"] == "Fail"
            checked += 1
    assert checked >= 1, "document analysis bounds OCR and indexing"
