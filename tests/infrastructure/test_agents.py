"""Agents in the synthesized template: an agent step is a loop of Task → Choice (each turn a state), a workflow
whose agents make compensable effects has a compensation lane in front (each compensation retried, its failure
dead-lettered), and only the functions whose tools send e-mail may send it, from the stack's SES identity."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.core.errors import RETRYABLE_ERROR_NAMES
from longhaul.core.settings import Env
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import definition, resources


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for machine in resources(template, "AWS::StepFunctions::StateMachine").values():
        asl = definition(machine)
        if asl["Comment"].startswith("Longhaul workflow "):
            found[asl["Comment"].removeprefix("Longhaul workflow ")] = asl
    return found


def test_an_agent_step_is_a_loop_of_a_task_and_a_choice(machines: dict[str, dict[str, Any]]) -> None:
    for workflow, spec in REGISTRY.items():
        states = machines[workflow]["States"]
        for agent in spec.agent_steps:
            start = states[f"{agent.name}: start"]
            assert start["Type"] == "Pass" and start["Result"] == {"turn": 0, "next": "turn"}
            task = states[start["Next"]]
            assert task["Type"] == "Task" and task["Parameters"]["item.$"] == f"$.steps.{agent.name}.turn"
            assert task["ResultPath"] == f"$.steps.{agent.name}"  # only references: the turn's output
            again = states[task["Next"]]
            assert again["Type"] == "Choice"
            (another,) = again["Choices"]
            assert another == {"Variable": f"$.steps.{agent.name}.next", "StringEquals": "turn", "Next": agent.name}
            assert any(set(RETRYABLE_ERROR_NAMES) <= set(r["ErrorEquals"]) for r in task["Retry"])
            catches = {c["ErrorEquals"][0]: states[c["Next"]] for c in task["Catch"]}
            assert catches["States.ALL"]["Parameters"]["step"] == agent.name  # record failure → its own DLQ


def test_a_compensated_workflow_starts_with_its_compensation_lane(machines: dict[str, dict[str, Any]]) -> None:
    for workflow, spec in REGISTRY.items():
        asl = machines[workflow]
        if not spec.compensated:
            assert "compensation: plan" not in asl["States"], workflow
            continue
        states = asl["States"]
        entry = states[asl["StartAt"]]
        (lane,) = entry["Choices"]
        assert lane == {"Variable": "$.saga", "IsNull": False, "Next": "compensation: plan"}
        assert entry["Default"] == spec.steps[0].name  # anything else runs the workflow's steps
        more = states[states["compensation: plan"]["Next"]]
        undo = states[more["Choices"][0]["Next"]]
        assert undo["Parameters"]["action"] == "undo" and undo["Next"] == "compensation: more?"
        (catch_all,) = [c for c in undo["Catch"] if c["ErrorEquals"] == ["States.ALL"]]
        failed = states[catch_all["Next"]]
        send = states[failed["Next"]]
        assert failed["Parameters"]["action"] == "failed" and send["Resource"].endswith(":states:::sqs:sendMessage")
        assert send["Next"] == "compensation: plan"  # a compensation that gave up: the lane goes on with the next
        assert states[states[more["Default"]]["Next"]]["Type"] == "Succeed"


def test_only_the_functions_whose_tools_send_e_mail_may_send_it_from_the_stacks_identity(
    template: dict[str, Any],
) -> None:
    (identity_id, identity), *others = resources(template, "AWS::SES::EmailIdentity").items()
    assert not others
    functions = resources(template, "AWS::Lambda::Function")
    sending = {
        fid
        for fid, f in functions.items()
        if Env.EMAIL_SENDER in f["Properties"].get("Environment", {}).get("Variables", {})
    }
    handlers = sorted(functions[f]["Properties"]["Handler"] for f in sending)
    assert handlers == ["handlers.saga.handler", "handlers.steps.handler"]  # send_notices and the lane
    assert all("sendnotices" in f or "compensation" in f for f in sending), sending
    roles = {functions[f]["Properties"]["Role"]["Fn::GetAtt"][0] for f in sending}
    granted = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith("ses:") for a in actions):
                assert identity_id in json.dumps(statement["Resource"])  # this identity only
                granted |= {r["Ref"] for r in policy["Properties"]["Roles"]}
    assert granted == roles
    assert identity["Properties"]["EmailIdentity"]
