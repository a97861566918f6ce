"""EventBridge: a `Ref` to an `AWS::Events::EventBus` is the bus's name, as on AWS.

moto's CloudFormation creates the bus, but its model has no `physical_resource_id`, so a `Ref` to it renders as the
model object itself (and a function's environment that names the bus cannot be serialized). The patch gives the
model the property, answering the name.
"""

from __future__ import annotations

from local.moto_patches.core import _define, _module, _restore


def _bus_name(self: object) -> str:
    return str(self.name)  # type: ignore[attr-defined]


def name_event_buses_by_ref() -> None:
    """`Ref` of an event bus: its name."""
    _define(_module("moto.events.models").EventBus, "physical_resource_id", property(_bus_name))


def unname_event_buses() -> None:
    _restore(_module("moto.events.models").EventBus, "physical_resource_id")
