"""Agents in the synthesized template: an agent step is a loop of Task → Choice (each turn a state), a workflow
whose agents make compensable effects has a compensation lane in front (each compensation retried, its failure
dead-lettered), only the functions whose tools send e-mail may send it, from the stack's SES identity, and an agent's
tools act through the tool role: trusted by the agent steps' functions only, its sessions short, its own policy
limited to jobs' and memory partitions and the jobs' object prefixes."""

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
    # Their tools send with the tool role (the job's credentials), never with the functions' own roles
    roles = {r for r in resources(template, "AWS::IAM::Role") if r.startswith("ToolsRole")}
    granted = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a.startswith("ses:") for a in actions):
                assert identity_id in json.dumps(statement["Resource"])  # this identity only
                granted |= {r["Ref"] for r in policy["Properties"]["Roles"]}
    assert granted == roles
    assert identity["Properties"]["EmailIdentity"]


def _statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_tool_role_is_trusted_by_the_functions_that_run_tools_only_for_short_sessions(
    template: dict[str, Any],
) -> None:
    (role_id, role), *others = [
        (k, v) for k, v in resources(template, "AWS::IAM::Role").items() if k.startswith("ToolsRole")
    ]
    assert not others
    assert role["Properties"]["MaxSessionDuration"] == 3600  # IAM's least; each call asks 900 s
    functions = resources(template, "AWS::Lambda::Function")
    agents = {
        fid: f for fid, f in functions.items()
        if Env.TOOL_ROLE in f["Properties"].get("Environment", {}).get("Variables", {})
    }  # fmt: skip
    expected = {f"{s.name.replace('_', '')}" for spec in REGISTRY.values() for s in spec.agent_steps}
    compensated = sum(1 for spec in REGISTRY.values() if spec.compensated)
    expected |= {"compensation"} if compensated else set()
    assert {next(e for e in expected if e in fid) for fid in agents} == expected  # agent turns and compensation lanes
    assert len(agents) == sum(len(spec.agent_steps) for spec in REGISTRY.values()) + compensated
    agent_roles = {f["Properties"]["Role"]["Fn::GetAtt"][0] for f in agents.values()}
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    trusted = {
        p["Fn::GetAtt"][0]
        for s in trust
        for p in (s["Principal"]["AWS"] if isinstance(s["Principal"]["AWS"], list) else [s["Principal"]["AWS"]])
    }
    assert trusted == agent_roles
    assert {s["Action"] for s in trust} == {"sts:AssumeRole", "sts:TagSession"}
    may_assume = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "sts:AssumeRole" in actions and role_id in json.dumps(statement["Resource"]):
                assert statement["Resource"] == {"Fn::GetAtt": [role_id, "Arn"]}
                may_assume |= {r["Ref"] for r in policy["Properties"]["Roles"]}
    assert may_assume == agent_roles


def test_the_tool_roles_own_policy_reaches_jobs_and_memory_partitions_and_job_objects_only(
    template: dict[str, Any],
) -> None:
    (role_id,) = [k for k in resources(template, "AWS::IAM::Role") if k.startswith("ToolsRole")]
    statements = _statements(template, role_id)
    actions = {a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert not {a for a in actions if a in ("dynamodb:Scan", "s3:DeleteObject", "s3:ListBucket")}
    for statement in statements:
        text = json.dumps(statement)
        if "dynamodb:DeleteItem" in text:  # a compensation forgets the tenant's memory its tool recorded, nothing else
            assert statement["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["MEMORY#*"]}}
        elif "dynamodb:" in text:
            assert statement["Condition"] == {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["JOB#*", "MEMORY#*"]}
            }
        assert "/index/" not in text
        if '"s3:' in text:
            assert "/work/*" in text and "/results/" not in text
