"""The web console in the synthesized template: API Gateway routes `/console` and every path under it to the API
function, which may read the definition a job's execution runs; each workflow's definition draws as a graph whose
main path holds every step of its spec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.api.graph import derive, parse_definition
from longhaul.core.contracts import JobStatus
from longhaul.core.ports import ExecutionStatus
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import definition, resources, workflow_level
from tests.infrastructure.test_admission import actions, statements_of


def _api_function(template: dict[str, Any]) -> dict[str, Any]:
    """The tenants' and reviewers' API function (the operators' routes run the same handler in a function of their
    own, `ApiOpsHandler…`)."""
    (found,) = [
        f
        for logical_id, f in resources(template, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") == "handlers.api.handler" and logical_id.startswith("ApiHandler")
    ]
    return found


def test_the_console_and_every_path_under_it_reach_the_api_function(template: dict[str, Any]) -> None:
    api_resources = resources(template, "AWS::ApiGateway::Resource")
    by_id = {k: v["Properties"]["PathPart"] for k, v in api_resources.items()}
    console = next(k for k, part in by_id.items() if part == "console")
    (proxy,) = [
        k
        for k, v in api_resources.items()
        if v["Properties"]["PathPart"] == "{proxy+}" and v["Properties"]["ParentId"] == {"Ref": console}
    ]
    methods = [m["Properties"] for m in resources(template, "AWS::ApiGateway::Method").values()]
    served = {m["ResourceId"]["Ref"] for m in methods if m["HttpMethod"] == "GET" and "Ref" in m["ResourceId"]}

    assert {console, proxy} <= served
    for method in methods:
        if method["ResourceId"] in ({"Ref": console}, {"Ref": proxy}):
            assert method["Integration"]["Type"] == "AWS_PROXY"
            assert method["AuthorizationType"] == "NONE"  # the page asks for a key; the API checks it


def test_the_api_function_may_read_the_definition_a_jobs_execution_runs(template: dict[str, Any]) -> None:
    granted = {a for s in statements_of(template, _api_function(template)) for a in actions(s)}

    assert {"states:DescribeStateMachineForExecution", "states:DescribeStateMachine"} <= granted
    assert "states:GetExecutionHistory" in granted


@pytest.mark.parametrize("workflow", sorted(REGISTRY))
def test_a_workflows_graph_holds_every_step_on_its_main_path(template: dict[str, Any], workflow: str) -> None:
    machines = [definition(m) for m in resources(template, "AWS::StepFunctions::StateMachine").values()]
    (asl,) = [m for m in machines if m.get("Comment") == f"Longhaul workflow {workflow}"]
    spec = REGISTRY[workflow]

    nodes, edges = derive(
        parse_definition(json.dumps(asl)),
        [],
        steps=spec.step_names,
        execution_status=ExecutionStatus.NOT_STARTED,
        job_status=JobStatus.QUEUED,
        segments=tuple(g.name for g in spec.segments),
    )

    by_name = {n.name: n for n in nodes}
    assert set(by_name) == set(workflow_level(asl["States"])) and all(n.status == "pending" for n in nodes)
    for step in spec.step_names:  # a segment's steps too: inside its Parallel, on the main path
        assert by_name[step].type in ("Task", "Map") and not by_name[step].failure_path, step
    assert all(n.step is not None for n in nodes if n.type in ("Task", "Map")), "a Task or Map of no step"
    for segment in spec.segments:
        parallel = f"segment {segment.name}"
        assert by_name[parallel].type == "Parallel" and not by_name[parallel].failure_path
        assert {(e.source, e.target) for e in edges} >= {
            (parallel, segment.steps[0]),
            (parallel, f"{segment.name}: timer"),
        }
        assert (
            by_name[f"{segment.name}: timer"].step == segment.name and by_name[f"{segment.name}: timer"].waits_for_token
        )
    assert {e.kind for e in edges} >= {"next", "choice", "default", "catch"}
