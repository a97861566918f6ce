"""Each workflow's state machine visits its spec's steps in the spec's order, and the builder refuses a definition
that skips, reorders or mis-kinds a step.

The walk follows the success path of the synthesized ASL: from `StartAt` along `Next` (at a Choice: a fan-out's Map,
a step it may skip, else its `Default`), never into a Catch; a Task counts as the step its payload names, a Map as
the step its item processor runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from pydantic import BaseModel

from longhaul.engine.spec import fan_out, step
from longhaul.workflows import REGISTRY, WorkflowSpec
from state_machines.builder import WorkflowBuilder
from tests.infrastructure.conftest import definition, payload_step, resources, workflow_level


def state_step(state: dict[str, Any]) -> str | None:
    """The spec step a state runs: a Task's payload `step`; a Map's, the one step its item processor runs (a
    Distributed Map's, the one its batches' Map runs); none for a Map that runs no step (a failed group's dead
    letters)."""
    processor = state.get("ItemProcessor") or state.get("Iterator")
    if state.get("Type") == "Map" and processor:
        steps = {state_step(s) for s in processor["States"].values()} - {None}
        assert len(steps) <= 1, f"a Map runs one step's items, this one {steps}"
        if not steps:
            return None
        return steps.pop()
    parameters = state.get("Parameters") or {}
    if "action" in parameters.get("Payload", parameters):  # the steer lane's Task (a segment's end): no step
        return None
    return payload_step(state)


def visited_steps(asl: dict[str, Any]) -> list[str]:
    """The steps on the success path, in order."""
    states, name, seen, visited = asl["States"], asl["StartAt"], set(), []
    while name is not None:
        assert name not in seen, f"the success path loops at {name!r}"
        seen.add(name)
        state = states[name]
        step_name = state_step(state)
        # a Distributed Map's tally names its step too: one visit
        if step_name is not None and visited[-1:] != [step_name]:
            visited.append(step_name)
        if state["Type"] == "Parallel":  # a segment: its steps are its first branch (the second is its timer)
            for inner in visited_steps(state["Branches"][0]):
                if visited[-1:] != [inner]:
                    visited.append(inner)
        if state["Type"] == "Choice":
            # a fan-out's count Choice takes the first Map; a Choice that may skip a step (a review not asked for)
            # takes the step (a Task named as the step it runs); others their Default
            nexts = [c["Next"] for c in state.get("Choices", [])]
            maps = [n for n in nexts if states[n]["Type"] == "Map"]
            runs = [n for n in nexts if states[n]["Type"] == "Task" and state_step(states[n]) == n and n not in seen]
            name = (maps or runs or [state.get("Default")])[0]
        else:
            name = state.get("Next")
    return visited


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ASL of each workflow's state machine, by workflow (the builder names it in the definition's comment)."""
    by_workflow = {}
    for machine in resources(template, "AWS::StepFunctions::StateMachine").values():
        asl = definition(machine)
        if asl["Comment"].startswith("Longhaul workflow "):  # not the webhook delivery
            by_workflow[asl["Comment"].removeprefix("Longhaul workflow ")] = asl
    return by_workflow


def test_every_workflow_has_one_state_machine(machines: dict[str, dict[str, Any]]) -> None:
    assert sorted(machines) == sorted(REGISTRY)


@pytest.mark.parametrize("workflow", sorted(REGISTRY))
def test_the_state_machine_visits_the_specs_steps_in_order(machines: dict[str, dict[str, Any]], workflow: str) -> None:
    assert visited_steps(machines[workflow]) == list(REGISTRY[workflow].step_names)


@pytest.mark.parametrize("workflow", sorted(REGISTRY))
def test_fan_out_steps_are_maps_over_their_specs_source(machines: dict[str, dict[str, Any]], workflow: str) -> None:
    spec = REGISTRY[workflow]
    states = workflow_level(machines[workflow]["States"])
    maps = {state_step(s): s for s in states.values() if s["Type"] == "Map" and state_step(s)}
    assert set(maps) == set(spec.fan_out_steps)
    for state in states.values():
        name = state_step(state) if state["Type"] == "Map" else None
        if name is None:
            continue
        over = f"$.steps.{spec.step(name).over}"
        if "ItemReader" in state:  # the Distributed Map reads the list's manifest
            assert state["ItemReader"]["Parameters"]["Key.$"] == f"{over}.manifest_key"
        else:  # the inline Map runs over the list's items, a grouped step's over its groups of items
            assert state["ItemsPath"] == f"{over}.{'groups' if spec.step(name).grouped else 'items'}"


# ---------------------------------------------------------------------- the builder's own check


class Empty(BaseModel):
    pass


TEST_SPEC = WorkflowSpec(
    name="order-check",
    description="a test workflow",
    input_model=Empty,
    result_model=Empty,
    steps=(step("split"), fan_out("read", over="split.parts"), step("merge"), step("publish")),
    domain="tests.infrastructure.test_workflow_order",
)

Define = Callable[[WorkflowBuilder], sfn.IChainable]


def build(define: Define) -> dict[str, Any]:
    """Build TEST_SPEC's state machine from `define(builder)` in a tiny app; the synthesized ASL."""
    app = cdk.App()
    stack = cdk.Stack(app, "OrderCheck")

    def make_function(construct_id: str, handler: str, timeout: int, memory: int) -> lambda_.IFunction:
        return lambda_.Function(
            stack,
            f"fn-{construct_id}",
            runtime=lambda_.Runtime.PYTHON_3_11,
            handler="index.handler",
            code=lambda_.Code.from_inline("def handler(event, context):\n    return event\n"),
            timeout=cdk.Duration.seconds(timeout),
            memory_size=memory,
        )

    builder = WorkflowBuilder(
        stack, "Flow", spec=TEST_SPEC, make_function=make_function, artifacts=s3.Bucket(stack, "Artifacts")
    )
    builder.state_machine(define(builder), timeout=cdk.Duration.hours(1))
    template = app.synth().get_stack_by_name("OrderCheck").template
    [machine] = resources(template, "AWS::StepFunctions::StateMachine").values()
    return definition(machine)


def in_order(b: WorkflowBuilder) -> sfn.IChainable:
    return b.step("split").next(b.fan_out("read")).next(b.step("merge")).next(b.step("publish"))


def test_a_definition_in_the_specs_order_builds_and_walks_as_the_spec() -> None:
    assert visited_steps(build(in_order)) == ["split", "read", "merge", "publish"]


@pytest.mark.parametrize(
    "define",
    [
        lambda b: b.step("split").next(b.fan_out("read")).next(b.step("publish")),
        lambda b: b.step("split").next(b.step("merge")).next(b.fan_out("read")).next(b.step("publish")),
        lambda b: b.step("split").next(b.fan_out("read")).next(b.step("merge")),
    ],
    ids=["skips-a-step", "reorders-steps", "stops-early"],
)
def test_the_builder_refuses_a_definition_that_is_not_the_specs_order(define: Define) -> None:
    with pytest.raises(ValueError, match="visits"):
        build(define)


def test_the_builder_refuses_a_step_chained_as_the_wrong_kind() -> None:
    with pytest.raises(ValueError, match="fan-out"):
        build(lambda b: b.step("split").next(b.step("read")).next(b.step("merge")).next(b.step("publish")))


def test_the_builder_refuses_a_step_the_spec_does_not_have() -> None:
    with pytest.raises(KeyError, match="no step"):
        build(lambda b: b.step("split").next(b.step("shuffle")))
