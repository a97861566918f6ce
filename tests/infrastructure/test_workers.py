"""The container workers in the synthesized template: the ECS cluster, the arm64 Fargate task definition with its
image asset and log group, the least-privilege task role, networking without NAT, and the task-token OCR step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from longhaul.core.settings import Env
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import all_states, definition, resources, workflow_level


def _ocr_machine(template: dict[str, Any]) -> dict[str, Any]:
    for machine in resources(template, "AWS::StepFunctions::StateMachine").values():
        asl = definition(machine)
        if asl["Comment"] == "Longhaul workflow document-analysis":
            return asl
    raise AssertionError("no document-analysis state machine")


def test_the_template_has_a_cluster_and_an_arm64_fargate_task_definition_per_worker(template: dict[str, Any]) -> None:
    assert len(resources(template, "AWS::ECS::Cluster")) == 1
    (task,) = resources(template, "AWS::ECS::TaskDefinition").values()
    props = task["Properties"]
    assert props["RequiresCompatibilities"] == ["FARGATE"] and props["NetworkMode"] == "awsvpc"
    assert props["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    assert int(props["Cpu"]) >= 1024 and int(props["Memory"]) >= 2048, "sized for OCR"
    (container,) = props["ContainerDefinitions"]
    assert container["Name"] == "ocr" == sorted(REGISTRY.containers)[0]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    env = {e["Name"] for e in container["Environment"]}
    assert {Env.TABLE, Env.BUCKET} <= env
    log_group = container["LogConfiguration"]["Options"]["awslogs-group"]["Ref"]
    assert template["Resources"][log_group]["Properties"]["RetentionInDays"] > 0


def test_the_image_is_a_docker_asset_built_from_the_workers_dockerfile_for_arm64(assembly: Path) -> None:
    assets = json.loads(next(assembly.glob("Longhaul-*.assets.json")).read_text())
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "workers/ocr/Dockerfile"
    assert image["source"]["platform"] == "linux/arm64"
    staged = assembly / image["source"]["directory"]
    assert (staged / "workers" / "ocr" / "Dockerfile").is_file() and (staged / "longhaul").is_dir()
    assert not (staged / "tests").exists()


def test_no_nat_gateway_and_the_tasks_only_reach_out_over_https(template: dict[str, Any]) -> None:
    assert not resources(template, "AWS::EC2::NatGateway")
    assert resources(template, "AWS::EC2::FlowLog")
    groups = [
        g
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        if "container workers" in g["Properties"]["GroupDescription"]
    ]
    (group,) = groups
    assert not group["Properties"].get("SecurityGroupIngress")
    assert [(r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in group["Properties"]["SecurityGroupEgress"]] == [
        ("tcp", 443, 443)
    ]


def _role_actions(template: dict[str, Any], role_id: str) -> set[str]:
    actions: set[str] = set()
    policies = [
        *resources(template, "AWS::IAM::Policy").values(),
        *resources(template, "AWS::IAM::ManagedPolicy").values(),
    ]
    for policy in policies:  # a role's inline policy and CDK's overflow managed policies
        if {"Ref": role_id} not in policy["Properties"].get("Roles", []):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            action = statement["Action"]
            actions |= set(action if isinstance(action, list) else [action])
    return actions


def test_the_task_role_reaches_only_artifacts_job_items_webhook_starts_its_task_tokens_and_the_dispatcher(
    template: dict[str, Any],
) -> None:
    (task,) = resources(template, "AWS::ECS::TaskDefinition").values()
    role_id = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    actions = _role_actions(template, role_id)
    assert {"s3:GetObject", "s3:PutObject", "states:SendTaskSuccess", "states:SendTaskFailure"} <= actions
    assert "states:SendTaskHeartbeat" in actions
    # a step's bookkeeping: one BatchGetItem (the job and its record), transactions of puts, updates and checks
    assert {
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
    } <= actions
    # lambda:InvokeFunction: a job it ends gives back its slot and wakes the admission dispatcher (that function only,
    # tests/infrastructure/test_admission.py)
    allowed_prefixes = (
        "s3:GetObject",
        "s3:PutObject",
        "dynamodb:",
        "states:SendTask",
        "states:StartExecution",
        "lambda:InvokeFunction",
        "events:PutEvents",  # a status change it writes is put on the stack's bus (tests/infrastructure/test_events.py)
    )
    assert all(a.startswith(allowed_prefixes) for a in actions), sorted(actions)
    assert "s3:DeleteObject" not in actions and "dynamodb:DeleteItem" not in actions


def test_the_ocr_step_is_a_task_token_run_task_under_the_house_policy(template: dict[str, Any]) -> None:
    asl = _ocr_machine(template)
    runs = [
        s
        for _, s, _ in all_states(asl["States"])
        if s.get("Resource") == "arn:aws:states:::ecs:runTask.waitForTaskToken"
    ]
    assert len(runs) == 2, "the inline Map's item and the Distributed Map's batch item"
    for run in runs:
        _check_run_task(run)


def _check_run_task(run: dict[str, Any]) -> None:
    assert run["TimeoutSeconds"] > 0 and 0 < run["HeartbeatSeconds"] < run["TimeoutSeconds"]
    assert run["Parameters"]["LaunchType"] == "FARGATE"
    (override,) = run["Parameters"]["Overrides"]["ContainerOverrides"]
    env = {e["Name"]: e for e in override["Environment"]}
    assert env[Env.TASK_TOKEN]["Value.$"] == "$$.Task.Token"
    assert {Env.STEP_EVENT, Env.STEP_ATTEMPT, Env.HEARTBEAT_SECONDS} <= set(env)
    retried = {e for r in run["Retry"] for e in r["ErrorEquals"]}
    assert {"TransientError", "States.Timeout"} <= retried and "InvalidInputError" not in retried
    assert any(c["ErrorEquals"] == ["States.ALL"] and "dead letter" not in c["Next"] for c in run["Catch"])


def test_the_ocr_step_is_skipped_when_no_page_needs_it(template: dict[str, Any]) -> None:
    """One Choice on the batch count: none goes straight on to the next step (one transition, nothing invoked)."""
    states = workflow_level(_ocr_machine(template)["States"])
    choice = states["ocr_pages: inline or distributed?"]
    assert choice["Type"] == "Choice"
    some = next(c for c in choice["Choices"] if c["NumericGreaterThan"] == 0)
    assert some["Variable"] == "$.steps.plan_ocr.ocr_batches.count"
    assert states[some["Next"]]["Type"] == "Map"
    names = REGISTRY["document-analysis"].step_names
    assert choice["Default"].startswith(names[names.index("ocr_pages") + 1])


def test_the_api_and_the_sweep_may_stop_only_the_clusters_tasks(template: dict[str, Any]) -> None:
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "ecs:StopTask" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert statements and all("ecs:cluster" in s["Condition"]["ArnEquals"] for s in statements)
