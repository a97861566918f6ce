"""The tracing configuration: every function is actively traced and may send its spans to X-Ray's OTLP endpoint;
only the API functions may read traces back (`GET …/trace`)."""

from __future__ import annotations

from typing import Any

from stacks.functions import SPAN_EXPORT_ACTIONS, TRACE_READ_ACTIONS
from tests.infrastructure.conftest import resources


def _actions_by_role(template: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    # CDK moves what does not fit a role's inline policy into overflow managed policies of the role: both count.
    policies = [
        *resources(template, "AWS::IAM::Policy").values(),
        *resources(template, "AWS::IAM::ManagedPolicy").values(),
    ]
    for policy in policies:
        props = policy["Properties"]
        actions = set()
        for statement in props["PolicyDocument"]["Statement"]:
            listed = statement["Action"]
            actions |= {listed} if isinstance(listed, str) else set(listed)
        for role in props.get("Roles", []):
            found.setdefault(role["Ref"], set()).update(actions)
    return found


def test_every_function_is_traced_and_may_export_its_spans(template: dict[str, Any]) -> None:
    functions = resources(template, "AWS::Lambda::Function")
    by_role = _actions_by_role(template)
    platform = {name: fn for name, fn in functions.items() if fn["Properties"].get("TracingConfig")}
    assert len(platform) > 10
    for name, fn in platform.items():
        assert fn["Properties"]["TracingConfig"] == {"Mode": "Active"}, name
        role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        assert set(SPAN_EXPORT_ACTIONS) <= by_role.get(role, set()), f"{name} cannot send its spans"


def test_only_the_api_functions_read_traces(template: dict[str, Any]) -> None:
    by_role = _actions_by_role(template)
    readers = sorted(role for role, actions in by_role.items() if set(TRACE_READ_ACTIONS) & actions)
    assert len(readers) == 2 and all("Api" in role for role in readers), readers
