"""Triggers in: the scheduler role and what may pass it, the API function's grants on its own schedules and rules, the
artifacts bucket's EventBridge notifications and the inbox rule, and the function's permission for the rules."""

from __future__ import annotations

import json
from typing import Any

from longhaul.core.settings import Env
from tests.infrastructure.conftest import resources

PREFIX = "Longhaul-dev"


def _api_function(template: dict[str, Any]) -> str:
    (function_id,) = [k for k in resources(template, "AWS::Lambda::Function") if k.startswith("ApiHandler")]
    return function_id


def _statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"].get("Roles", [])
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_the_scheduler_role_trusts_scheduler_for_this_account_and_may_invoke_the_api_function_only(template):
    function_id = _api_function(template)
    roles = {
        k: r
        for k, r in resources(template, "AWS::IAM::Role").items()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
        == "scheduler.amazonaws.com"
    }
    (role_id,) = roles
    trust = roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    statements = _statements(template, role_id)
    assert [a for s in statements for a in _actions(s)] == ["lambda:InvokeFunction"]
    assert function_id in _text(statements[0]["Resource"])
    assert not roles[role_id]["Properties"].get("ManagedPolicyArns")

    # The API function names the role, may pass it to Scheduler only, and nothing else may pass it.
    variables = resources(template, "AWS::Lambda::Function")[function_id]["Properties"]["Environment"]["Variables"]
    assert variables[Env.SCHEDULER_ROLE] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert variables[Env.TRIGGER_PREFIX] == PREFIX
    passes = [
        (policy_id, statement)
        for policy_id, policy in resources(template, "AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "iam:PassRole" in _actions(statement) and role_id in _text(statement["Resource"])
    ]
    assert len(passes) == 1
    (_, statement) = passes[0]
    assert statement["Resource"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_the_api_function_manages_only_its_deployments_schedules_groups_and_rules(template):
    function = resources(template, "AWS::Lambda::Function")[_api_function(template)]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = _statements(template, role_id)
    scoped = {
        action: _text(s["Resource"])
        for s in statements
        for action in _actions(s)
        if action.startswith(("scheduler:", "events:"))
    }
    assert set(scoped) == {
        "scheduler:CreateSchedule",
        "scheduler:UpdateSchedule",
        "scheduler:DeleteSchedule",
        "scheduler:CreateScheduleGroup",
        "scheduler:GetScheduleGroup",
        "events:PutRule",
        "events:PutTargets",
        "events:DeleteRule",
        "events:RemoveTargets",
        "events:DescribeRule",
    }
    for action, resource in scoped.items():
        assert '"*"' not in resource, action
        if action.startswith("scheduler:"):
            assert f":schedule/{PREFIX}-*/*" in resource or f":schedule-group/{PREFIX}-*" in resource, action
        else:
            assert f"rule/{PREFIX}-trg_*" in resource and f"rule/*/{PREFIX}-trg_*" in resource, action


def test_the_inbox_sends_its_objects_to_the_api_function_and_only_the_trigger_rules_may_invoke_it(template):
    function_id = _api_function(template)
    buckets = [b for k, b in resources(template, "AWS::S3::Bucket").items() if k.startswith("StorageArtifacts")]
    (bucket,) = buckets
    assert bucket["Properties"]["NotificationConfiguration"] == {
        "EventBridgeConfiguration": {"EventBridgeEnabled": True}
    }
    inbox = [
        r
        for r in resources(template, "AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("source") == ["aws.s3"]
    ]
    (rule,) = inbox
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail-type"] == ["Object Created"]
    assert pattern["detail"]["object"]["key"] == [{"prefix": "inbox/"}]
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    permissions = [
        p["Properties"]
        for p in resources(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
        and p["Properties"]["FunctionName"] == {"Fn::GetAtt": [function_id, "Arn"]}
    ]
    sources = [_text(p["SourceArn"]) for p in permissions]
    assert len(permissions) == 2
    assert any(f"rule/*{PREFIX}-trg_*" in s for s in sources)
    assert all(
        p.get("SourceAccount") == {"Ref": "AWS::AccountId"} for p in permissions if "trg_" in _text(p["SourceArn"])
    )
