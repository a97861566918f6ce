"""Events out: the stack's EventBridge bus named for the stack, its name in every function's environment, the status
change's schema in the stack's registry, the operators' tap, and `events:PutEvents` granted on this bus only."""

from __future__ import annotations

import json
from typing import Any

from longhaul.core.bus import JOB_STATUS_CHANGED, SOURCE
from longhaul.core.settings import Env
from tests.infrastructure.conftest import resources


def _bus(template: dict[str, Any]) -> str:
    (bus_id,) = resources(template, "AWS::Events::EventBus")
    return bus_id


def test_the_stack_creates_one_event_bus_named_for_the_stack(template):
    buses = resources(template, "AWS::Events::EventBus")
    assert len(buses) == 1
    ((bus_id, bus),) = buses.items()
    assert bus["Properties"]["Name"] == "Longhaul-dev"
    for function_id, function in resources(template, "AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "LONGHAUL_TABLE" in variables:
            assert variables[Env.EVENT_BUS] == {"Ref": bus_id}, function_id


def test_the_status_change_has_an_openapi_schema_in_the_stacks_registry(template):
    (registry_id,) = resources(template, "AWS::EventSchemas::Registry")
    (schema,) = resources(template, "AWS::EventSchemas::Schema").values()
    properties = schema["Properties"]
    assert properties["RegistryName"] == {"Fn::GetAtt": [registry_id, "RegistryName"]}
    assert properties["SchemaName"] == "longhaul@JobStatusChanged" and properties["Type"] == "OpenApi3"
    content = json.loads(properties["Content"])
    envelope = content["components"]["schemas"]["AWSEvent"]["properties"]
    assert envelope["detail-type"]["enum"] == [JOB_STATUS_CHANGED] and envelope["source"]["enum"] == [SOURCE]


def test_a_rule_on_the_bus_sends_every_longhaul_event_to_the_operators_tap(template):
    bus_id = _bus(template)
    (rule,) = [r for r in resources(template, "AWS::Events::Rule").values() if "EventBusName" in r["Properties"]]
    properties = rule["Properties"]
    assert properties["EventBusName"] == {"Ref": bus_id}
    assert properties["EventPattern"] == {"source": [SOURCE]}
    ((target_queue, _),) = [t["Arn"]["Fn::GetAtt"] for t in properties["Targets"]]
    assert resources(template, "AWS::SQS::Queue")[target_queue]
    ops = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "handlers.api_ops.handler"
        or Env.EVENTS_TAP in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert [f["Properties"]["Environment"]["Variables"][Env.EVENTS_TAP] for f in ops] == [{"Ref": target_queue}]


def test_put_events_is_granted_on_the_stacks_bus_only_to_whatever_changes_a_jobs_status(template):
    bus_arn = {"Fn::GetAtt": [_bus(template), "Arn"]}
    granted: dict[str, list[Any]] = {}
    policies = {**resources(template, "AWS::IAM::Policy"), **resources(template, "AWS::IAM::ManagedPolicy")}
    for policy_id, policy in policies.items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if "events:PutEvents" in actions:
                granted[policy_id] = (
                    statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                )
    assert granted, "nothing may put events"
    assert all(resources_ == [bus_arn] for resources_ in granted.values()), granted
    for grantee in ("ApiHandler", "ApiOpsHandler", "OperationsSweeper", "AdmissionDispatcher", "TaskRole"):
        assert any(p.startswith(grantee) or grantee in p for p in granted), grantee
    assert not any("Webhooks" in p or "Analytics" in p for p in granted)
