"""Each deploy publishes versions, and a job runs to its end on the one it started on: every Task of a workflow
invokes a version of its function, each workflow's machine has this deploy's version and a `live` alias routing to
it, jobs start through the alias, and whatever an older execution still needs survives the next deploy (its Lambda
versions, its state machine version, its task definition revision, the right to invoke them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from longhaul.core.settings import Env
from longhaul.workflows import REGISTRY
from state_machines.builder import LIVE_ALIAS
from tests.infrastructure.conftest import all_states, definition, resources

RETAINED = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}


@pytest.fixture(scope="module")
def prod(bedrock_assembly: Path) -> dict[str, Any]:
    return json.loads(next(bedrock_assembly.glob("Longhaul-prod.template.json")).read_text())


def _workflow_machines(template: dict[str, Any]) -> dict[str, str]:
    """{workflow: the logical id of its state machine}."""
    found = {}
    for logical_id, machine in resources(template, "AWS::StepFunctions::StateMachine").items():
        comment = definition(machine).get("Comment", "")
        if comment.startswith("Longhaul workflow "):
            found[comment.removeprefix("Longhaul workflow ")] = logical_id
    return found


def _lambda_tasks(machine: dict[str, Any]) -> list[tuple[str, str]]:
    """(state name, the `@<logical id>` it invokes) of every Lambda Task (not the ECS or SQS integrations)."""
    return [
        (name, state["Resource"])
        for name, state, _ in all_states(definition(machine)["States"])
        if state["Type"] == "Task" and state["Resource"].startswith("@")
    ]


def _versions_of(template: dict[str, Any], kind: str, target: str, key: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: version
        for logical_id, version in resources(template, kind).items()
        if version["Properties"][key] == {"Ref": target}
    }


def test_every_task_of_a_workflow_invokes_a_retained_version_of_its_function(template: dict[str, Any]) -> None:
    functions = resources(template, "AWS::Lambda::Function")
    versions = resources(template, "AWS::Lambda::Version")
    for workflow, machine_id in _workflow_machines(template).items():
        tasks = _lambda_tasks(template["Resources"][machine_id])
        assert tasks, workflow
        for name, target in tasks:
            version = versions.get(target.lstrip("@"))
            assert version is not None, f"{workflow}: {name} invokes {target}, not a version of a function"
            assert version["Properties"]["FunctionName"]["Ref"] in functions
            assert {k: version.get(k) for k in RETAINED} == RETAINED, f"{workflow}: {name}'s version is not retained"


def test_each_workflow_has_this_deploys_version_retained_and_a_live_alias_routing_every_job_to_it(
    template: dict[str, Any],
) -> None:
    for workflow, machine_id in _workflow_machines(template).items():
        (version_id, version), *others = _versions_of(
            template, "AWS::StepFunctions::StateMachineVersion", machine_id, "StateMachineArn"
        ).items()
        assert not others, f"{workflow}: one version per deploy"
        assert {k: version.get(k) for k in RETAINED} == RETAINED, workflow
        aliases = [
            a
            for a in resources(template, "AWS::StepFunctions::StateMachineAlias").values()
            if version_id in json.dumps(a["Properties"]["RoutingConfiguration"])
        ]
        assert [a["Properties"]["Name"] for a in aliases] == [LIVE_ALIAS], workflow
        assert aliases[0]["Properties"]["RoutingConfiguration"] == [
            {"StateMachineVersionArn": {"Fn::GetAtt": [version_id, "Arn"]}, "Weight": 100}
        ]


def test_jobs_start_through_each_workflows_alias(template: dict[str, Any]) -> None:
    aliases = {
        a["Properties"]["RoutingConfiguration"][0]["StateMachineVersionArn"]["Fn::GetAtt"][0]: logical_id
        for logical_id, a in resources(template, "AWS::StepFunctions::StateMachineAlias").items()
    }
    starters = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") in ("handlers.api.handler", "handlers.admission.dispatch")
    ]
    assert len(starters) == 3  # the API's two functions (tenants' submissions, operators' replays), the dispatcher
    expected = {
        workflow: "@" + aliases[version_id]
        for workflow, machine_id in _workflow_machines(template).items()
        for version_id in _versions_of(
            template, "AWS::StepFunctions::StateMachineVersion", machine_id, "StateMachineArn"
        )
    }
    for function in starters:
        parts = function["Properties"]["Environment"]["Variables"][Env.WORKFLOWS]["Fn::Join"][1]
        rendered = "".join(p if isinstance(p, str) else "@" + p["Fn::GetAtt"][0] for p in parts)
        assert json.loads(rendered) == expected


def test_a_machine_may_invoke_every_version_of_its_functions_so_older_executions_survive_a_deploy(
    template: dict[str, Any],
) -> None:
    policies = resources(template, "AWS::IAM::Policy")
    for workflow, machine_id in _workflow_machines(template).items():
        machine = template["Resources"][machine_id]
        role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        statements = [
            s
            for p in policies.values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Action"] == "lambda:InvokeFunction"
        ]
        granted = json.dumps(statements)
        for _, target in _lambda_tasks(machine):
            function = template["Resources"][target.lstrip("@")]["Properties"]["FunctionName"]["Ref"]
            every_version = {"Fn::Join": ["", [{"Fn::GetAtt": [function, "Arn"]}, ":*"]]}
            assert json.dumps(every_version) in granted, f"{workflow}: {function}'s older versions"


def test_a_container_tasks_definition_revision_is_retained_for_the_executions_that_name_it(
    template: dict[str, Any],
) -> None:
    for logical_id, task in resources(template, "AWS::ECS::TaskDefinition").items():
        assert {k: task.get(k) for k in RETAINED} == RETAINED, logical_id


def test_a_deploy_that_changes_the_functions_publishes_new_versions_and_moves_the_alias(
    template: dict[str, Any], prod: dict[str, Any]
) -> None:
    """Another configuration (here: the Bedrock model instead of the offline one) is another deploy: each function's
    version and each machine's version get new logical ids (CloudFormation creates them, after the function or
    machine they publish; the previous ones leave the template and stay), the alias keeps its own (updated in place)."""
    for kind in ("AWS::Lambda::Version", "AWS::StepFunctions::StateMachineVersion"):
        assert not set(resources(template, kind)) & set(resources(prod, kind)), kind
    assert set(resources(template, "AWS::StepFunctions::StateMachineAlias")) == set(
        resources(prod, "AWS::StepFunctions::StateMachineAlias")
    )
    assert len(resources(template, "AWS::StepFunctions::StateMachineVersion")) == len(REGISTRY)


def test_every_checkpoint_knows_the_code_version_it_was_written_by(template: dict[str, Any]) -> None:
    code_versions = {
        f["Properties"]["Environment"]["Variables"].get(Env.CODE_VERSION)
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler", "").startswith("handlers.")
    }
    (code_version,) = code_versions
    assert isinstance(code_version, str) and len(code_version) == 16
    for task in resources(template, "AWS::ECS::TaskDefinition").values():
        (container,) = task["Properties"]["ContainerDefinitions"]
        assert {"Name": Env.CODE_VERSION, "Value": code_version} in container["Environment"]
