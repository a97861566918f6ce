"""The house step policy holds for every Task of every state machine in the synthesized template."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.errors import DETERMINISTIC_ERROR_NAMES, RETRYABLE_ERROR_NAMES
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import all_states, definition, resources


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The workflows' state machines (the webhook delivery's has its own tests)."""
    found = resources(template, "AWS::StepFunctions::StateMachine")
    assert found, "the template has no state machine"
    asl = {logical_id: definition(m) for logical_id, m in found.items()}
    return {k: v for k, v in asl.items() if v["Comment"].startswith("Longhaul workflow ")}


@pytest.fixture(scope="module")
def lambda_timeouts(template: dict[str, Any]) -> dict[str, int]:
    return {k: v["Properties"]["Timeout"] for k, v in resources(template, "AWS::Lambda::Function").items()}


def step_tasks(machine: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Tasks that run a workflow step (not the failure path: recorder and dead-letter send)."""
    return [
        (name, state, scope)
        for name, state, scope in all_states(machine["States"])
        if state["Type"] == "Task" and ":" not in name
    ]


def test_every_step_task_has_a_timeout_not_below_its_lambda_timeout(machines, lambda_timeouts):
    for machine in machines.values():
        tasks = step_tasks(machine)
        spec = REGISTRY[machine["Comment"].removeprefix("Longhaul workflow ")]
        assert len(tasks) == len(spec.steps)  # one Task per step; a fan-out's is inside its Map
        for name, state, _ in tasks:
            assert state.get("TimeoutSeconds"), f"{name} has no TimeoutSeconds"
            if state["Resource"].startswith("arn:aws:states:::ecs:runTask"):  # a container step: its own bounds
                step_spec = spec.step(name.removesuffix(" item"))
                assert state["TimeoutSeconds"] >= (step_spec.timeout_seconds or 0), name
                assert 0 < state["HeartbeatSeconds"] < state["TimeoutSeconds"], f"{name}: nothing waits forever"
                continue
            function = state["Resource"].lstrip("@")
            assert state["TimeoutSeconds"] >= lambda_timeouts[function], name


def test_every_task_retries_transient_errors_with_full_jitter_and_a_max_delay(machines):
    for machine in machines.values():
        for name, state, _ in all_states(machine["States"]):
            if state["Type"] != "Task":
                continue
            retries = state.get("Retry", [])
            transient = [r for r in retries if set(RETRYABLE_ERROR_NAMES) <= set(r["ErrorEquals"])]
            assert transient, f"{name} does not retry the transient classes"
            for retry in retries:
                assert retry["JitterStrategy"] == "FULL", name
                assert retry["MaxDelaySeconds"] > 0, name
                assert retry["BackoffRate"] > 1, name
                assert not set(DETERMINISTIC_ERROR_NAMES) & set(retry["ErrorEquals"]), (
                    f"{name} retries a deterministic error"
                )
                assert "States.ALL" not in retry["ErrorEquals"], name


def test_a_recurring_timeout_is_retried_at_most_once(machines):
    for machine in machines.values():
        for name, state, _ in step_tasks(machine):
            timeouts = [r for r in state["Retry"] if "States.Timeout" in r["ErrorEquals"]]
            assert timeouts and all(r["MaxAttempts"] <= 1 for r in timeouts), name


def test_every_step_catches_all_into_record_failure_then_its_own_dead_letter_queue(machines, template):
    queues = resources(template, "AWS::SQS::Queue")
    for machine in machines.values():
        dlq_by_step: dict[str, str] = {}
        for name, state, scope in step_tasks(machine):
            step = name.removesuffix(" item")
            catch_all = [c for c in state.get("Catch", []) if c["ErrorEquals"] == ["States.ALL"]]
            assert catch_all, f"{name} has no catch-all"
            record = scope[catch_all[0]["Next"]]
            assert record["Type"] == "Task" and record["Parameters"]["step"] == step, name
            send = scope[record["Next"]]
            assert send["Resource"].endswith(":states:::sqs:sendMessage")
            queue_url = send["Parameters"]["QueueUrl"].lstrip("@")
            assert queue_url in queues, f"{name} dead letters go to an unknown queue"
            assert dlq_by_step.setdefault(step, queue_url) == queue_url
            end = scope[send["Next"]]
            assert end["Type"] == "Fail" or (name.endswith(" item") and end["Type"] == "Pass"), name
        assert len(set(dlq_by_step.values())) == len(dlq_by_step), "steps share a dead-letter queue"


def test_dead_letter_queues_are_encrypted_and_alarmed(template):
    queues = resources(template, "AWS::SQS::Queue")
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    alarmed = {
        d["Value"]["Fn::GetAtt"][0]
        for a in alarms.values()
        for d in a["Properties"].get("Dimensions", [])
        if d["Name"] == "QueueName"
    }
    for logical_id, queue in queues.items():
        assert queue["Properties"].get("SqsManagedSseEnabled") or queue["Properties"].get("KmsMasterKeyId"), logical_id
        assert logical_id in alarmed, f"{logical_id} has no alarm"


def test_state_machines_are_standard_with_full_logging_and_tracing(template):
    for logical_id, machine in resources(template, "AWS::StepFunctions::StateMachine").items():
        props = machine["Properties"]
        assert props.get("StateMachineType", "STANDARD") == "STANDARD", logical_id
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        assert props["TracingConfiguration"]["Enabled"] is True


def test_only_references_travel_between_states(machines):
    """Step outputs land under $.steps.<name>; Map items get an index, a reference and the (small) state."""
    for machine in machines.values():
        for name, state, _ in step_tasks(machine):
            if name.endswith(" item"):
                # A container task's worker answers with its step output (references only); it is dropped next
                assert state["ResultPath"] is None or state["Resource"].startswith("arn:aws:states:::ecs:")
            else:
                assert state["ResultPath"] == f"$.steps.{name}"
        maps = [s for _, s, _ in all_states(machine["States"]) if s["Type"] == "Map"]
        for fan_out in maps:
            assert set(fan_out["ItemSelector"]) == {"item.$", "ref.$", "input.$"}
            assert fan_out["ResultPath"].startswith("$.fanout."), "a fan-out keeps only one boolean per item"
            assert fan_out.get("MaxConcurrency", 0) > 0
            ends = [s for s in fan_out["ItemProcessor"]["States"].values() if s.get("End")]
            assert all(s["Type"] == "Fail" or isinstance(s.get("Result"), bool) for s in ends)


def test_a_fan_out_fails_the_job_once_after_all_items_ran(machines):
    """Failed items do not stop the others; a Choice after the Map fails the job without another dead letter."""
    for machine in machines.values():
        states = machine["States"]
        for _name, state, _ in all_states(states):
            if state["Type"] != "Map":
                continue
            tally = states[state["Next"]]
            assert "States.ArrayContains" in json.dumps(tally["Parameters"])
            verdict = states[tally["Next"]]
            assert verdict["Type"] == "Choice"
            record = states[verdict["Choices"][0]["Next"]]
            assert record["Parameters"]["error"] == "ItemsFailed"
            assert states[record["Next"]]["Type"] == "Fail", "the summary must not send a second dead letter"
