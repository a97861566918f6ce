"""The ECS patches are pinned: without them moto (5.2.5) cannot run an `ecs:runTask.waitForTaskToken` Task; with
them RunTask starts the container's worker as a subprocess that answers the token, and StopTask stops it.

The worker here is a probe registered in `local.workers.EXTRA_ENTRYPOINTS`; it reaches the in-memory AWS through a
moto server on loopback, as the OCR worker does under `make run`.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from local import moto_patches, workers
from local.deploy import wait_until
from tests.unit.aws_env import REGION, offline_credentials

ANSWER = textwrap.dedent(
    """
    import json, os, boto3
    sfn = boto3.client("stepfunctions")
    token = os.environ["TOKEN"]
    sfn.send_task_heartbeat(taskToken=token)
    sfn.send_task_success(taskToken=token, output=json.dumps({"from_definition": os.environ["KIND"],
                                                              "from_override": os.environ["JOB"]}))
    """
)
# Fails its first task (SendTaskFailure), answers the next: a Retry attempt must wait for its own task's answer.
FLAKY = textwrap.dedent(
    """
    import os, boto3
    from pathlib import Path
    sfn = boto3.client("stepfunctions")
    marker = Path(os.environ["MARKER"])
    if not marker.exists():
        marker.write_text("failed once")
        sfn.send_task_failure(taskToken=os.environ["TOKEN"], error="TransientError", cause="first attempt")
    else:
        sfn.send_task_success(taskToken=os.environ["TOKEN"], output='{"attempt": "second"}')
    """
)
SLEEP = "import time\nwhile True: time.sleep(0.05)"


def _machine(container: str) -> dict[str, Any]:
    return {
        "StartAt": "Run",
        "States": {
            "Run": {
                "Type": "Task",
                "Resource": "arn:aws:states:::ecs:runTask.waitForTaskToken",
                "Parameters": {
                    "Cluster.$": "$.cluster",
                    "TaskDefinition.$": "$.definition",
                    "LaunchType": "FARGATE",
                    "Group": "longhaul:job-1",
                    "NetworkConfiguration": {
                        "AwsvpcConfiguration": {
                            "Subnets.$": "$.subnets",
                            "SecurityGroups.$": "$.security_groups",
                            "AssignPublicIp": "ENABLED",
                        }
                    },
                    "Overrides": {
                        "ContainerOverrides": [
                            {
                                "Name": container,
                                "Environment": [
                                    {"Name": "TOKEN", "Value.$": "$$.Task.Token"},
                                    {"Name": "JOB", "Value.$": "$.job"},
                                ],
                            }
                        ]
                    },
                },
                "Retry": [{"ErrorEquals": ["TransientError"], "IntervalSeconds": 1, "MaxAttempts": 2}],
                "HeartbeatSeconds": 60,
                "TimeoutSeconds": 120,
                "End": True,
            }
        },
    }


def _start(container: str) -> tuple[str, dict[str, Any]]:
    suffix = uuid.uuid4().hex[:8]  # the in-memory AWS outlives a test
    ec2, ecs = boto3.client("ec2", region_name=REGION), boto3.client("ecs", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})  # as the stack's VPC (moto needs it)
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"g-{container}-{suffix}", Description="worker", VpcId=vpc)["GroupId"]
    cluster = ecs.create_cluster(clusterName=f"c-{container}-{suffix}")["cluster"]["clusterArn"]
    definition = ecs.register_task_definition(
        family=container,
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="256",
        memory="512",
        containerDefinitions=[
            {"name": container, "image": "worker", "memory": 512, "environment": [{"name": "KIND", "value": "probe"}]}
        ],
    )["taskDefinition"]["taskDefinitionArn"]
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName=f"r-{container}-{suffix}", AssumeRolePolicyDocument="{}"
    )
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = sfn.create_state_machine(
        name=f"m-{container}-{suffix}", definition=json.dumps(_machine(container)), roleArn=role["Role"]["Arn"]
    )["stateMachineArn"]
    state = {
        "cluster": cluster,
        "definition": definition,
        "subnets": [subnet],
        "security_groups": [group],
        "job": "job-1",
    }
    return sfn.start_execution(stateMachineArn=machine, input=json.dumps(state))["executionArn"], state


def _finished(arn: str) -> dict[str, Any]:
    sfn = boto3.client("stepfunctions", region_name=REGION)

    def probe() -> dict[str, Any] | None:
        described: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        return None if described["status"] == "RUNNING" else described

    return wait_until(probe, timeout=60, what=arn)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Patched moto behind a server on loopback, which the worker subprocesses reach through AWS_ENDPOINT_URL."""
    offline_credentials(monkeypatch)
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    host, port = moto.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    monkeypatch.setenv("MOTO_PORT", str(port))
    monkeypatch.setitem(workers.EXTRA_ENTRYPOINTS, "answer", [sys.executable, "-c", ANSWER])
    monkeypatch.setitem(workers.EXTRA_ENTRYPOINTS, "sleeper", [sys.executable, "-c", SLEEP])
    monkeypatch.setitem(workers.EXTRA_ENTRYPOINTS, "flaky", [sys.executable, "-c", FLAKY])
    monkeypatch.setenv("MARKER", str(tmp_path / "marker"))
    yield
    workers.stop_all()
    moto.stop()
    if not was_applied:
        moto_patches.revert()


@pytest.fixture
def unpatched(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    offline_credentials(monkeypatch)
    was_applied = moto_patches.is_applied()
    moto_patches.revert()
    moto_patches.enable_execution()
    moto_patches.route_state_machines_to_interpreter()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    moto_patches.revert()
    if was_applied:
        moto_patches.apply()


@pytest.mark.usefixtures("unpatched")
def test_a_run_task_with_asl_parameter_names_fails_without_the_patch() -> None:
    arn, _ = _start("answer")
    finished = _finished(arn)
    assert finished["status"] == "FAILED"
    assert finished["error"] == "States.Runtime" and "'Cluster'" in finished["cause"]


@pytest.mark.usefixtures("server")
def test_run_task_starts_the_worker_which_answers_its_token_with_the_patch() -> None:
    arn, _ = _start("answer")
    finished = _finished(arn)
    assert finished["status"] == "SUCCEEDED", finished
    # The worker saw the task definition's environment and the run's container overrides
    assert json.loads(finished["output"]) == {"from_definition": "probe", "from_override": "job-1"}


@pytest.mark.usefixtures("server")
def test_stop_task_stops_the_worker_with_the_patch() -> None:
    arn, state = _start("sleeper")
    ecs = boto3.client("ecs", region_name=REGION)
    wait_until(lambda: workers.running_tasks() or None, timeout=30, what="the worker to start")
    (task,) = ecs.list_tasks(cluster=state["cluster"])["taskArns"]
    assert ecs.describe_tasks(cluster=state["cluster"], tasks=[task])["tasks"][0]["group"] == "longhaul:job-1"

    ecs.stop_task(cluster=state["cluster"], task=task, reason="job cancelled")

    wait_until(lambda: not workers.running_tasks() or None, timeout=30, what="the worker to stop")
    boto3.client("stepfunctions", region_name=REGION).stop_execution(executionArn=arn)


@pytest.mark.usefixtures("server")
def test_a_retried_token_task_waits_for_its_own_worker_with_the_patch() -> None:
    """Without `token_per_attempt`, the retry reuses the first token, finds its failure and fails at once."""
    arn, _ = _start("flaky")
    finished = _finished(arn)
    assert finished["status"] == "SUCCEEDED", finished
    assert json.loads(finished["output"]) == {"attempt": "second"}
