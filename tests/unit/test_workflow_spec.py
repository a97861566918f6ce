"""Workflow specs and the registry (`longhaul.workflows`): a spec rejects what cannot be built (repeated names, a
fan-out over something that is not an earlier step), the registry derives its step sets from the specs, and the job
request is a union on `workflow` in which each workflow's own request validates and an unknown workflow does not."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from longhaul.engine.spec import StepSpec, fan_out, step
from longhaul.workflows import JOB_REQUEST, REGISTRY, Registry, StepKind, WorkflowSpec

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


class Nothing(BaseModel):
    pass


def spec(*steps: StepSpec, name: str = "test-flow") -> WorkflowSpec:
    return WorkflowSpec(
        name=name,
        description="a test workflow",
        input_model=Nothing,
        result_model=Nothing,
        steps=steps,
        domain="tests.unit.test_workflow_spec",
    )


def samples() -> dict[str, dict[str, Any]]:
    """The sample requests by workflow (`samples/*.json` with a `workflow` field)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(SAMPLES.glob("*.json")):
        body = json.loads(path.read_text())
        if isinstance(body, dict) and "workflow" in body:
            found[body["workflow"]] = body
    return found


# ---------------------------------------------------------------------- spec validation


def test_a_valid_spec_lists_its_steps_in_order() -> None:
    flow = spec(step("split"), fan_out("read", over="split.parts", item_unit="part"), step("merge", calls_model=True))

    assert flow.step_names == ("split", "read", "merge")
    assert flow.fan_out_steps == frozenset({"read"})
    assert flow.model_steps == ("merge",)
    assert flow.last_step == "merge"
    assert flow.step("read").kind == StepKind.FAN_OUT and flow.step("read").item_unit == "part"


def test_repeated_step_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="repeat"):
        spec(step("split"), step("merge"), step("split"))


@pytest.mark.parametrize(
    "steps",
    [
        (fan_out("read", over="split.parts"), step("split")),  # a later step
        (step("split"), fan_out("read", over="read.parts")),  # itself
        (step("split"), fan_out("read", over="nowhere.parts")),  # no such step
    ],
    ids=["later-step", "itself", "unknown-step"],
)
def test_a_fan_out_must_name_an_earlier_step(steps: tuple[StepSpec, ...]) -> None:
    with pytest.raises(ValueError, match="not an earlier step"):
        spec(*steps)


def test_only_a_fan_out_names_what_it_fans_out_over() -> None:
    with pytest.raises(ValueError, match="only a fan-out"):
        StepSpec("split", over="x.y")
    with pytest.raises(ValueError, match="only a fan-out"):
        StepSpec("read", kind=StepKind.FAN_OUT)


def test_an_unknown_step_is_a_key_error_naming_the_steps() -> None:
    with pytest.raises(KeyError, match="split"):
        spec(step("split")).step("merge")
    with pytest.raises(KeyError):
        spec(step("split")).work("merge")


# ---------------------------------------------------------------------- registry


def test_the_registry_holds_each_spec_under_its_name() -> None:
    assert len(REGISTRY) >= 1
    for name, registered in REGISTRY.items():
        assert registered.name == name
        assert registered.steps, f"{name} has no steps"


def test_the_registry_derives_its_step_sets_from_the_specs() -> None:
    a = spec(step("split"), fan_out("read", over="split.parts"), name="flow-a")
    b = spec(step("split"), step("sum"), name="flow-b")
    registry = Registry(a, b)

    assert list(registry) == ["flow-a", "flow-b"]
    assert registry["flow-b"] is b
    assert registry.all_steps == frozenset({"split", "read", "sum"})
    assert registry.all_fan_out_steps == frozenset({"read"})
    with pytest.raises(KeyError):
        registry["flow-c"]


def test_every_registered_step_has_its_domain_function_and_every_workflow_its_submission() -> None:
    for registered in REGISTRY.values():
        assert callable(registered.prepare())
        for name in registered.step_names:
            assert callable(registered.work(name)), f"{registered.name}.{name}"


def test_every_workflows_agents_call_registered_tools_that_exist() -> None:
    """A spec naming its tools by path is checked when they are first imported: here, for every installed one."""
    for registered in REGISTRY.values():
        for agent_step in registered.agent_steps:
            for tool in registered.tools_of(agent_step.name):
                assert callable(tool.function()), f"{registered.name}.{agent_step.name}: {tool.name}"


# ---------------------------------------------------------------------- the request union


def test_every_workflow_has_a_sample_request() -> None:
    assert set(samples()) >= set(REGISTRY)


@pytest.mark.parametrize("workflow", sorted(REGISTRY))
def test_each_workflows_request_validates_into_its_own_input_model(workflow: str) -> None:
    request = JOB_REQUEST.validate_python(samples()[workflow])

    assert request.workflow == workflow
    assert isinstance(request.input, REGISTRY[workflow].input_model)


def test_an_unknown_workflow_is_rejected() -> None:
    body = {**next(iter(samples().values())), "workflow": "no-such-workflow"}

    with pytest.raises(ValidationError) as raised:
        JOB_REQUEST.validate_python(body)

    [error] = raised.value.errors()
    # a union names the workflows it knows; a single workflow's request names its `workflow` literal
    assert error["type"] in ("union_tag_invalid", "literal_error")
    assert all(name in error["msg"] for name in REGISTRY)


@pytest.mark.skipif(len(REGISTRY) < 2, reason="needs two workflows")
def test_a_workflows_name_with_another_workflows_input_is_rejected() -> None:
    first, second = sorted(REGISTRY)[:2]
    body = {**samples()[first], "workflow": second}

    with pytest.raises(ValidationError):
        JOB_REQUEST.validate_python(body)


def test_the_result_bodies_are_built_once_however_many_requests_ask_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Built on first use (the API's import does not import a workflow's result model); the OpenAPI document and the
    result route must name the very same classes."""
    import longhaul.workflows as workflows

    monkeypatch.setattr(workflows, "_results", {})
    with ThreadPoolExecutor(8) as pool:
        seen = list(pool.map(lambda _: workflows.result_models(), range(16)))

    assert all(models is seen[0] for models in seen)
    assert set(seen[0]) == set(REGISTRY)
    for name, model in seen[0].items():
        assert issubclass(model, REGISTRY[name].result_type) and "budget" in model.model_fields
