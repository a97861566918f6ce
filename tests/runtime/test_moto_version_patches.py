"""The patches for versions are pinned: without them moto (5.2.5) cannot deploy a change as CloudFormation does (a new
Lambda version beside its function's new code, a state machine version and its alias) nor start an execution through
an alias; with them a deploy publishes new versions, keeps the retained old ones, and an execution started on an old
version finishes on that version's definition and functions while a new one runs the new.

Tiny hand-written templates, moto in decorator mode: no CDK, no server.
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
from longhaul.core.contracts import JobStatus
from longhaul.core.ports import EngineUnavailable
from tests.unit.aws_env import REGION, offline_credentials

CODE_BUCKET = "code-bucket"
STACK = "versions-test"
MACHINE = f"{STACK}-machine"  # as a stack names its workflows' machines: the workflow is "machine"
TOKENS: list[str] = []


def answer(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The test's function: parks a task token, or says which configuration (version) answered."""
    from longhaul.core.settings import environ

    if "token" in event:
        TOKENS.append(event["token"])
        return {}
    return {"code": environ().get("CODE"), "version": context.function_version}


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_credentials(monkeypatch)
    TOKENS.clear()


@pytest.fixture
def patched() -> Iterator[None]:
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        _upload_code()
        yield
    if not was_applied:
        moto_patches.revert()


@pytest.fixture
def unpatched() -> Iterator[None]:
    was_applied = moto_patches.is_applied()
    moto_patches.revert()
    moto_patches.route_state_machines_to_interpreter()  # so that only the patches under test are missing
    moto_patches.run_lambdas_in_process()
    moto_patches.enable_execution()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        _upload_code()
        yield
    moto_patches.revert()
    if was_applied:
        moto_patches.apply()


def _upload_code() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "# the runtime imports handlers from the code root\n")
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=CODE_BUCKET)
    s3.put_object(Bucket=CODE_BUCKET, Key="code.zip", Body=buffer.getvalue())


def _role() -> dict[str, Any]:
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "lambda.amazonaws.com"}}
        ],
    }
    return {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}}


def _function(code: str) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Handler": f"{__name__}.answer",
            "Runtime": "python3.12",
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "Code": {"S3Bucket": CODE_BUCKET, "S3Key": "code.zip"},
            "Environment": {"Variables": {"CODE": code}},
        },
    }


RETAIN = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}


def _template(code: str, *, versions: bool = True, machine_versions: bool = True) -> dict[str, Any]:
    """A function, its version (named after its code, as CDK names `currentVersion`), a machine that parks a task
    token then asks the version, the machine's version (named after its code too) and the alias `live`."""
    lambda_version, machine_version = f"FnVersion{code}", f"MachineVersion{code}"
    target: Any = {"Ref": lambda_version} if versions else {"Fn::GetAtt": ["Fn", "Arn"]}
    wait = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": "@", "Payload": {"token.$": "$$.Task.Token"}},
        "ResultPath": None,
        "Next": "Ask",
    }
    ask = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "@"},
        "OutputPath": "$.Payload",
        "End": True,
    }
    parts = json.dumps({"StartAt": "Wait", "States": {"Wait": wait, "Ask": ask}}).split('"@"')
    definition = {"Fn::Join": ["", [parts[0], '"', target, '"', parts[1], '"', target, '"', parts[2]]]}
    resources: dict[str, Any] = {
        "Role": _role(),
        "Fn": _function(code),
        "Machine": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "StateMachineName": MACHINE,
                "DefinitionString": definition,
                "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
            },
        },
    }
    if versions:
        resources[lambda_version] = {
            "Type": "AWS::Lambda::Version",
            "Properties": {"FunctionName": {"Ref": "Fn"}},
            **RETAIN,
        }
    if machine_versions:
        resources[machine_version] = {
            "Type": "AWS::StepFunctions::StateMachineVersion",
            "Properties": {"StateMachineArn": {"Ref": "Machine"}},
            **RETAIN,
        }
        resources["Live"] = {
            "Type": "AWS::StepFunctions::StateMachineAlias",
            "Properties": {
                "Name": "live",
                "RoutingConfiguration": [{"StateMachineVersionArn": {"Ref": machine_version}, "Weight": 100}],
            },
        }
    return {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}


def _deploy(template: dict[str, Any], *, update: bool = False) -> dict[str, str]:
    cfn = boto3.client("cloudformation", region_name=REGION)
    call = cfn.update_stack if update else cfn.create_stack
    call(StackName=STACK, TemplateBody=json.dumps(template), Capabilities=["CAPABILITY_IAM"])
    summaries = cfn.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in summaries}


def _versions(function: str) -> dict[str, str | None]:
    listed = boto3.client("lambda", region_name=REGION).list_versions_by_function(FunctionName=function)["Versions"]
    return {v["Version"]: (v.get("Environment") or {}).get("Variables", {}).get("CODE") for v in listed}


def _finished(arn: str) -> dict[str, Any]:
    sfn = boto3.client("stepfunctions", region_name=REGION)

    def probe() -> dict[str, Any] | None:
        described: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        return None if described["status"] == "RUNNING" else described

    return wait_until(probe, timeout=30, what=arn)


# --- update_in_dependency_order ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("unpatched")
def test_a_version_added_beside_new_code_publishes_nothing_new_without_the_patch() -> None:
    _deploy(_template("A", machine_versions=False))
    function = _deploy(_template("B", machine_versions=False), update=True)["Fn"]

    # The version was "published" before the function's update: moto found nothing changed and published nothing.
    assert _versions(function) == {"$LATEST": "B", "1": "A"}


@pytest.mark.usefixtures("patched")
def test_a_version_added_beside_new_code_publishes_the_new_code_and_keeps_the_retained_old_one_with_the_patch() -> None:
    first = _deploy(_template("A"))
    second = _deploy(_template("B"), update=True)

    assert _versions(second["Fn"]) == {"$LATEST": "B", "1": "A", "2": "B"}
    assert second["FnVersionB"].endswith(":2") and "FnVersionA" not in second
    assert first["FnVersionA"].endswith(":1")  # left the stack, kept in the account (DeletionPolicy Retain)


@pytest.mark.usefixtures("patched")
def test_a_removed_resource_that_is_not_retained_is_deleted_after_the_update_with_the_patch() -> None:
    template = _template("A", machine_versions=False)
    template["Resources"]["FnVersionA"].pop("DeletionPolicy")
    function = _deploy(template)["Fn"]

    _deploy(_template("B", machine_versions=False), update=True)

    assert _versions(function) == {"$LATEST": "B", "2": "B"}


# --- reference_lambda_versions ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("unpatched")
def test_a_lambda_version_has_no_arn_to_refer_to_without_the_patch() -> None:
    ids = _deploy(_template("A", machine_versions=False))

    assert ids["FnVersionA"] == ""
    definition = boto3.client("stepfunctions", region_name=REGION).describe_state_machine(
        stateMachineArn=ids["Machine"]
    )["definition"]
    assert '"FunctionName": "FnVersionA"' in definition  # the Python object's repr, not a function


@pytest.mark.usefixtures("patched")
def test_a_lambda_version_is_referred_to_by_its_arn_with_the_patch() -> None:
    ids = _deploy(_template("A"))

    assert ids["FnVersionA"] == f"arn:aws:lambda:{REGION}:123456789012:function:{ids['Fn']}:1"
    definition = boto3.client("stepfunctions", region_name=REGION).describe_state_machine(
        stateMachineArn=ids["Machine"]
    )["definition"]
    assert f'"FunctionName": "{ids["FnVersionA"]}"' in definition


# --- deploy_state_machine_versions ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("unpatched")
def test_a_state_machine_version_and_alias_are_not_deployed_without_the_patch() -> None:
    ids = _deploy(_template("A"))

    sfn = boto3.client("stepfunctions", region_name=REGION)
    assert "MachineVersionA" not in ids and "Live" not in ids  # "No Moto CloudFormation support" for either type
    assert sfn.list_state_machine_aliases(stateMachineArn=ids["Machine"])["stateMachineAliases"] == []
    with pytest.raises(NotImplementedError, match="list_state_machine_versions"):
        sfn.list_state_machine_versions(stateMachineArn=ids["Machine"])


@pytest.mark.usefixtures("patched")
def test_a_state_machine_version_and_alias_deploy_and_a_new_version_keeps_the_old_one_with_the_patch() -> None:
    first = _deploy(_template("A"))
    second = _deploy(_template("B"), update=True)

    machine = second["Machine"]
    assert first["MachineVersionA"] == f"{machine}:1" and second["MachineVersionB"] == f"{machine}:2"
    assert second["Live"] == f"{machine}:live"
    sfn = boto3.client("stepfunctions", region_name=REGION)
    listed = sfn.list_state_machine_versions(stateMachineArn=machine)["stateMachineVersions"]
    assert [v["stateMachineVersionArn"] for v in listed] == [f"{machine}:2", f"{machine}:1"]
    routing = sfn.describe_state_machine_alias(stateMachineAliasArn=second["Live"])["routingConfiguration"]
    assert routing == [{"stateMachineVersionArn": f"{machine}:2", "weight": 100}]
    with pytest.raises(ClientError, match="ConflictException"):  # the alias routes to it
        sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:2")
    sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:1")
    listed = sfn.list_state_machine_versions(stateMachineArn=machine)["stateMachineVersions"]
    assert [v["stateMachineVersionArn"] for v in listed] == [f"{machine}:2"]


# --- start_executions_on_versions ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("unpatched")
def test_an_alias_does_not_start_an_execution_without_the_patch() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    machine = sfn.create_state_machine(
        name="direct", definition=definition, roleArn="arn:aws:iam::123456789012:role/sfn", publish=True
    )
    version = machine["stateMachineVersionArn"]
    alias = sfn.create_state_machine_alias(
        name="live", routingConfiguration=[{"stateMachineVersionArn": version, "weight": 100}]
    )["stateMachineAliasArn"]

    with pytest.raises(ClientError, match="StateMachineDoesNotExist"):
        sfn.start_execution(stateMachineArn=alias, name="job", input="{}")


@pytest.mark.usefixtures("patched")
def test_an_execution_started_through_the_alias_finishes_on_its_version_across_a_deploy_with_the_patch() -> None:
    ids = _deploy(_template("A"))
    sfn = boto3.client("stepfunctions", region_name=REGION)
    old = sfn.start_execution(stateMachineArn=ids["Live"], name="old", input="{}")["executionArn"]
    wait_until(lambda: TOKENS or None, timeout=10, what="the old execution's token")

    ids = _deploy(_template("B"), update=True)
    new = sfn.start_execution(stateMachineArn=ids["Live"], name="new", input="{}")["executionArn"]
    wait_until(lambda: len(TOKENS) > 1 or None, timeout=10, what="the new execution's token")
    for token in TOKENS:
        sfn.send_task_success(taskToken=token, output="{}")

    finished = {name: _finished(arn) for name, arn in (("old", old), ("new", new))}
    assert json.loads(finished["old"]["output"]) == {"code": "A", "version": "1"}
    assert json.loads(finished["new"]["output"]) == {"code": "B", "version": "2"}
    machine = ids["Machine"]
    assert finished["old"]["stateMachineArn"] == machine
    assert finished["old"]["stateMachineVersionArn"] == f"{machine}:1"
    assert finished["new"]["stateMachineVersionArn"] == f"{machine}:2"
    assert finished["new"]["stateMachineAliasArn"] == ids["Live"]
    assert old == machine.replace(":stateMachine:", ":execution:") + ":old"  # executions are the machine's
    with pytest.raises(ClientError, match="ExecutionAlreadyExists"):  # names are unique per machine, across versions
        sfn.start_execution(stateMachineArn=f"{machine}:1", name="new", input='{"other": 1}')


# --- the engine adapter on the patched moto -------------------------------------------------------------------------


@pytest.mark.usefixtures("patched")
def test_the_engine_starts_a_job_through_the_alias_or_on_its_own_version_and_its_execution_says_which() -> None:
    from longhaul.adapters.stepfunctions import StepFunctionsEngine

    first = _deploy(_template("A"))
    ids = _deploy(_template("B"), update=True)
    workflow, state = "probe", {"job_id": "job_1"}
    engine = StepFunctionsEngine(boto3.client("stepfunctions", region_name=REGION), {workflow: ids["Live"]})

    engine.start(workflow, "job_1", state)
    engine.start(workflow, "job_2-r2", state, version=first["MachineVersionA"])

    assert engine.describe(workflow, "job_1").version == ids["MachineVersionB"]
    assert engine.describe(workflow, "job_2-r2").version == first["MachineVersionA"]
    execution = ids["Machine"].replace(":stateMachine:", ":execution:")
    assert engine.version_of(f"{execution}:job_1") == ids["MachineVersionB"]
    assert engine.version_of(f"{execution}:no-such-job") is None
    assert engine.has_version(workflow, first["MachineVersionA"])
    assert not engine.has_version(workflow, f"{ids['Machine']}:9")
    with pytest.raises(EngineUnavailable, match="not a version"):  # another machine's version
        engine.start(workflow, "job_3", state, version=first["MachineVersionA"].replace(MACHINE, "other"))
    wait_until(lambda: len(TOKENS) == 2 or None, timeout=10, what="both executions' tokens")
    for token in TOKENS:  # let them end
        boto3.client("stepfunctions", region_name=REGION).send_task_success(taskToken=token, output="{}")


# --- the operators' prune command on the patched moto -----------------------------------------------------------------


def _with_table(template: dict[str, Any]) -> dict[str, Any]:
    """The template plus a jobs table with the platform's indexes and its `TableName` output."""
    from longhaul.core import schema
    from longhaul.operations import admin

    keys = [schema.PK, schema.SK, *(k for pair in schema.INDEXES.values() for k in pair)]
    table = {
        "Type": "AWS::DynamoDB::Table",
        "Properties": {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k in keys],
            "KeySchema": [
                {"AttributeName": schema.PK, "KeyType": "HASH"},
                {"AttributeName": schema.SK, "KeyType": "RANGE"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": name,
                    "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY" if name in schema.KEYS_ONLY_INDEXES else "ALL"},
                }
                for name, (pk, sk) in schema.INDEXES.items()
            ],
        },
    }
    return {
        **template,
        "Resources": {**template["Resources"], "Jobs": table},
        "Outputs": {admin.TABLE_OUTPUT: {"Value": {"Ref": "Jobs"}}},
    }


@pytest.mark.usefixtures("patched")
def test_prune_versions_keeps_what_the_alias_routes_to_and_live_jobs_run_and_deletes_the_rest() -> None:
    from longhaul.operations import admin
    from longhaul.storage.jobs import JobStore, NewJob

    first = _deploy(_with_table(_template("A")))
    second = _deploy(_with_table(_template("B")), update=True)
    session = boto3.session.Session(region_name=REGION)
    jobs = JobStore(session.resource("dynamodb").Table(second["Jobs"]))
    job_id = "job_" + "d" * 28
    jobs.create_job(NewJob(job_id, "tenant-a", "machine", f"work/{job_id}/input.json", "h", "m", 30))
    jobs.update_job(job_id, {"state_machine_version": first["MachineVersionA"]}, only_if=[JobStatus.QUEUED])

    def run(apply: bool) -> str:
        out = io.StringIO()
        assert admin.prune_versions(session, STACK, apply=apply, out=out) == 0
        return out.getvalue()

    while_running = run(apply=True)
    jobs.transition(job_id, JobStatus.CANCELLED, event="job_cancelled")
    planned = run(apply=False)
    pruned = run(apply=True)

    assert "keep version 1 (1 live job(s) run it)" in while_running and "nothing to prune" in while_running
    assert "keep version 2 (the alias routes new jobs to it)" in planned
    assert f"prune version 1 ({first['MachineVersionA']})" in planned and "--apply" in planned
    assert f"prune function version {first['FnVersionA']}" in planned
    assert "pruned 2 versions" in pruned
    sfn = boto3.client("stepfunctions", region_name=REGION)
    listed = sfn.list_state_machine_versions(stateMachineArn=second["Machine"])["stateMachineVersions"]
    assert [v["stateMachineVersionArn"] for v in listed] == [second["MachineVersionB"]]
    assert _versions(second["Fn"]) == {"$LATEST": "B", "2": "B"}
