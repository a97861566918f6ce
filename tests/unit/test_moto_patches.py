"""Each moto patch is pinned: without it moto (5.2.5) misbehaves in the way the patch documents; with it, not.

When one of the `..._without_the_patch` tests fails, upstream changed: re-check (and maybe drop) that patch.
Tiny hand-written CloudFormation templates, moto in decorator mode: no CDK, no server.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from local import moto_patches
from local.deploy import wait_until

REGION = "us-east-1"
CODE_BUCKET = "code-bucket"
CODE_KEY = "code.zip"
HANDLER = f"{__name__}.flaky"
CALLS: list[Any] = []


class TransientGlitch(Exception):
    """Raised by `flaky` on its first call; the state machine retries on this name."""


def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
    CALLS.append(event)
    if len(CALLS) == 1:
        raise TransientGlitch("first call fails")
    return {"value": event["value"] * 2, "function": context.function_name}


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    CALLS.clear()


@pytest.fixture
def patched() -> Iterator[None]:
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    if not was_applied:
        moto_patches.revert()


@pytest.fixture
def unpatched() -> Iterator[None]:
    was_applied = moto_patches.is_applied()
    moto_patches.revert()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    if was_applied:
        moto_patches.apply()


def _pass_machine() -> dict[str, Any]:
    definition = {
        "StartAt": "Hello",
        "States": {"Hello": {"Type": "Pass", "Result": {"ok": True}, "End": True}},
    }
    return {
        "Type": "AWS::StepFunctions::StateMachine",
        "Properties": {
            "DefinitionString": json.dumps(definition),
            "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
        },
    }


def _role() -> dict[str, Any]:
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "lambda.amazonaws.com"}}
        ],
    }
    return {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}}


def _deploy(resources: dict[str, Any]) -> dict[str, str]:
    cfn = boto3.client("cloudformation", region_name=REGION)
    template = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"Role": _role(), **resources}}
    cfn.create_stack(StackName="patch-test", TemplateBody=json.dumps(template), Capabilities=["CAPABILITY_IAM"])
    summaries = cfn.list_stack_resources(StackName="patch-test")["StackResourceSummaries"]
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in summaries}


def _finished(arn: str) -> dict[str, Any]:
    sfn = boto3.client("stepfunctions", region_name=REGION)

    def probe() -> dict[str, Any] | None:
        described: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        return None if described["status"] == "RUNNING" else described

    return wait_until(probe, timeout=30, what=arn)


# --- route_state_machines_to_interpreter -------------------------------------------------------------------


@pytest.mark.usefixtures("unpatched")
def test_cfn_state_machine_is_invisible_to_the_interpreter_without_the_patch() -> None:
    from moto.stepfunctions.models import stepfunctions_backends

    arn = _deploy({"Machine": _pass_machine()})["Machine"]

    assert arn in [m.arn for m in stepfunctions_backends["123456789012"][REGION].state_machines]
    with pytest.raises(ClientError, match="StateMachineDoesNotExist"):
        boto3.client("stepfunctions", region_name=REGION).start_execution(stateMachineArn=arn)


@pytest.mark.usefixtures("patched")
def test_cfn_state_machine_executes_with_the_patch() -> None:
    arn = _deploy({"Machine": _pass_machine()})["Machine"]

    execution = boto3.client("stepfunctions", region_name=REGION).start_execution(stateMachineArn=arn)

    finished = _finished(execution["executionArn"])
    assert finished["status"] == "SUCCEEDED"
    assert json.loads(finished["output"]) == {"ok": True}


# --- name_executions_like_aws ------------------------------------------------------------------------------


def _direct_machine() -> str:
    definition = {"StartAt": "Hello", "States": {"Hello": {"Type": "Pass", "End": True}}}
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn: str = sfn.create_state_machine(
        name="direct", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/sfn"
    )["stateMachineArn"]
    return arn


@pytest.mark.usefixtures("unpatched")
def test_unnamed_executions_collide_without_the_patch() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = _direct_machine()

    first = sfn.start_execution(stateMachineArn=arn, input="{}")
    assert first["executionArn"].endswith(":None")
    with pytest.raises(ClientError, match="ExecutionAlreadyExists"):
        sfn.start_execution(stateMachineArn=arn, input='{"other": 1}')


@pytest.mark.usefixtures("patched")
def test_unnamed_executions_get_unique_names_with_the_patch() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = _direct_machine()

    arns = {sfn.start_execution(stateMachineArn=arn, input=json.dumps({"n": n}))["executionArn"] for n in range(2)}

    assert len(arns) == 2
    assert not any(a.endswith(":None") for a in arns)
    named = sfn.start_execution(stateMachineArn=arn, name="job-1", input="{}")
    assert named["executionArn"].endswith(":job-1")


# --- run_lambdas_in_process ------------------------------------------------------------------------------


def _upload_code() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "# the runtime imports handlers from the code root\n")
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=CODE_BUCKET)
    s3.put_object(Bucket=CODE_BUCKET, Key=CODE_KEY, Body=buffer.getvalue())


def _function() -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Handler": HANDLER,
            "Runtime": "python3.12",
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "Code": {"S3Bucket": CODE_BUCKET, "S3Key": CODE_KEY},
            "Environment": {"Variables": {"LONGHAUL_TABLE": "t", "LONGHAUL_BUCKET": "b"}},
        },
    }


@pytest.mark.usefixtures("unpatched")
def test_lambda_invoke_echoes_the_request_without_the_patch() -> None:
    _upload_code()
    name = _deploy({"Fn": _function()})["Fn"]

    response = boto3.client("lambda", region_name=REGION).invoke(FunctionName=name, Payload=b'{"value": 2}')

    assert response["Payload"].read() == b'{"value": 2}'
    assert CALLS == []


@pytest.mark.usefixtures("patched")
def test_cfn_lambda_task_runs_the_handler_and_retries_on_its_exception_class_with_the_patch() -> None:
    _upload_code()
    definition = {
        "StartAt": "Double",
        "States": {
            "Double": {
                "Type": "Task",
                "Resource": "${FunctionArn}",
                "Retry": [{"ErrorEquals": ["TransientGlitch"], "IntervalSeconds": 1, "MaxAttempts": 2}],
                "End": True,
            }
        },
    }
    machine = {
        "Type": "AWS::StepFunctions::StateMachine",
        "Properties": {
            "DefinitionString": {"Fn::Sub": [json.dumps(definition), {"FunctionArn": {"Fn::GetAtt": ["Fn", "Arn"]}}]},
            "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
        },
    }
    ids = _deploy({"Fn": _function(), "Machine": machine})

    sfn = boto3.client("stepfunctions", region_name=REGION)
    execution = sfn.start_execution(stateMachineArn=ids["Machine"], input=json.dumps({"value": 21}))

    finished = _finished(execution["executionArn"])
    assert finished["status"] == "SUCCEEDED", finished
    assert json.loads(finished["output"]) == {"value": 42, "function": ids["Fn"]}
    assert len(CALLS) == 2


# --- enable_execution -----------------------------------------------------------------------------------------


def test_apply_and_revert_are_idempotent() -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.core.config import default_user_config

    was_applied = moto_patches.is_applied()
    try:
        moto_patches.revert()
        original = LambdaSimpleBackend.invoke
        moto_patches.apply()
        moto_patches.apply()
        assert default_user_config["stepfunctions"]["execute_state_machine"] is True
        assert default_user_config["lambda"]["use_docker"] is False
        assert LambdaSimpleBackend.invoke is not original
        moto_patches.revert()
        moto_patches.revert()
        assert LambdaSimpleBackend.invoke is original
        assert not moto_patches.is_applied()
    finally:
        if was_applied:
            moto_patches.apply()
