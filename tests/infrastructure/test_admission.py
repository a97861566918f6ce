"""Admission in the synthesized template: an intake queue per SLA class with its dead-letter queue and an alarm, the
dispatcher on a one-minute schedule, and grants no wider than each function needs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.core.budgets import SLA_CLASSES
from longhaul.core.settings import Env
from tests.infrastructure.conftest import resources


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources(template, "AWS::Lambda::Function")


@pytest.fixture(scope="module")
def dispatcher(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, v)
        for k, v in functions(template).items()
        if v["Properties"].get("Handler") == "handlers.admission.dispatch"
    ]
    return found


def statements_of(template: dict[str, Any], function: dict[str, Any]) -> list[dict[str, Any]]:
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    # CDK moves what does not fit a role's inline policy (IAM's 10 KB) into overflow managed policies of the role.
    kinds = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
    policies = [
        p
        for kind in kinds
        for p in resources(template, kind).values()
        if {"Ref": role} in p["Properties"].get("Roles", [])
    ]
    return [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]


def actions(statement: dict[str, Any]) -> list[str]:
    found = statement["Action"]
    return [found] if isinstance(found, str) else list(found)


def test_each_sla_class_has_an_intake_queue_with_a_dead_letter_queue_and_an_alarm(
    template: dict[str, Any], dispatcher: tuple[str, dict[str, Any]]
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    assert Env.INTAKE_QUEUES in _env(dispatcher[1])  # the queues' URLs by class (rendered at deploy)
    intake = {k: v for k, v in queues.items() if "RedrivePolicy" in v["Properties"] and "Admission" in k}
    assert len(intake) == len(SLA_CLASSES)
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    for queue in intake.values():
        dead = queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert queues[dead]["Properties"]["SqsManagedSseEnabled"] is True
        watched = [
            a
            for a in alarms.values()
            if {"Name": "QueueName", "Value": {"Fn::GetAtt": [dead, "QueueName"]}}
            in a["Properties"].get("Dimensions", [])
        ]
        assert len(watched) == 1, dead
        # poison reaches its dead letters within a few receives (a waiting job's message is renewed every round)
        assert 1 <= queue["Properties"]["RedrivePolicy"]["maxReceiveCount"] <= 5
        # and a received message stays hidden while the round that read it may still run
        assert queue["Properties"]["VisibilityTimeout"] > dispatcher[1]["Properties"]["Timeout"]


def _env(function: dict[str, Any]) -> dict[str, Any]:
    variables: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    return variables


def test_the_dispatcher_runs_every_minute_under_a_name_every_waker_knows(
    template: dict[str, Any], dispatcher: tuple[str, dict[str, Any]]
) -> None:
    logical_id, function = dispatcher
    rules = [
        r
        for r in resources(template, "AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [logical_id, "Arn"]} for t in r["Properties"]["Targets"])
    ]
    assert [r["Properties"]["ScheduleExpression"] for r in rules] == ["rate(1 minute)"]
    name = function["Properties"]["FunctionName"]
    assert isinstance(name, str) and name.endswith("-admission")
    for other in functions(template).values():
        variables = other["Properties"].get("Environment", {}).get("Variables", {})
        if Env.TABLE in variables:  # every platform function can end a job, so each knows whom to wake
            assert variables[Env.ADMISSION_DISPATCHER] == name
            assert int(variables[Env.MAX_JOBS_IN_FLIGHT]) > 0


def test_grants_are_least_privilege(template: dict[str, Any], dispatcher: tuple[str, dict[str, Any]]) -> None:
    _, function = dispatcher
    granted = [a for s in statements_of(template, function) for a in actions(s)]
    # it consumes the intake queues (and renews the messages of jobs that still wait) and starts executions; it
    # never stops or redrives
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:SendMessage"} <= set(granted)
    assert "states:StartExecution" in granted
    assert not {"states:StopExecution", "states:RedriveExecution", "lambda:InvokeFunction"} & set(granted)
    sent_to = [json.dumps(s["Resource"]) for s in statements_of(template, function) if "sqs:SendMessage" in actions(s)]
    assert sent_to and all("Intake" in resource for resource in sent_to)
    # the functions that wake it may invoke it and nothing else in Lambda
    for other in functions(template).values():
        for statement in statements_of(template, other):
            if "lambda:InvokeFunction" in actions(statement):
                resource = json.dumps(statement["Resource"])
                assert resource.endswith('-admission"]}') or "-admission" in resource, resource
                assert "*" not in resource


def test_every_consumed_queue_dead_letters_poison_within_five_receives_and_every_dead_letter_queue_alarms(
    template: dict[str, Any],
) -> None:
    """Poison is contained on every queue: a queue a function consumes (the intake queues; the delivery of webhooks
    and the steps run as state machines, whose failure paths write their dead letters) sends what it cannot handle to
    its dead letters within 5 receives; every other queue is a dead-letter queue and alarms at one message."""
    queues = resources(template, "AWS::SQS::Queue")
    consumed = {k for k, v in queues.items() if "RedrivePolicy" in v["Properties"]}
    assert consumed
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    for logical_id, queue in queues.items():
        if logical_id in consumed:
            assert queue["Properties"]["RedrivePolicy"]["maxReceiveCount"] <= 5, logical_id
            continue
        if logical_id.startswith("EventsTap"):
            # The operators' tap of the bus (`GET /v1/ops/events`): read, never processed, so nothing is poison; an
            # event nobody reads expires with the queue's retention (tests/infrastructure/test_events.py).
            assert int(queue["Properties"]["MessageRetentionPeriod"]) <= 14 * 24 * 3600
            continue
        watched = [
            a
            for a in alarms
            if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
            and {"Name": "QueueName", "Value": {"Fn::GetAtt": [logical_id, "QueueName"]}}
            in a["Properties"].get("Dimensions", [])
        ]
        assert len(watched) == 1 and watched[0]["Properties"]["Threshold"] == 1, logical_id
