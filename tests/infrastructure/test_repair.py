"""The repair routes' grants: an operator's escalation reaches the alarm topic through the operators' function alone,
with `sns:Publish` on that topic and its key's use for it, nothing wider."""

from __future__ import annotations

from typing import Any

from longhaul.core.settings import Env
from tests.infrastructure.conftest import resources


def _logical(template: dict[str, Any], kind: str, prefix: str) -> str:
    (found,) = [k for k in resources(template, kind) if k.startswith(prefix)]
    return found


def _statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for policy in resources(template, kind).values():
            attached = policy["Properties"].get("Roles", [])
            if {"Ref": role} in attached:
                found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_only_the_operators_function_publishes_to_the_alarm_topic_and_uses_its_key_for_nothing_else(
    template: dict[str, Any],
) -> None:
    topic = _logical(template, "AWS::SNS::Topic", "ObservabilityAlarmTopic")
    key = _logical(template, "AWS::KMS::Key", "ObservabilityAlarmTopicKey")
    functions = resources(template, "AWS::Lambda::Function")
    ops = _logical(template, "AWS::Lambda::Function", "ApiOpsHandler")
    assert functions[ops]["Properties"]["Environment"]["Variables"][Env.ALARM_TOPIC] == {"Ref": topic}
    role = functions[ops]["Properties"]["Role"]["Fn::GetAtt"][0]

    publishing = [s for s in _statements(template, role) if "sns:Publish" in _actions(s)]
    keyed = [s for s in _statements(template, role) if s["Resource"] == {"Fn::GetAtt": [key, "Arn"]}]

    assert [(s["Resource"], _actions(s)) for s in publishing] == [({"Ref": topic}, ["sns:Publish"])]
    assert [sorted(_actions(s)) for s in keyed] == [["kms:Decrypt", "kms:GenerateDataKey"]]
    others = [
        f
        for f, v in functions.items()
        if f != ops and Env.ALARM_TOPIC in v["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert others == []
