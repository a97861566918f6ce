"""Each moto patch is pinned: without it moto (5.2.5) misbehaves in the way the patch documents; with it, not.

When one of the `..._without_the_patch` tests fails, upstream changed: re-check (and maybe drop) that patch.
Tiny hand-written CloudFormation templates, moto in decorator mode: no CDK, no server.
"""

from __future__ import annotations

import inspect
import io
import json
import textwrap
import types
import zipfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from local import moto_patches
from local.deploy import wait_until
from tests.runtime.upstream import digest
from tests.unit.aws_env import REGION, offline_credentials

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
    offline_credentials(monkeypatch)
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


# --- stop_executions_promptly (with scale_interpreter_waits: the waits it releases) ---------------------------

ROLE_ARN = "arn:aws:iam::123456789012:role/sfn"
FAILURES: list[Any] = []


class StillBroken(Exception):
    """Raised by `always_fails`; the state machine retries it after a long backoff."""


def always_fails(event: dict[str, Any], context: Any) -> None:
    FAILURES.append(event)
    raise StillBroken("no luck")


def _token_machine(sqs_queue_url: str) -> str:
    """Sends its task token to SQS and waits for it (no timeout), then a Pass state that must never run."""
    definition = {
        "StartAt": "Await",
        "States": {
            "Await": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {"QueueUrl": sqs_queue_url, "MessageBody.$": "$$.Task.Token"},
                "Next": "After",
            },
            "After": {"Type": "Pass", "End": True},
        },
    }
    return _create_machine("awaits-token", definition)


def _create_machine(name: str, definition: dict[str, Any]) -> str:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn: str = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE_ARN)[
        "stateMachineArn"
    ]
    return arn


def _start_waiting_for_token() -> tuple[str, str]:
    """Start `_token_machine`; returns (execution ARN, the token it waits for) once it waits."""
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
    sfn = boto3.client("stepfunctions", region_name=REGION)
    execution = sfn.start_execution(stateMachineArn=_token_machine(queue), input="{}")["executionArn"]

    def token() -> str | None:
        messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
        return messages[0]["Body"] if messages else None

    return execution, wait_until(token, timeout=10, what="the task token in SQS")


def _history(arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = boto3.client("stepfunctions", region_name=REGION).get_execution_history(
        executionArn=arn
    )["events"]
    return events


def _aborted_history(arn: str) -> list[str]:
    """The history's event types, once the execution's thread has ended (its last event is ExecutionAborted)."""

    def ended() -> list[str] | None:
        types = [e["type"] for e in _history(arn)]
        return types if types and types[-1] == "ExecutionAborted" else None

    return wait_until(ended, timeout=2, what=f"ExecutionAborted of {arn}")


@pytest.mark.usefixtures("unpatched")
def test_stop_leaves_a_token_wait_running_without_the_patch() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    execution, token = _start_waiting_for_token()

    stopped = sfn.stop_execution(executionArn=execution)

    assert "stopDate" not in stopped  # upstream answers a null stop date
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    # Only the token releases the waiting thread; it then records the Task's success after the stop.
    sfn.send_task_success(taskToken=token, output="{}")
    assert _aborted_history(execution)[-2:] == ["TaskSucceeded", "ExecutionAborted"]


@pytest.mark.usefixtures("patched")
def test_stop_aborts_a_token_wait_at_once_with_the_patch() -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    execution, token = _start_waiting_for_token()

    stopped = sfn.stop_execution(executionArn=execution, error="Operator", cause="cancelled")

    described = sfn.describe_execution(executionArn=execution)
    assert described["status"] == "ABORTED"
    # upstream stamps its own stop date again when the thread ends, a moment later
    assert abs((described["stopDate"] - stopped["stopDate"]).total_seconds()) < 1
    history = _aborted_history(execution)  # the waiting thread was released and ended the execution
    assert "TaskSucceeded" not in history and "TaskTimedOut" not in history and "TaskFailed" not in history
    assert "PassStateEntered" not in history  # nothing after the waiting state ran
    with pytest.raises(ClientError):  # the token is no longer awaited
        sfn.send_task_success(taskToken=token, output="{}")


@pytest.mark.usefixtures("patched")
def test_stop_during_a_retry_backoff_aborts_at_once_with_the_patch() -> None:
    _upload_code()
    role = boto3.client("iam", region_name=REGION).create_role(RoleName="fn", AssumeRolePolicyDocument="{}")
    function = boto3.client("lambda", region_name=REGION).create_function(
        FunctionName="always-fails",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler=f"{__name__}.always_fails",
        Code={"S3Bucket": CODE_BUCKET, "S3Key": CODE_KEY},
    )["FunctionArn"]
    definition = {
        "StartAt": "Call",
        "States": {
            "Call": {
                "Type": "Task",
                "Resource": function,
                "Retry": [{"ErrorEquals": ["StillBroken"], "IntervalSeconds": 600, "MaxAttempts": 3}],
                "Next": "After",
            },
            "After": {"Type": "Pass", "End": True},
        },
    }
    sfn = boto3.client("stepfunctions", region_name=REGION)
    FAILURES.clear()
    execution = sfn.start_execution(stateMachineArn=_create_machine("backs-off", definition))["executionArn"]
    wait_until(lambda: FAILURES or None, timeout=10, what="the first attempt")

    sfn.stop_execution(executionArn=execution)

    assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
    history = _aborted_history(execution)  # the 600 s backoff sleep was cut short
    assert "PassStateEntered" not in history
    assert len(FAILURES) == 1  # no further attempt after the stop


@pytest.mark.usefixtures("patched")
def test_stop_during_a_wait_state_aborts_at_once_with_the_patch() -> None:
    definition = {
        "StartAt": "Nap",
        "States": {"Nap": {"Type": "Wait", "Seconds": 3600, "Next": "After"}, "After": {"Type": "Pass", "End": True}},
    }
    sfn = boto3.client("stepfunctions", region_name=REGION)
    execution = sfn.start_execution(stateMachineArn=_create_machine("naps", definition))["executionArn"]
    wait_until(
        lambda: any(e["type"] == "WaitStateEntered" for e in _history(execution)) or None,
        timeout=10,
        what="the Wait state",
    )

    sfn.stop_execution(executionArn=execution)

    assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
    assert "PassStateEntered" not in _aborted_history(execution)


# --- parse_definitions_once -------------------------------------------------------------------------------------

RETRIED_RUNS: dict[str, int] = {}


def flaky_per_run(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Fails the first call of each run (`event["run"]`), so every execution needs its own Retry attempt."""
    calls = RETRIED_RUNS[event["run"]] = RETRIED_RUNS.get(event["run"], 0) + 1
    if calls == 1:
        raise TransientGlitch(f"first call of {event['run']} fails")
    return {"run": event["run"], "calls": calls}


def _retry_definition() -> str:
    return json.dumps(
        {
            "StartAt": "Work",
            "States": {
                "Work": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "x", "Payload.$": "$"},
                    "Retry": [{"ErrorEquals": ["TransientGlitch"], "IntervalSeconds": 1, "MaxAttempts": 1}],
                    "End": True,
                }
            },
        }
    )


def _heap_keys_drawn(program: Any) -> list[bool]:
    return [
        component.__dict__.get("_EvalComponent__heap_key") is not None
        for component in moto_patches.evaluation_components(program)
    ]


@pytest.mark.usefixtures("unpatched")
def test_every_parse_builds_a_new_program_with_lazy_heap_keys_without_the_patch() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    first, _ = AmazonStateLanguageParser.parse(_retry_definition())
    second, _ = AmazonStateLanguageParser.parse(_retry_definition())

    assert first is not second
    drawn = _heap_keys_drawn(first)
    assert drawn and not any(drawn)  # drawn on first read, by whichever execution reads first


@pytest.mark.usefixtures("patched")
def test_a_definition_is_parsed_once_with_its_heap_keys_drawn_with_the_patch() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser, ASLParserException

    first, tree = AmazonStateLanguageParser.parse(_retry_definition())
    second, same_tree = AmazonStateLanguageParser.parse(_retry_definition())

    assert first is second and tree is same_tree
    assert all(_heap_keys_drawn(first))
    for _ in range(2):  # an invalid definition is refused every time, never cached
        with pytest.raises(ASLParserException):
            AmazonStateLanguageParser.parse('{"StartAt": "Nowhere", "States": {"X": {"Type": "Nope"}}}')


@pytest.mark.usefixtures("patched")
def test_executions_sharing_a_parsed_program_keep_their_own_retry_state_with_the_patch() -> None:
    # Given a deployed machine whose Task fails once per run and is retried once
    _upload_code()
    RETRIED_RUNS.clear()
    function = _function()
    function["Properties"]["Handler"] = f"{__name__}.flaky_per_run"
    definition = json.loads(_retry_definition())
    definition["States"]["Work"]["Parameters"]["FunctionName"] = "${FunctionArn}"
    machine = {
        "Type": "AWS::StepFunctions::StateMachine",
        "Properties": {
            "DefinitionString": {"Fn::Sub": [json.dumps(definition), {"FunctionArn": {"Fn::GetAtt": ["Fn", "Arn"]}}]},
            "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
        },
    }
    ids = _deploy({"Fn": function, "Machine": machine})
    sfn = boto3.client("stepfunctions", region_name=REGION)

    # When three executions of it run at once (one program, parsed when the machine was created)
    runs = ["a", "b", "c"]
    arns = [
        sfn.start_execution(stateMachineArn=ids["Machine"], input=json.dumps({"run": run}))["executionArn"]
        for run in runs
    ]

    # Then each used its own single retry: a shared attempt counter would exhaust MaxAttempts 1 for the others
    finished = [_finished(arn) for arn in arns]
    assert [f["status"] for f in finished] == ["SUCCEEDED"] * 3, finished
    assert [json.loads(f["output"])["Payload"] for f in finished] == [{"run": r, "calls": 2} for r in runs]


# --- resolve_backends_once --------------------------------------------------------------------------------------


def _count_module_listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from moto import backends

    listed: list[str] = []
    original = backends.list_of_moto_modules

    def counting() -> Any:
        listed.append("listed")
        return original()

    monkeypatch.setattr(backends, "list_of_moto_modules", counting)
    return listed


def _dispatcher() -> Any:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    return DomainDispatcherApplication(create_backend_app)


@pytest.mark.usefixtures("unpatched")
def test_the_server_lists_its_modules_for_every_request_without_the_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _count_module_listings(monkeypatch)
    dispatcher = _dispatcher()

    found = [dispatcher.get_backend_for_host("dynamodb.us-east-1.amazonaws.com") for _ in range(3)]

    assert found == ["dynamodb"] * 3
    assert len(listed) == 3


@pytest.mark.usefixtures("patched")
def test_the_server_resolves_a_host_once_with_the_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _count_module_listings(monkeypatch)
    dispatcher = _dispatcher()

    found = [dispatcher.get_backend_for_host(host) for host in ["dynamodb.us-east-1.amazonaws.com"] * 3 + ["s3"]]

    assert found == ["dynamodb"] * 3 + ["s3"]
    assert len(listed) == 2  # once per host


# --- DynamoDB: each operation is atomic ----------------------------------------------------------------------


def _keyed_table(name: str) -> Any:
    """A table keyed by `pk` (partition) and `sk` (sort), both strings."""
    return boto3.resource("dynamodb", region_name=REGION).create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _counter_table() -> Any:
    dynamodb = boto3.resource("dynamodb", region_name=REGION)
    table = dynamodb.create_table(
        TableName="counters",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    table.put_item(Item={"pk": "job", "n": 0})
    return table


def test_an_update_reads_and_writes_its_item_without_a_lock_without_the_patch() -> None:
    import inspect

    from moto.dynamodb.models import DynamoDBBackend

    moto_patches.unserialize_dynamodb_operations()
    source = inspect.getsource(DynamoDBBackend.update_item)
    assert "lock" not in source.lower()  # read, apply, write back: concurrent ADDs can lose one another


def test_concurrent_adds_to_one_item_all_count_with_the_patch(patched: None) -> None:
    import threading

    from moto.dynamodb.models import DynamoDBBackend

    assert DynamoDBBackend.update_item.__name__ == "update_item"
    assert DynamoDBBackend.update_item is not moto_patches._original(DynamoDBBackend, "update_item")
    table = _counter_table()
    threads, adds = 8, 40

    def add() -> None:
        for _ in range(adds):
            table.update_item(Key={"pk": "job"}, UpdateExpression="ADD n :one", ExpressionAttributeValues={":one": 1})

    workers = [threading.Thread(target=add) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert table.get_item(Key={"pk": "job"})["Item"]["n"] == threads * adds


def test_every_update_parses_its_expression_again_without_the_patch(unpatched: None) -> None:
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    assert UpdateExpressionParser.make("SET a = :a ADD n :one") is not UpdateExpressionParser.make(
        "SET a = :a ADD n :one"
    )


def test_an_update_expression_is_parsed_once_and_applies_to_each_item_with_the_patch(patched: None) -> None:
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    expression = "SET #s = :s, tags = list_append(if_not_exists(tags, :empty), :tag) ADD n :one"
    assert UpdateExpressionParser.make(expression) is UpdateExpressionParser.make(expression)
    table = _counter_table()
    for pk, status in (("job", "running"), ("other", "queued"), ("job", "done")):
        table.update_item(
            Key={"pk": pk},
            UpdateExpression=expression,
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": status, ":one": 1, ":tag": [status], ":empty": []},
        )
    assert table.get_item(Key={"pk": "job"})["Item"] == {
        "pk": "job",
        "n": 2,
        "status": "done",
        "tags": ["running", "done"],
    }
    assert table.get_item(Key={"pk": "other"})["Item"] == {
        "pk": "other",
        "n": 1,
        "status": "queued",
        "tags": ["queued"],
    }
    for invalid in ("SET = :s", "SET a = :s SET b = :s"):  # unparsable, two SET clauses: refused every time
        for _ in range(2):
            with pytest.raises(ClientError) as raised:
                table.update_item(Key={"pk": "job"}, UpdateExpression=invalid, ExpressionAttributeValues={":s": 1})
            assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert table.get_item(Key={"pk": "job"})["Item"]["status"] == "done"


def test_upstream_copies_the_tree_and_checks_its_paths_on_every_update() -> None:
    """What `parse_update_expressions_once` replaces: the validator's deep copy of the tree and its path check."""
    from moto.dynamodb.parsing import validators

    assert "self.node_to_validate = deepcopy(expression)" in inspect.getsource(validators.Validator.__init__)
    processors = inspect.getsource(moto_patches._original(validators.UpdateExpressionValidator, "get_ast_processors"))
    assert "OverlappingPathsValidator(self.expression_attribute_names)" in processors
    # the key check depends on the table's keys and the names; the function evaluator rewrites function nodes only
    assert (
        "UpdateHashRangeKeyValidator(\n                self.table.table_key_attrs, self.expression_attribute_names"
        in (processors)
    )
    assert digest(validators.UpdateHashRangeKeyValidator) == "18ca06e4b0d82e64", "re-check _keys_checked"
    # the processors walked only where a text has their nodes (`_WALKED_IF`), and what makes a `NoneExistingPath`
    pinned = {
        validators.UpdateExpressionFunctionEvaluator._processing_map: "0ab0dcd37df331e9",
        validators.ExecuteOperations._processing_map: "966210456c10a17c",
        validators.TypeMismatchValidator._processing_map: "7722429047ab2478",
        validators.EmptyStringKeyValueValidator._processing_map: "9fa90e9624b7280a",
        validators.NoneExistingPathChecker._processing_map: "025dae2b05d80382",
        validators.ExpressionAttributeResolvingProcessor: "ff135e4044270ef0",
    }
    for upstream, pin in pinned.items():
        assert digest(upstream) == pin, f"re-check _WALKED_IF: {upstream.__qualname__} changed"


def test_a_trees_copy_from_its_pickle_is_the_deep_copy_upstream_makes(patched: None) -> None:
    import copy

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    for text in (
        "SET #s = :s, a.b[2].c = if_not_exists(a.b[2].c, :z) + :one ADD n :one, tags :t REMOVE x, y[0] DELETE d :d",
        "SET l = list_append(:a, l)",
    ):
        tree = UpdateExpressionParser.make(text)
        copied, upstream = validators.deepcopy(tree), copy.deepcopy(tree)

        def shape(node: Any) -> Any:
            if not hasattr(node, "children"):
                return repr(node)
            return (type(node).__name__, [shape(c) for c in node.children or []])

        assert copied is not tree and shape(copied) == shape(upstream) == shape(tree)
        copied.children[0] = None  # the copy is the validator's own: the cached tree is untouched
        assert tree.children[0] is not None


def test_overlapping_paths_are_refused_every_time_with_their_names_with_the_patch(patched: None) -> None:
    table = _counter_table()
    refused = (
        ("SET a = :v, a.b = :v", {}),  # a path and a path below it
        ("SET #x = :v, #y = :v", {"#x": "same", "#y": "same"}),  # two names for one attribute
    )
    for text, names in refused:
        for _ in range(2):
            with pytest.raises(ClientError) as raised:
                table.update_item(
                    Key={"pk": "job"},
                    UpdateExpression=text,
                    ExpressionAttributeValues={":v": 1},
                    **({"ExpressionAttributeNames": names} if names else {}),
                )
            assert raised.value.response["Error"]["Code"] == "ValidationException"
            assert "overlap" in raised.value.response["Error"]["Message"].lower()
    # the same text with names that do not overlap is applied
    table.update_item(
        Key={"pk": "job"},
        UpdateExpression="SET #x = :v, #y = :v",
        ExpressionAttributeNames={"#x": "first", "#y": "second"},
        ExpressionAttributeValues={":v": 1},
    )
    assert table.get_item(Key={"pk": "job"})["Item"] == {"pk": "job", "n": 0, "first": 1, "second": 1}


def test_key_attributes_are_refused_every_time_and_functions_evaluated_with_the_patch(patched: None) -> None:
    table = _keyed_table("keyed")
    key = {"pk": "job", "sk": "meta"}
    table.put_item(Item={**key, "l": [1]})
    for text, names in (("SET sk = :v", {}), ("SET #k = :v", {"#k": "pk"}), ("SET a = :v, #k = :v", {"#k": "sk"})):
        for _ in range(2):
            with pytest.raises(ClientError) as raised:
                table.update_item(
                    Key=key,
                    UpdateExpression=text,
                    ExpressionAttributeValues={":v": "x"},
                    **({"ExpressionAttributeNames": names} if names else {}),
                )
            assert "key" in raised.value.response["Error"]["Message"].lower()
    # the same text naming an attribute that is no key is applied; so are the functions of a text that calls them
    table.update_item(
        Key=key,
        UpdateExpression="SET #k = :v",
        ExpressionAttributeNames={"#k": "a"},
        ExpressionAttributeValues={":v": "x"},
    )
    table.update_item(
        Key=key,
        UpdateExpression="SET l = list_append(l, :more), c = if_not_exists(c, :zero) + :one",
        ExpressionAttributeValues={":more": [2], ":zero": 0, ":one": 1},
    )
    table.update_item(
        Key=key,
        UpdateExpression="SET c = if_not_exists(c, :zero) + :one",
        ExpressionAttributeValues={":zero": 0, ":one": 1},
    )
    assert table.get_item(Key=key)["Item"] == {**key, "a": "x", "l": [1, 2], "c": 2}


_UPDATES: tuple[tuple[str, dict[str, str], dict[str, Any]], ...] = (  # (update, names, values), applied in order
    ("ADD n :one", {}, {":one": 1}),
    ("ADD #c :one SET newest = :s, #t = :t REMOVE stale_at", {"#c": "at7", "#t": "ttl"}, {":one": 1, ":s": 7, ":t": 9}),
    ("SET n = n + :one, m = :a - :b", {}, {":one": 1, ":a": 5, ":b": 7}),
    ("SET c = if_not_exists(c, :zero) + :one, l = list_append(l, :more)", {}, {":zero": 0, ":one": 1, ":more": [4]}),
    ("SET n_copy = n, #g = :g", {"#g": "gk"}, {":g": "index"}),
    ("SET n_copy = nowhere_attr", {}, {}),  # a path in a value the item does not have
    ("SET nowhere_attr.b = :v", {}, {":v": 1}),  # a path below one the item does not have
    ("SET gk = :number", {}, {":number": 3}),  # an index key of the wrong type
    ("SET gk = :empty", {}, {":empty": ""}),  # an index key set empty
    ("SET n = :s + :one", {}, {":s": "text", ":one": 1}),  # an operand of the wrong type
    ("ADD tags :t", {}, {":t": {"x", "y"}}),
    ("DELETE tags :gone", {}, {":gone": {"x"}}),
    ("REMOVE l[0], n_copy", {}, {}),
    ("SET m = :undefined", {}, {}),  # a value the request does not define
)


def _update_outcomes(table_name: str) -> list[Any]:
    """Each update of `_UPDATES` twice (the second time from the caches), with the item or the error after each."""
    table = boto3.resource("dynamodb", region_name=REGION).create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "gk", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-gk",
                "KeySchema": [{"AttributeName": "gk", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    table.put_item(Item={"pk": "job", "n": 0, "l": [1, 2, 3], "stale_at": "x"})
    outcomes: list[Any] = []
    for text, names, values in (*_UPDATES, *_UPDATES):
        try:
            table.update_item(
                Key={"pk": "job"},
                UpdateExpression=text,
                **({"ExpressionAttributeNames": names} if names else {}),
                **({"ExpressionAttributeValues": values} if values else {}),
            )
            outcomes.append(table.get_item(Key={"pk": "job"})["Item"])
        except ClientError as error:
            outcomes.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
    return outcomes


def test_updates_walked_only_where_their_text_needs_it_end_as_upstreams_do(patched: None) -> None:
    from local.moto_patches.dynamodb import _WALKED_IF

    # a counter's text has none of the nodes those processors change or check: they do not walk its tree
    assert not any(needed("ADD n :one") for needed in _WALKED_IF.values())
    assert all(needed("SET c = if_not_exists(c, :zero) + :one") for needed in _WALKED_IF.values())

    walked_if_needed = _update_outcomes("walked-if-needed")
    moto_patches.parse_update_expressions_every_time()
    try:
        upstream = _update_outcomes("walked-always")
    finally:
        moto_patches.parse_update_expressions_once()
    assert walked_if_needed == upstream
    errors = [outcome[0] for outcome in upstream[: len(_UPDATES)] if isinstance(outcome, tuple)]
    assert errors == ["ValidationException"] * 6  # every refusal above is refused by both, with the same message


# --- DynamoDB: a condition expression's text tokenized once ------------------------------------------------------

_CONDITIONS = (  # (condition, names, values): evaluated against the item {"pk": "job", "n": 0} then as updated
    ("attribute_exists(pk) AND n = :zero", {}, {":zero": 0}),
    ("#s IN (:a, :b) OR attribute_not_exists(#s)", {"#s": "status"}, {":a": "queued", ":b": "running"}),
    ("NOT (n > :ten) AND begins_with(pk, :j)", {}, {":ten": 10, ":j": "jo"}),
    ("n <> :zero", {}, {":zero": 0}),  # fails: n is 0
    ("size(pk) >= :three AND n BETWEEN :zero AND :ten", {}, {":three": 3, ":zero": 0, ":ten": 10}),
    ("#s = :a", {"#s": "status"}, {":a": "queued"}),  # fails: no status yet
)


def _conditional_outcomes() -> list[str]:
    """Each condition of `_CONDITIONS` twice (the second time from the cache), as an update adding 1 to `n`."""
    table = _counter_table()
    outcomes = []
    for condition, names, values in (*_CONDITIONS, *_CONDITIONS):
        try:
            table.update_item(
                Key={"pk": "job"},
                UpdateExpression="ADD n :one",
                ConditionExpression=condition,
                ExpressionAttributeValues={**values, ":one": 1},
                **({"ExpressionAttributeNames": names} if names else {}),
            )
            outcomes.append("applied")
        except ClientError as error:
            outcomes.append(error.response["Error"]["Code"])
    for invalid in ("n = = :one", "n ~ :one"):  # refused every time (moto raises ValueError for both)
        for _ in range(2):
            with pytest.raises((ClientError, ValueError)):
                table.update_item(
                    Key={"pk": "job"},
                    UpdateExpression="ADD n :one",
                    ConditionExpression=invalid,
                    ExpressionAttributeValues={":one": 1},
                )
    return outcomes


_OUTCOMES = [  # n: 0 → 1 → 2 → 3 (the NOT holds while n <= 10), then the second round
    *["applied", "applied", "applied", "applied", "applied", "ConditionalCheckFailedException"],
    *["ConditionalCheckFailedException", "applied", "applied", "applied", "applied", "ConditionalCheckFailedException"],
]


def test_a_condition_is_tokenized_on_every_request_without_the_patch(unpatched: None) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    assert "self._lex_one_node(remaining_expression)" in inspect.getsource(
        ConditionExpressionParser._lex_condition_expression
    )
    assert _conditional_outcomes() == _OUTCOMES


def test_a_condition_is_tokenized_once_and_evaluates_as_upstream_with_the_patch(patched: None) -> None:
    from local.moto_patches import dynamodb

    assert _conditional_outcomes() == _OUTCOMES
    assert dynamodb._condition_tokens.cache_info().hits >= len(_CONDITIONS)


# --- DynamoDB: an expression tree's traversers read their processing map once ------------------------------------


def test_a_traverser_builds_its_processing_map_per_node_without_the_patch(unpatched: None) -> None:
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser

    assert "self._processing_map()" in inspect.getsource(DepthFirstTraverser.nodes_to_be_processed)
    assert "self._processing_map()" in inspect.getsource(DepthFirstTraverser.process)


def test_a_traverser_builds_its_map_once_and_processes_as_upstream_with_the_patch(patched: None) -> None:
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser

    class Counting(DepthFirstTraverser):  # type: ignore[misc]
        built = 0

        def _processing_map(self) -> dict[type, Any]:
            Counting.built += 1
            return {int: lambda node: node + 1, str: lambda node: node.upper()}

    counting = Counting()
    assert counting.nodes_to_be_processed() == (int, str)
    assert [counting.process(v) for v in (1, "a", 2.5, 3)] == [2, "A", None, 4]
    assert Counting.built == 1
    table = _counter_table()  # and an update still runs every processor
    table.update_item(
        Key={"pk": "job"},
        UpdateExpression="SET #s = if_not_exists(#s, :zero) + :one, tags = list_append(:t, :t) ADD n :one",
        ExpressionAttributeNames={"#s": "score"},
        ExpressionAttributeValues={":zero": 10, ":one": 1, ":t": ["x"]},
    )
    assert table.get_item(Key={"pk": "job"})["Item"] == {"pk": "job", "n": 1, "score": 11, "tags": ["x", "x"]}
    with pytest.raises(ClientError, match="key"):  # UpdateHashRangeKeyValidator still runs
        table.update_item(Key={"pk": "job"}, UpdateExpression="SET pk = :v", ExpressionAttributeValues={":v": "x"})


# --- Step Functions: a Map run's executions ----------------------------------------------------------------

MAP_RUN = f"arn:aws:states:{REGION}:123456789012:mapRun:machine/run:0f6c1a9e-2d4b-4f7e-9a3c-5b8e7d6f1c2a"


def test_listing_a_map_runs_executions_is_a_server_error_without_the_patch(unpatched: None) -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    with pytest.raises(TypeError):  # the server answers 500 (and prints the traceback)
        sfn.list_executions(mapRunArn=MAP_RUN)


def test_listing_a_map_runs_executions_is_resource_not_found_with_the_patch(patched: None) -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    with pytest.raises(ClientError) as raised:
        sfn.list_executions(mapRunArn=MAP_RUN)
    assert raised.value.response["Error"]["Code"] == "ResourceNotFound"


# --- Step Functions: JSONPaths parsed once, one client per service -------------------------------------------


def test_every_evaluation_parses_its_json_path_again_without_the_patch(unpatched: None) -> None:
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    assert json_path.parse("$.steps.parse") is not json_path.parse("$.steps.parse")
    assert result_path.parse("$.steps.parse") is not result_path.parse("$.steps.parse")


def test_a_json_path_is_parsed_once_and_still_reads_and_writes_with_the_patch(patched: None) -> None:
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    assert json_path.parse("$.steps.parse") is json_path.parse("$.steps.parse")
    assert result_path.parse("$.steps") is result_path.parse("$.steps")
    assert json_path.extract_json("$.steps.parse", {"steps": {"parse": {"key": "a"}}}) == {"key": "a"}
    assert json_path.extract_json("$.steps.parse", {"steps": {"parse": {"key": "b"}}}) == {"key": "b"}
    first, second = {"job": 1}, {"job": 2}
    result_path.parse("$.steps").update_or_create(first, {"x": 1})
    result_path.parse("$.steps").update_or_create(second, {"x": 2})
    assert first == {"job": 1, "steps": {"x": 1}} and second == {"job": 2, "steps": {"x": 2}}


def test_upstream_boto_client_for_is_the_one_the_shared_client_reproduces() -> None:
    from moto.stepfunctions.parser.asl.utils import boto_client

    # `_shared_boto_client` builds the client as this function does (credentials, endpoint, timeouts, no retries)
    assert digest(boto_client.boto_client_for) == "1f44dc2ac8aa2179", "boto_client_for changed upstream: re-check"


def test_every_task_builds_a_new_client_without_the_patch(unpatched: None) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    assert lambda_eval_utils.boto_client_for(REGION, "lambda") is not lambda_eval_utils.boto_client_for(
        REGION, "lambda"
    )


def test_tasks_share_one_client_per_service_with_the_patch(patched: None) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_aws_sdk

    client = lambda_eval_utils.boto_client_for(REGION, "lambda")
    assert lambda_eval_utils.boto_client_for(REGION, "lambda") is client
    assert state_task_service_aws_sdk.boto_client_for(REGION, "lambda") is client
    assert state_task_service_aws_sdk.boto_client_for(REGION, "s3") is not client
    assert client.meta.config.retries["total_max_attempts"] == 1  # as upstream's: the interpreter retries, not boto


# --- SQS: a receive reads each queue's retention once per message, not all its attributes ------------------


def _queue_of(messages: int, retention_seconds: int = 345600) -> tuple[Any, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="intake", Attributes={"MessageRetentionPeriod": str(retention_seconds)})[
        "QueueUrl"
    ]
    for n in range(messages):
        sqs.send_message(QueueUrl=url, MessageBody=str(n))
    return sqs, url


def _attribute_reads_during(monkeypatch: pytest.MonkeyPatch, receive: Any) -> int:
    from moto.sqs.models import SQSBackend

    reads = 0
    original = SQSBackend.get_queue_attributes

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQSBackend, "get_queue_attributes", counted)
    receive()
    return reads


def test_upstream_retention_check_is_the_one_the_patch_reproduces() -> None:
    from moto.sqs.models import SQSBackend

    upstream = moto_patches._original(SQSBackend, "is_message_valid_based_on_retention_period")
    assert digest(upstream) == "9c430561cf6d7cb4", "the retention check changed upstream: re-check the patch"


def test_a_receive_computes_all_queue_attributes_per_message_without_the_patch(
    unpatched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs, url = _queue_of(30)
    reads = _attribute_reads_during(monkeypatch, lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10))
    assert reads >= 10  # each walks every message of the queue three times: quadratic in the backlog


def test_a_receive_checks_retention_without_reading_attributes_with_the_patch(
    patched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.sqs.models import sqs_backends

    sqs, url = _queue_of(30, retention_seconds=60)
    got: list[Any] = []
    reads = _attribute_reads_during(
        monkeypatch, lambda: got.extend(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"])
    )
    assert reads == 0 and len(got) == 10
    # a message older than the queue's retention period is still not delivered
    queue = sqs_backends["123456789012"][REGION].get_queue("intake")
    for message in queue._messages:
        message.sent_timestamp -= 120_000
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []


# --- SQS: a queue's attributes are computed when read ----------------------------------------------------------


def test_upstream_queue_attributes_are_the_ones_the_patch_reproduces() -> None:
    from moto.sqs.models import Queue

    upstream = moto_patches._original(Queue, "attributes")
    assert digest(upstream.fget) == "ddf03540564891aa", "Queue.attributes changed upstream: re-check the patch"


def _queues_of_every_kind(sqs: Any) -> list[str]:
    dead = sqs.create_queue(QueueName="dead")["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 5})
    policy = json.dumps({"Version": "2012-10-17", "Statement": []})
    return [
        dead,
        sqs.create_queue(QueueName="intake", Attributes={"RedrivePolicy": redrive, "Policy": policy})["QueueUrl"],
        sqs.create_queue(
            QueueName="ordered.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        )["QueueUrl"],
        sqs.create_queue(QueueName="sealed", Attributes={"KmsMasterKeyId": "alias/aws/sqs"})["QueueUrl"],
    ]


def test_queue_attributes_read_one_by_one_are_upstreams(patched: None) -> None:
    from moto.sqs.models import Queue, sqs_backends

    sqs = boto3.client("sqs", region_name=REGION)
    urls = _queues_of_every_kind(sqs)
    sqs.send_message(QueueUrl=urls[1], MessageBody="waiting")
    upstream = moto_patches._original(Queue, "attributes").fget
    for url in urls:
        queue = sqs_backends["123456789012"][REGION].get_queue(url.rsplit("/", 1)[-1])
        assert dict(queue.attributes) == upstream(queue)
    everything = sqs.get_queue_attributes(QueueUrl=urls[1], AttributeNames=["All"])["Attributes"]
    assert (
        everything["ApproximateNumberOfMessages"] == "1"
        and json.loads(everything["RedrivePolicy"])["maxReceiveCount"] == 5
    )
    fifo = urls[2]
    sqs.send_message(QueueUrl=fifo, MessageBody="once", MessageGroupId="g")
    sqs.send_message(QueueUrl=fifo, MessageBody="once", MessageGroupId="g")  # deduplicated by its content
    assert sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"] == {
        "ApproximateNumberOfMessages": "1"
    }


def _message_checks_during(monkeypatch: pytest.MonkeyPatch, action: Any) -> int:
    from moto.sqs.models import Message

    checks = 0
    original = Message.visible

    def counted(self: Any) -> bool:
        nonlocal checks
        checks += 1
        return bool(original.fget(self))

    monkeypatch.setattr(Message, "visible", property(counted))
    action()
    return checks


def test_a_send_walks_the_queues_messages_without_the_patch(unpatched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    sqs, url = _queue_of(50)
    checks = _message_checks_during(monkeypatch, lambda: sqs.send_message(QueueUrl=url, MessageBody="one more"))
    assert checks >= 100  # every attribute computed to read one flag: linear in the backlog, per send


def test_a_send_walks_no_message_with_the_patch(patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    sqs, url = _queue_of(50)
    checks = _message_checks_during(monkeypatch, lambda: sqs.send_message(QueueUrl=url, MessageBody="one more"))
    assert checks == 0
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"] == {
        "ApproximateNumberOfMessages": "51"
    }


# --- moto server: a request's action looked up on its response class ----------------------------------------


def test_upstream_action_lookup_is_the_one_the_patch_answers() -> None:
    from moto.core import responses, utils

    assert digest(utils.method_names_from_class) == "9dbac89d082b655f", (
        "method_names_from_class changed upstream: re-check"
    )
    assert digest(responses.BaseResponse.call_action) == "34a17a4a36ddf8af", (
        "call_action changed upstream: re-check the patch"
    )


def test_an_action_is_a_function_of_the_response_class_as_upstream_lists_them(patched: None) -> None:
    import moto.core.responses
    from moto.core.utils import method_names_from_class
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.responses import S3Response
    from moto.sqs.responses import SQSResponse
    from moto.stepfunctions.responses import StepFunctionResponse

    for response_class in (DynamoHandler, SQSResponse, S3Response, StepFunctionResponse):
        listed = set(method_names_from_class(response_class))
        answers = moto.core.responses.method_names_from_class(response_class)
        names = {name for name in dir(response_class) if not name.startswith("__")} | {"not_an_action", "_"}
        assert {name for name in names if name in answers} == {name for name in names if name in listed}
        assert len(listed & names) > 10  # the classes' actions were among the names asked about
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="answered")["QueueUrl"]
    assert sqs.send_message(QueueUrl=url, MessageBody="found")["MessageId"]


# --- create_email_identities -------------------------------------------------------------------------------


def _send(source: str) -> str:
    sesv2 = boto3.client("sesv2", region_name=REGION)
    sent = sesv2.send_email(
        FromEmailAddress=source,
        Destination={"ToAddresses": ["vendor@example.com"]},
        Content={"Simple": {"Subject": {"Data": "Dispute"}, "Body": {"Text": {"Data": "We dispute line 1."}}}},
    )
    return str(sent["MessageId"])


SENDER = {"Sender": {"Type": "AWS::SES::EmailIdentity", "Properties": {"EmailIdentity": "notices@example.com"}}}


@pytest.mark.usefixtures("unpatched")
def test_cfn_email_identities_are_skipped_and_sends_refused_without_the_patch() -> None:
    _deploy(SENDER)

    assert boto3.client("sesv2", region_name=REGION).list_email_identities()["EmailIdentities"] == []
    with pytest.raises(ClientError, match="MessageRejected"):
        _send("notices@example.com")


@pytest.mark.usefixtures("patched")
def test_cfn_email_identities_exist_refs_name_them_and_messages_are_kept_with_the_patch() -> None:
    from moto.ses.models import ses_backends

    refs = _deploy(SENDER)

    assert refs["Sender"] == "notices@example.com"
    identities = boto3.client("sesv2", region_name=REGION).list_email_identities()["EmailIdentities"]
    assert [i["IdentityName"] for i in identities] == ["notices@example.com"]
    message_id = _send("notices@example.com")
    (message,) = ses_backends["123456789012"][REGION].sent_messages
    assert message.id == message_id and message.destinations["ToAddresses"] == ["vendor@example.com"]


# --- keep_iteration_error_names ----------------------------------------------------------------------------


def _map_whose_iteration_times_out() -> str:
    """A Map whose one iteration waits for a task token that never comes (`TimeoutSeconds` 1, no Catch inside), and
    a Catch of `States.Timeout` around the Map: on AWS the Map fails with the iteration's `States.Timeout`."""
    queue = boto3.client("sqs", region_name=REGION).create_queue(QueueName="tokens")["QueueUrl"]
    wait = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
        "TimeoutSeconds": 1,
        "End": True,
    }
    definition = {
        "StartAt": "Items",
        "States": {
            "Items": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Wait", "States": {"Wait": wait}},
                "Catch": [{"ErrorEquals": ["States.Timeout"], "Next": "Timed out", "ResultPath": "$.failure"}],
                "End": True,
            },
            "Timed out": {"Type": "Pass", "End": True},
        },
    }
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn: str = sfn.create_state_machine(
        name="iterations", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/sfn"
    )["stateMachineArn"]
    return sfn.start_execution(stateMachineArn=arn, input=json.dumps({"items": [1]}))["executionArn"]


@pytest.mark.usefixtures("unpatched")
def test_an_iteration_that_times_out_fails_the_map_with_a_runtime_error_without_the_patch() -> None:
    finished = _finished(_map_whose_iteration_times_out())

    assert (finished["status"], finished["error"]) == ("FAILED", "States.Runtime")
    assert "Custom Error Names MUST NOT begin with the prefix 'States.'" in finished["cause"]


@pytest.mark.usefixtures("patched")
def test_an_iteration_that_times_out_fails_the_map_with_its_timeout_with_the_patch() -> None:
    finished = _finished(_map_whose_iteration_times_out())

    assert finished["status"] == "SUCCEEDED"  # the Catch of States.Timeout around the Map matched
    assert json.loads(finished["output"])["failure"]["Error"] == "States.Timeout"


# --- SQS: visibility and delay read a cheap clock -------------------------------------------------------------


def test_sqs_reads_now_through_datetimes_without_the_patch(unpatched: None) -> None:
    import moto.core.utils
    import moto.sqs.models

    assert moto.sqs.models.unix_time_millis is moto.core.utils.unix_time_millis


def test_visibility_timeouts_and_delays_still_hold_with_the_patch(
    patched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import moto.core.utils
    import moto.sqs.models

    from local.moto_patches import sqs as sqs_patches

    assert moto.sqs.models.unix_time_millis is not moto.core.utils.unix_time_millis
    assert abs(moto.sqs.models.unix_time_millis() - moto.core.utils.unix_time_millis()) < 50  # the same epoch ms
    now = [time.time()]
    monkeypatch.setattr(sqs_patches, "time", types.SimpleNamespace(time=lambda: now[0]))  # the clock SQS reads
    sqs, url = _queue_of(1)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=2)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=2)["Messages"]
    assert [m["Body"] for m in first] == ["0"]  # the delayed one is not delivered yet
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attributes["ApproximateNumberOfMessagesNotVisible"], attributes["ApproximateNumberOfMessagesDelayed"]) == (
        "1",
        "1",
    )
    now[0] += 1.5
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []
    now[0] += 1.0
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in again) == ["0", "later"]


# --- backends: looked up without moto's global lock once they exist --------------------------------------------


def _lookup_while_the_backend_lock_is_held(account: str, seconds: float) -> bool:
    """Whether reading `account`'s DynamoDB backends finishes within `seconds` while another thread holds the lock."""
    import threading

    from moto.core.base_backend import backend_lock
    from moto.dynamodb.models import dynamodb_backends

    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with backend_lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    reader = threading.Thread(target=lambda: (dynamodb_backends[account][REGION], done.set()))
    reader.start()
    finished = done.wait(seconds)
    release.set()
    holder.join()
    reader.join()
    return finished


def test_every_backend_lookup_takes_the_global_lock_without_the_patch(unpatched: None) -> None:
    boto3.client("dynamodb", region_name=REGION).list_tables()  # the account's backends exist
    assert not _lookup_while_the_backend_lock_is_held("123456789012", 1)


def test_an_existing_backend_is_read_without_the_lock_and_a_new_one_still_made_with_the_patch(patched: None) -> None:
    from moto.dynamodb.models import dynamodb_backends

    boto3.client("dynamodb", region_name=REGION).list_tables()
    assert _lookup_while_the_backend_lock_is_held("123456789012", 10)
    assert "210987654321" not in dynamodb_backends
    assert dynamodb_backends["210987654321"][REGION].account_id == "210987654321"  # created (under the lock)


# --- DynamoDB: an item operation's answer written as JSON directly ----------------------------------------------


def test_every_item_answer_is_walked_by_its_shape_without_the_patch(unpatched: None) -> None:
    from moto.dynamodb.responses import DynamoResult

    assert DynamoResult.execute_result is moto_patches._original(DynamoResult, "execute_result")


def _exercise_item_operations() -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    _keyed_table("items")
    key = {"pk": {"S": "a"}, "sk": {"S": "1"}}
    item = {
        **key,
        "n": {"N": "1.50"},
        "b": {"B": b"\x00\xffbin"},
        "l": {"L": [{"S": "x"}, {"N": "2"}, {"NULL": True}, {"B": b"\x01"}]},
        "m": {"M": {"flag": {"BOOL": False}, "empty": {"S": ""}, "deep": {"M": {"ns": {"NS": ["1", "2"]}}}}},
        "ss": {"SS": ["a", "b"]},
        "bs": {"BS": [b"a", b"\x02"]},
    }
    dynamodb.put_item(TableName="items", Item=item)
    dynamodb.put_item(TableName="items", Item=item, ReturnValues="ALL_OLD", ReturnConsumedCapacity="TOTAL")
    assert dynamodb.get_item(TableName="items", Key=key, ConsistentRead=True)["Item"]["b"] == {"B": b"\x00\xffbin"}
    dynamodb.get_item(TableName="items", Key={**key, "pk": {"S": "absent"}})
    dynamodb.get_item(TableName="items", Key=key, ProjectionExpression="m.deep, l[3]")
    dynamodb.batch_get_item(
        RequestItems={"items": {"Keys": [key, {**key, "pk": {"S": "absent"}}]}}, ReturnConsumedCapacity="TOTAL"
    )
    for n in range(3):
        dynamodb.put_item(TableName="items", Item={"pk": {"S": "a"}, "sk": {"S": f"2{n}"}})
    page = dynamodb.query(
        TableName="items", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}}, Limit=2
    )
    dynamodb.query(
        TableName="items",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "a"}},
        ExclusiveStartKey=page["LastEvaluatedKey"],
        Select="COUNT",
    )
    dynamodb.scan(TableName="items", FilterExpression="attribute_exists(b)")
    dynamodb.update_item(
        TableName="items",
        Key=key,
        UpdateExpression="ADD c :one SET b2 = :b",
        ExpressionAttributeValues={":one": {"N": "1"}, ":b": {"B": b"\x03"}},
        ReturnValues="ALL_NEW",
    )
    dynamodb.transact_get_items(TransactItems=[{"Get": {"TableName": "items", "Key": key}}])
    dynamodb.delete_item(TableName="items", Key=key, ReturnValues="ALL_OLD")
    with pytest.raises(ClientError) as failed:
        dynamodb.update_item(
            TableName="items",
            Key=key,
            UpdateExpression="SET x = :x",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":x": {"S": "x"}},
        )
    assert failed.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_item_answers_written_directly_equal_upstreams_with_the_patch(
    patched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.responses import DynamoResult

    fast = DynamoResult.execute_result
    assert fast is not moto_patches._original(DynamoResult, "execute_result")
    from moto.core.serialize import ResponseSerializer

    compared: list[str] = []
    walked: list[str] = []
    serialize = ResponseSerializer.serialize
    monkeypatch.setattr(ResponseSerializer, "serialize", lambda self, r: walked.append("walk") or serialize(self, r))

    def both(self: Any, context: Any) -> Any:
        walks = len(walked)
        status, headers, body = fast(self, context)
        if context.operation_model.name in moto_patches.ITEM_OPERATIONS:
            assert len(walked) == walks, f"{context.operation_model.name} was walked by its shape"
        up_status, up_headers, up_body = moto_patches._original(DynamoResult, "execute_result")(self, context)
        assert (status, headers["Content-Type"], json.loads(body)) == (
            up_status,
            up_headers["Content-Type"],
            json.loads(up_body),
        ), context.operation_model.name
        compared.append(context.operation_model.name)
        return status, headers, body

    DynamoResult.execute_result = both  # type: ignore[method-assign]  # not monkeypatch: it is undone after `patched`
    try:
        _exercise_item_operations()
    finally:
        DynamoResult.execute_result = fast  # type: ignore[method-assign]
    assert set(compared) >= {
        "PutItem",
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "UpdateItem",
        "TransactGetItems",
        "DeleteItem",
    }


# --- DynamoDB: a set's size summed from its members ------------------------------------------------------------


def test_sizes_of_values_and_what_holds_them_equal_upstreams() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    from local.moto_patches import dynamodb as dynamodb_patches

    values = [
        {"NS": [str(n) for n in range(1000)] + ["-1.5e10", "0.000001"]},
        {"SS": ["a", "héllo", "", "🙂" * 3]},
        {"BS": [b"\x00\xff", b"", "YWJj"]},
        {"L": [{"NS": ["1", "22"]}, {"M": {"k": {"SS": ["x", "yy"]}, "n": {"N": "3.25"}}}, {"BOOL": True}]},
        {"M": {"done": {"NS": ["7", "8"]}, "s": {"S": "text"}, "b": {"B": b"\x01"}, "null": {"NULL": True}}},
        {"M": {"deep": {"M": {"list": {"L": [{"S": "é"}, {"N": "-0.5"}, {"BOOL": False}]}}}}},
        {"S": "plain"},
        {"S": "naïve 🙂"},
        {"N": "12345"},
        {"B": b"\x00\x01\x02"},
        {"BOOL": False},
        {"NULL": True},
    ]

    def changed_in_place(size: Any) -> list[int]:
        """Sizes of values measured, then changed where they are (as an update changes an item), measured again."""
        scalar, held = DynamoType({"S": "short"}), DynamoType({"M": {"a": {"S": "x"}, "l": {"L": [{"N": "1"}]}}})
        seen = [size(scalar), size(held)]
        scalar.value = "a good deal longer, ünïcode"
        seen.append(size(scalar))
        scalar.type, scalar.value = "N", "123456789"
        seen.append(size(scalar))
        held.value["a"].value = "yyyyyyyy"
        held.value["l"].value.append(DynamoType({"S": "more"}))
        held.value["new"] = DynamoType({"SS": ["p", "q"]})
        seen.append(size(held))
        return seen

    upstream, before = moto_patches._original(DynamoType, "size"), DynamoType.size
    try:
        dynamodb_patches.size_values_directly()
        assert DynamoType.size is not upstream
        patched = [DynamoType(v).size() for v in values]
        patched_twice = [[t.size(), t.size()] for t in (DynamoType(v) for v in values)]
        patched_changes = changed_in_place(lambda t: t.size())
        dynamodb_patches.size_values_like_upstream()
        assert DynamoType.size is upstream
        assert patched == [DynamoType(v).size() for v in values]
        assert patched_twice == [[n, n] for n in patched]
        assert patched_changes == changed_in_place(lambda t: t.size())
    finally:
        (dynamodb_patches.size_values_like_upstream if before is upstream else dynamodb_patches.size_values_directly)()


# --- DynamoDB: a new item's size checked once ------------------------------------------------------------------


def test_upstream_sizes_a_new_item_once_per_attribute() -> None:
    from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

    # `_item_sized_once` reproduces `Item.__init__` and the check of `LimitedSizeDict.__setitem__`, against the sum
    # `Item.size` gives; if any of them changes upstream, re-check the patch.
    assert digest(moto_patches._original(Item, "__init__")) == "bebd778553426982", "Item.__init__ changed upstream"
    assert digest(LimitedSizeDict.__setitem__) == "7894fedd60a6272d", "LimitedSizeDict changed upstream"
    assert digest(Item.size) == "8d65d4c707f06db0", "Item.size changed upstream"


def test_new_items_sized_once_equal_upstreams_and_are_refused_alike() -> None:
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from local.moto_patches import dynamodb as dynamodb_patches

    key, sort = DynamoType({"S": "JOB#1"}), DynamoType({"S": "META"})
    attributes = {
        **{f"field_{n}": {"S": "x" * n} for n in range(60)},
        "count": {"N": "12"},
        "done": {"NS": ["1", "2", "3"]},
        "nested": {"M": {"a": {"L": [{"S": "b"}, {"BOOL": True}]}, "c": {"NULL": True}}},
        "blob": {"B": b"\x00\x01"},
    }
    # The limit counts names and values: one item just under it and one just over (by a byte of a name).
    base = sum(len(name) + DynamoType(value).size() for name, value in {"pad": {"S": ""}}.items())
    under = {"pad": {"S": "y" * (dynamodb_patches.ITEM_SIZE_LIMIT - base)}}
    over = {"pads": {"S": "y" * (dynamodb_patches.ITEM_SIZE_LIMIT - base)}}
    upstream, before = moto_patches._original(Item, "__init__"), Item.__init__
    try:
        built = {}
        for install in (dynamodb_patches.size_new_items_once, dynamodb_patches.size_new_items_per_attribute):
            install()
            item = Item(key, sort, attributes)
            assert Item(key, sort, under).size() == dynamodb_patches.ITEM_SIZE_LIMIT
            with pytest.raises(ItemSizeTooLarge):
                Item(key, sort, over)
            built[install.__name__] = (item.hash_key, item.range_key, dict(item.attrs), type(item.attrs))
        assert Item.__init__ is upstream
        assert built["size_new_items_once"] == built["size_new_items_per_attribute"]
    finally:
        (
            dynamodb_patches.size_new_items_per_attribute
            if before is upstream
            else dynamodb_patches.size_new_items_once
        )()


# --- DynamoDB: an update copies its item only for a stream -----------------------------------------------------


def test_upstream_copies_the_item_of_every_update_for_its_stream_record_only() -> None:
    import inspect

    from moto.dynamodb.models import DynamoDBBackend

    source = textwrap.dedent(inspect.getsource(moto_patches._original(DynamoDBBackend, "update_item")))
    assert digest(moto_patches._original(DynamoDBBackend, "update_item")) == "f1d5d4acae8ed91c", "re-check the patch"
    # the copy, and its one reader: the stream record (old image, new image)
    assert source.count("orig_item") == 2 and "orig_item = copy.deepcopy(item)" in source
    assert "table.stream_shard.add(orig_item, item)" in source


def test_an_update_copies_its_item_only_when_its_table_has_a_stream(
    patched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import Item

    copies: list[str] = []
    upstream_copy = Item.__deepcopy__

    def counted(self: Any, memo: dict[int, Any]) -> Any:
        copies.append(self.hash_key.value)
        return upstream_copy(self, memo)

    monkeypatch.setattr(Item, "__deepcopy__", counted)
    client = boto3.client("dynamodb", region_name=REGION)
    streamed = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    for name, stream in (("plain", None), ("streamed", streamed)):
        client.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            **({"StreamSpecification": stream} if stream else {}),
        )
        client.put_item(TableName=name, Item={"pk": {"S": name}, "n": {"N": "0"}, "s": {"S": "before"}})

    def copies_of_an_update(name: str, n: int) -> int:
        copies.clear()
        client.update_item(
            TableName=name,
            Key={"pk": {"S": name}},
            UpdateExpression="SET s = :s ADD n :one",
            ExpressionAttributeValues={":s": {"S": f"after {n}"}, ":one": {"N": "1"}},
        )
        return len(copies)

    patched_copies = {name: copies_of_an_update(name, 1) for name in ("plain", "streamed")}
    moto_patches.copy_items_for_every_update()
    try:
        upstream_copies = {name: copies_of_an_update(name, 2) for name in ("plain", "streamed")}
    finally:
        moto_patches.copy_items_for_streams_only()
    assert upstream_copies["plain"] == upstream_copies["streamed"] == patched_copies["streamed"]
    assert patched_copies["plain"] == upstream_copies["plain"] - 1  # the stream record's copy, which has no reader
    for name in ("plain", "streamed"):
        item = client.get_item(TableName=name, Key={"pk": {"S": name}})["Item"]
        assert item == {"pk": {"S": name}, "n": {"N": "2"}, "s": {"S": "after 2"}}
    records = dynamodb_backends["123456789012"][REGION].get_table("streamed").stream_shard.items
    assert [(r.record["dynamodb"]["OldImage"]["s"], r.record["dynamodb"]["NewImage"]["s"]) for r in records[-2:]] == [
        ({"S": "before"}, {"S": "after 1"}),
        ({"S": "after 1"}, {"S": "after 2"}),
    ]


# --- DynamoDB: a transaction operation's condition parsed once -------------------------------------------------


def test_upstream_parses_a_transaction_operations_condition_for_each_of_its_two_checks() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    upstream = moto_patches._original(DynamoDBBackend, "transact_write_items")
    assert digest(upstream) == "0b5c3b73cdccf326", "re-check parse_conditions_once_per_transaction"
    source = textwrap.dedent(inspect.getsource(upstream))
    assert "condition_op = get_filter_expression(" in source  # the transaction's own check...
    assert source.count("condition_expression=condition_expression,") == 3  # ...and put/delete/update's again


def test_a_transaction_parses_each_condition_once_and_decides_as_upstream(patched: None) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    lexed: list[str] = []
    lex = ConditionExpressionParser._lex_condition_expression

    def counted(self: Any) -> Any:
        lexed.append(self.condition_expression)
        return lex(self)

    # Counted for this test only, restored before the fixture reverts the patches (a monkeypatch would put the patched
    # method back after the revert, and the next `apply` would take it for upstream's).
    ConditionExpressionParser._lex_condition_expression = counted  # type: ignore[method-assign]
    try:
        _parse_in_transactions_and_out(lexed)
    finally:
        ConditionExpressionParser._lex_condition_expression = lex  # type: ignore[method-assign]


def _parse_in_transactions_and_out(lexed: list[str]) -> None:
    from local.moto_patches import dynamodb as dynamodb_patches

    client = boto3.client("dynamodb", region_name=REGION)
    _keyed_table("tx")

    def run(n: int) -> tuple[str, list[str]]:
        """A transaction with a conditioned Put, Update, Delete and ConditionCheck: its outcome and what it lexed."""
        lexed.clear()
        key = {"pk": {"S": f"job{n}"}}
        client.put_item(TableName="tx", Item={**key, "sk": {"S": "meta"}, "v": {"N": "1"}})
        client.put_item(TableName="tx", Item={**key, "sk": {"S": "gone"}})
        lexed.clear()
        at_version = {":v": {"N": "1" if n % 2 else "7"}}  # odd: the version holds; even: it does not
        operations = [
            {
                "Put": {
                    "TableName": "tx",
                    "Item": {**key, "sk": {"S": "new"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": "tx",
                    "Key": {**key, "sk": {"S": "meta"}},
                    "UpdateExpression": "SET v = v + :one",
                    "ConditionExpression": "v = :v",
                    "ExpressionAttributeValues": {":one": {"N": "1"}, **at_version},
                }
            },
            {
                "Delete": {
                    "TableName": "tx",
                    "Key": {**key, "sk": {"S": "gone"}},
                    "ConditionExpression": "attribute_exists(sk)",
                }
            },
        ]
        try:
            client.transact_write_items(TransactItems=operations)
        except ClientError as error:
            reasons = [r["Code"] for r in error.response.get("CancellationReasons", [])]
            return f"cancelled {reasons}", list(lexed)
        return "applied", list(lexed)

    patched_runs = [run(1), run(2)]
    dynamodb_patches.parse_conditions_for_every_check()
    try:
        upstream_runs = [run(3), run(4)]
    finally:
        dynamodb_patches.parse_conditions_once_per_transaction()
    texts = ["attribute_not_exists(pk)", "v = :v", "attribute_exists(sk)"]
    # the request's own validation reads each condition too; the transaction's two checks now share one parse
    patched_counts, upstream_counts = Counter(patched_runs[0][1]), Counter(upstream_runs[0][1])
    assert patched_runs[0][0] == upstream_runs[0][0] == "applied"
    assert set(patched_counts) == set(texts) and upstream_counts == {t: patched_counts[t] + 1 for t in texts}
    assert patched_runs[1][0] == upstream_runs[1][0] == "cancelled ['None', 'ConditionalCheckFailed', 'None']"
    for n, outcome in ((1, "applied"), (3, "applied")):
        item = client.get_item(TableName="tx", Key={"pk": {"S": f"job{n}"}, "sk": {"S": "meta"}})["Item"]
        assert item["v"] == {"N": "2"} and outcome == "applied"
    for n in (2, 4):  # nothing of a cancelled transaction is kept
        item = client.get_item(TableName="tx", Key={"pk": {"S": f"job{n}"}, "sk": {"S": "meta"}})["Item"]
        assert item["v"] == {"N": "1"}
        assert "Item" not in client.get_item(TableName="tx", Key={"pk": {"S": f"job{n}"}, "sk": {"S": "new"}})
    # outside a transaction nothing is remembered: updates with the same dictionaries parse as upstream does

    def two_updates(first: int) -> int:
        lexed.clear()
        values = {":one": {"N": "1"}}
        for v in (first, first + 1):
            values[":v"] = {"N": str(v)}
            client.update_item(
                TableName="tx",
                Key={"pk": {"S": "job1"}, "sk": {"S": "meta"}},
                UpdateExpression="SET v = v + :one",
                ConditionExpression="v = :v",
                ExpressionAttributeValues=values,
            )
        return len(lexed)

    patched_parses = two_updates(2)
    dynamodb_patches.parse_conditions_for_every_check()
    try:
        assert patched_parses == two_updates(4) > 0
    finally:
        dynamodb_patches.parse_conditions_once_per_transaction()


# --- list_metrics_once_per_dimension_set, query_exact_dimension_sets ------------------------------------------


STEP = [{"Name": "workflow", "Value": "document-analysis"}, {"Name": "step", "Value": "parse_documents"}]
TENANT = [{"Name": "tenant", "Value": "alpha"}]


def _put_metrics(cloudwatch: Any, points: int) -> None:
    """`points` data points of a two-dimension metric, of a dimensionless one and of the same name by tenant."""
    now = datetime.now(UTC)
    for n in range(points):
        cloudwatch.put_metric_data(
            Namespace="Longhaul",
            MetricData=[
                {"MetricName": "StepDuration", "Value": n, "Unit": "Milliseconds", "Timestamp": now,
                 "Dimensions": STEP if n % 2 else STEP[::-1]},
                {"MetricName": "Allowance", "Value": 1, "Timestamp": now},
                {"MetricName": "Allowance", "Value": 10, "Timestamp": now, "Dimensions": TENANT},
            ],
        )  # fmt: skip


def _listed(cloudwatch: Any, **filters: Any) -> Counter[str]:
    return Counter(m["MetricName"] for m in cloudwatch.list_metrics(Namespace="Longhaul", **filters)["Metrics"])


def _sum(cloudwatch: Any, name: str, dimensions: list[dict[str, str]], period: int = 3600) -> list[float]:
    now = datetime.now(UTC)
    metric = {"Namespace": "Longhaul", "MetricName": name, "Dimensions": dimensions}
    query = {"Id": "q", "MetricStat": {"Metric": metric, "Period": period, "Stat": "Sum"}}
    (result,) = cloudwatch.get_metric_data(
        MetricDataQueries=[query], StartTime=now - timedelta(minutes=30), EndTime=now + timedelta(minutes=1)
    )["MetricDataResults"]
    return [float(v) for v in result["Values"]]


def test_upstream_metric_listing_and_queries_are_the_ones_the_patches_replace() -> None:
    from moto.cloudwatch.models import CloudWatchBackend, MetricDatumBase, are_dimensions_same

    pins = {
        moto_patches._original(CloudWatchBackend, "get_filtered_metrics"): "4659d2c09b7236c6",
        moto_patches._original(CloudWatchBackend, "get_metric_data"): "62d105e6ed6966c9",
        MetricDatumBase.filter: "3e4dec773c431c9b",
        are_dimensions_same: "2f8c7603651e1942",
    }
    for upstream, pin in pins.items():
        assert digest(upstream) == pin, f"re-check the CloudWatch patches: {upstream.__qualname__} changed"


def test_metrics_of_two_or_no_dimensions_are_listed_once_per_data_point_without_the_patch(unpatched: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    _put_metrics(cloudwatch, 6)
    assert _listed(cloudwatch) == {"StepDuration": 6, "Allowance": 6 + 1}  # the one-dimension metric once


def test_a_metric_is_listed_once_per_dimension_set_with_the_patch(patched: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    _put_metrics(cloudwatch, 6)

    assert _listed(cloudwatch) == {"StepDuration": 1, "Allowance": 2}
    assert _listed(cloudwatch, MetricName="Allowance") == {"Allowance": 2}
    assert _listed(cloudwatch, Dimensions=[{"Name": "tenant"}]) == {"Allowance": 1}
    assert _listed(cloudwatch, Dimensions=[{"Name": "step", "Value": "parse_documents"}]) == {"StepDuration": 1}


def test_a_query_without_dimensions_sums_every_dimension_set_of_its_name_without_the_patch(unpatched: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    _put_metrics(cloudwatch, 4)
    assert _sum(cloudwatch, "Allowance", []) == [4 * 1 + 4 * 10]


def test_a_query_reads_its_exact_dimension_set_by_period_with_the_patch(patched: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    _put_metrics(cloudwatch, 4)
    earlier = datetime.now(UTC) - timedelta(minutes=20)
    cloudwatch.put_metric_data(
        Namespace="Longhaul", MetricData=[{"MetricName": "Allowance", "Value": 100, "Timestamp": earlier}]
    )

    assert _sum(cloudwatch, "Allowance", []) == [104]
    assert _sum(cloudwatch, "Allowance", TENANT) == [40]
    assert _sum(cloudwatch, "StepDuration", STEP[::-1]) == [0 + 1 + 2 + 3]  # dimensions in either order
    assert _sum(cloudwatch, "Allowance", [{"Name": "tenant", "Value": "beta"}]) == []
    assert _sum(cloudwatch, "Allowance", [], period=600) == [4, 100]  # the newest period first (the default scan)
    now = datetime.now(UTC)
    math = cloudwatch.get_metric_data(  # a request with an expression: moto's own
        MetricDataQueries=[
            {"Id": "a", "MetricStat": {"Metric": {"Namespace": "Longhaul", "MetricName": "Allowance",
                                                  "Dimensions": TENANT}, "Period": 3600, "Stat": "Sum"}},
            {"Id": "twice", "Expression": "a * 2"},
        ],
        StartTime=now - timedelta(minutes=30), EndTime=now + timedelta(minutes=1),
    )["MetricDataResults"]  # fmt: skip
    assert [r["Id"] for r in math] == ["a", "twice"] and math[0]["Values"] == [40.0]


# --- read_json_templates_as_json ---------------------------------------------------------------------------------

JSON_TEMPLATE = json.dumps(
    {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "on", "DelaySeconds": 0}},
            "Fn": {"Type": "AWS::SQS::Queue", "Properties": {"Tags": [{"Key": "k", "Value": {"Ref": "Queue"}}]}},
        },
        "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["Queue", "Arn"]}}},
    }
)
YAML_TEMPLATE = (
    "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      QueueName: !Sub 'q-${AWS::Region}'\n"
)


def test_the_template_parsers_the_patch_repeats_are_upstreams() -> None:
    from moto.cloudformation.models import ChangeSet, Stack

    assert digest(Stack.__dict__["parse_template"].__func__) == "e43c0d55bf4a6a19", "re-check read_json_templates"
    assert digest(ChangeSet._parse_template) == "86b02225403cdcbf", "re-check read_json_templates"


def test_a_json_template_is_read_as_json_and_a_yaml_one_as_upstream_reads_it(
    unpatched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml
    from moto.cloudformation.models import Stack

    upstream_json, upstream_yaml = Stack.parse_template(JSON_TEMPLATE), Stack.parse_template(YAML_TEMPLATE)
    moto_patches.read_json_templates_as_json()
    try:
        with monkeypatch.context() as m:  # a JSON template never reaches PyYAML's (slow, pure-Python) loader
            m.setattr(yaml, "load", lambda *a, **k: pytest.fail("a JSON template was parsed as YAML"))
            assert Stack.parse_template(JSON_TEMPLATE) == upstream_json == json.loads(JSON_TEMPLATE)
        assert Stack.parse_template(YAML_TEMPLATE) == upstream_yaml  # tags and all, upstream's way
    finally:
        moto_patches.read_templates_as_yaml_first()
    assert Stack.parse_template(JSON_TEMPLATE) == upstream_json  # restored: still a staticmethod


def test_a_stack_and_its_change_set_deploy_from_a_json_template_with_the_patch(patched: None) -> None:
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(StackName="json-first", TemplateBody=JSON_TEMPLATE)
    outputs = cfn.describe_stacks(StackName="json-first")["Stacks"][0]["Outputs"]
    assert outputs[0]["OutputValue"].endswith(":on")
    cfn.create_change_set(StackName="json-first", ChangeSetName="again", TemplateBody=JSON_TEMPLATE)
    assert cfn.describe_change_set(StackName="json-first", ChangeSetName="again")["StackName"] == "json-first"


# --- run_batch_inference_jobs ------------------------------------------------------------------------------------


def _batch_job(records: list[dict[str, Any]]) -> str:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="artifacts")
    body = "\n".join(json.dumps(r) for r in records) + "\n"
    s3.put_object(Bucket="artifacts", Key="work/j/batch/input/records.jsonl", Body=body.encode())
    created = boto3.client("bedrock", region_name=REGION).create_model_invocation_job(
        jobName="longhaul-test",
        roleArn="arn:aws:iam::123456789012:role/batch",
        clientRequestToken="token-1",
        modelId="longhaul-offline-extractive-1",
        inputDataConfig={"s3InputDataConfig": {"s3Uri": "s3://artifacts/work/j/batch/input/"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": "s3://artifacts/work/j/batch/output/"}},
        modelInvocationType="Converse",
    )
    return str(created["jobArn"])


@pytest.mark.usefixtures("unpatched")
def test_moto_has_no_batch_inference_jobs_without_the_patch() -> None:
    from moto.bedrock.responses import BedrockResponse

    assert not hasattr(BedrockResponse, "create_model_invocation_job")
    with pytest.raises(Exception):  # noqa: B017 - moto answers an action it does not know with a generic error
        _batch_job([])


@pytest.mark.usefixtures("patched")
def test_batch_inference_jobs_run_the_offline_model_and_write_where_bedrock_writes_with_the_patch() -> None:
    from local.moto_patches import bedrock as patch
    from longhaul.core.llm import ModelRequest

    delivered: list[dict[str, Any]] = []
    patch.DELIVERY[:] = [delivered.append]
    patch.RUN_AFTER_SECONDS = 0.01
    try:
        request = ModelRequest(task="answer", system="s", prompt="p", context={}, offline=f"{__name__}:_offline")
        records = [{"recordId": "ITEM0000000", "modelInput": {"longhaulRequest": request.model_dump(mode="json")}}]
        records.append({"recordId": "ITEM0000001", "modelInput": {"messages": []}})  # not the offline model's
        arn = _batch_job(records)
        assert _batch_job(records) == arn  # idempotent by its client token
        bedrock = boto3.client("bedrock", region_name=REGION)
        wait_until(lambda: delivered or None, timeout=10, what="the batch to end")
        assert bedrock.get_model_invocation_job(jobIdentifier=arn)["status"] == "Completed"
        (event,) = delivered
        assert (event["source"], event["detail-type"]) == ("aws.bedrock", "Batch Inference Job State Change")
        assert event["detail"]["batchJobName"] == "longhaul-test" and event["detail"]["status"] == "Completed"
        key = f"work/j/batch/output/{arn.rsplit('/', 1)[-1]}/records.jsonl.out"
        body = boto3.client("s3", region_name=REGION).get_object(Bucket="artifacts", Key=key)["Body"].read()
        answered, failed = (json.loads(line) for line in body.decode().splitlines())
        assert answered["recordId"] == "ITEM0000000"
        assert answered["modelOutput"]["output"]["message"]["content"] == [{"text": "answered offline"}]
        assert failed["recordId"] == "ITEM0000001" and failed["error"]["errorCode"] == 400
    finally:
        patch.DELIVERY.clear()
        patch.RUN_AFTER_SECONDS = 2.0


def _offline(context: dict[str, Any], model_id: str) -> str:
    return "answered offline"


# --- name_event_buses_by_ref -------------------------------------------------------------------------------


BUS = {"Bus": {"Type": "AWS::Events::EventBus", "Properties": {"Name": "Longhaul-local"}}}
NAMED_BY_REF = {
    "Named": {
        "Type": "AWS::SQS::Queue",
        "Properties": {"QueueName": "named", "Tags": [{"Key": "bus", "Value": {"Ref": "Bus"}}]},
    }
}


def _bus_tag() -> str:
    sqs = boto3.client("sqs", region_name=REGION)
    return str(sqs.list_queue_tags(QueueUrl=sqs.get_queue_url(QueueName="named")["QueueUrl"])["Tags"]["bus"])


@pytest.mark.usefixtures("unpatched")
def test_cfn_event_bus_refs_are_not_its_name_without_the_patch() -> None:
    _deploy({**BUS, **NAMED_BY_REF})

    assert _bus_tag() != "Longhaul-local"


@pytest.mark.usefixtures("patched")
def test_cfn_event_bus_refs_are_its_name_with_the_patch() -> None:
    refs = _deploy({**BUS, **NAMED_BY_REF})

    assert refs["Bus"] == "Longhaul-local"
    assert _bus_tag() == "Longhaul-local"
    names = [b["Name"] for b in boto3.client("events", region_name=REGION).list_event_buses()["EventBuses"]]
    assert "Longhaul-local" in names
