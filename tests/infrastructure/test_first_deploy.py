"""What a first deploy on AWS needs from the template: the table name as an output, alarms that notify someone,
an alarm for a model the account cannot use, buckets emptied on delete in dev and retained in production, and a
model client whose worst case fits every model step's timeout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from longhaul.adapters import aws
from longhaul.core.observability import NAMESPACE, PLATFORM_MISCONFIGURED
from longhaul.core.settings import Env
from longhaul.operations.admin import TABLE_OUTPUT, WEBHOOK_SECRETS_OUTPUT
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import ALARM_EMAIL, all_states, definition, payload_step, resources, task_function


@pytest.fixture(scope="module")
def prod(bedrock_assembly: Path) -> dict[str, Any]:
    return json.loads(next(bedrock_assembly.glob("Longhaul-prod.template.json")).read_text())


def _only(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = resources(template, kind).items()
    return found


def test_the_stack_outputs_its_table_alarm_topic_and_webhook_secrets_prefix(template: dict[str, Any]) -> None:
    table_id, _ = _only(template, "AWS::DynamoDB::Table")
    topic_id, _ = _only(template, "AWS::SNS::Topic")
    functions = resources(template, "AWS::Lambda::Function").values()
    variables = [f["Properties"].get("Environment", {}).get("Variables", {}) for f in functions]
    prefixes = {v.get(Env.WEBHOOK_SECRETS_PREFIX) for v in variables}

    assert template["Outputs"][TABLE_OUTPUT]["Value"] == {"Ref": table_id}
    assert template["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic_id}
    # the prefix the admin commands rotate secrets under is the one the functions sign with
    assert prefixes - {None} == {template["Outputs"][WEBHOOK_SECRETS_OUTPUT]["Value"]}


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_every_alarm_notifies_the_alarm_topic(template: dict[str, Any], prod: dict[str, Any], stage: str) -> None:
    chosen = template if stage == "dev" else prod
    topic_id, _ = _only(chosen, "AWS::SNS::Topic")
    alarms = resources(chosen, "AWS::CloudWatch::Alarm")

    assert len(alarms) >= 2
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"].get("AlarmActions") == [{"Ref": topic_id}], logical_id


def test_the_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use_and_tls_only(template: dict[str, Any]) -> None:
    key_id, key = _only(template, "AWS::KMS::Key")
    _, topic = _only(template, "AWS::SNS::Topic")
    _, policy = _only(template, "AWS::SNS::TopicPolicy")

    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    cloudwatch = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s["Principal"].get("Service") == "cloudwatch.amazonaws.com"
    ]
    assert cloudwatch and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(cloudwatch[0]["Action"])
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_an_alarm_email_is_subscribed_only_when_configured(template: dict[str, Any], prod: dict[str, Any]) -> None:
    assert not resources(template, "AWS::SNS::Subscription")
    _, subscription = _only(prod, "AWS::SNS::Subscription")
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == ALARM_EMAIL


def test_a_model_the_account_cannot_use_raises_an_alarm(template: dict[str, Any], prod: dict[str, Any]) -> None:
    def platform_alarms(t: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            a["Properties"]
            for a in resources(t, "AWS::CloudWatch::Alarm").values()
            if a["Properties"].get("MetricName") == PLATFORM_MISCONFIGURED
        ]

    (alarm,) = platform_alarms(prod)
    assert alarm["Namespace"] == NAMESPACE
    assert alarm["Dimensions"] == [{"Name": "provider", "Value": "bedrock"}]
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert "model access" in alarm["AlarmDescription"]
    assert not platform_alarms(template), "the offline model never raises it"


def test_dev_buckets_are_emptied_and_destroyed_with_the_stack(template: dict[str, Any]) -> None:
    buckets = resources(template, "AWS::S3::Bucket")
    emptied = {
        r["Properties"]["BucketName"]["Ref"] for r in resources(template, "Custom::S3AutoDeleteObjects").values()
    }

    assert len(buckets) >= 2 and emptied == set(buckets)  # the artifacts, the access logs, the trail's
    assert all(b["DeletionPolicy"] == "Delete" for b in buckets.values())


def test_production_buckets_and_table_are_retained_and_never_emptied(prod: dict[str, Any]) -> None:
    assert not resources(prod, "Custom::S3AutoDeleteObjects")
    for kind in ("AWS::S3::Bucket", "AWS::DynamoDB::Table", "AWS::KMS::Key"):
        for logical_id, resource in resources(prod, kind).items():
            assert resource["DeletionPolicy"] == "Retain", logical_id


def model_step_timeouts(template: dict[str, Any]) -> dict[tuple[str, str], int]:
    """{(workflow, step): Lambda timeout} of every Task that runs a step its workflow's spec says calls a model."""
    functions = resources(template, "AWS::Lambda::Function")
    found: dict[tuple[str, str], int] = {}
    for machine in resources(template, "AWS::StepFunctions::StateMachine").values():
        asl = definition(machine)
        if not asl["Comment"].startswith("Longhaul workflow "):  # the webhook delivery calls no model
            continue
        spec = REGISTRY[asl["Comment"].removeprefix("Longhaul workflow ")]
        for name, state, _ in all_states(asl["States"]):
            step = payload_step(state)
            if step in spec.model_steps and ":" not in name:  # not the failure path's tasks, which name it too
                found[(spec.name, step)] = functions[task_function(template, state)]["Properties"]["Timeout"]
    return found


def test_the_model_client_worst_case_fits_every_model_steps_lambda_timeout(prod: dict[str, Any]) -> None:
    worst = aws.worst_case_seconds(
        connect_timeout=aws.MODEL_CONNECT_TIMEOUT, read_timeout=aws.MODEL_READ_TIMEOUT, attempts=aws.MODEL_MAX_ATTEMPTS
    )
    timeouts = model_step_timeouts(prod)

    assert set(timeouts) == {(w, step) for w, spec in REGISTRY.items() for step in spec.model_steps}
    for step, timeout in timeouts.items():
        # a step may allow longer (several model calls in one step), never less than the client's sizing
        assert timeout >= aws.MODEL_STEP_TIMEOUT, f"{step}: aws.MODEL_STEP_TIMEOUT exceeds the step's timeout"
        assert worst + aws.MODEL_STEP_HEADROOM <= timeout, step
