"""Events out: the stack's EventBridge bus, named for the stack, and its name in every function's environment."""

from __future__ import annotations

from longhaul.core.settings import Env
from tests.infrastructure.conftest import resources


def test_the_stack_creates_one_event_bus_named_for_the_stack(template):
    buses = resources(template, "AWS::Events::EventBus")
    assert len(buses) == 1
    (bus_id, bus), = buses.items()
    assert bus["Properties"]["Name"] == "Longhaul-dev"
    for function_id, function in resources(template, "AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "LONGHAUL_TABLE" in variables:
            assert variables[Env.EVENT_BUS] == {"Ref": bus_id}, function_id
