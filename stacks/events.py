"""Events out: the stack's EventBridge bus, on which every job status change (and each review's request and decision)
is put, and the grants to put on it.

The bus is named for the stack (`bus_name`), so a platform team's rules and other stacks can name it; every function
reads its name from `LONGHAUL_EVENT_BUS`.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

#: The `source` of every event Longhaul puts on its bus.
EVENT_SOURCE = "longhaul"


def bus_name(scope: Construct) -> str:
    """The bus's name: the stack's (`Longhaul-<stage>`); event bus names allow up to 256 characters."""
    return Stack.of(scope).stack_name[:256]


class Events(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(self, "Bus", event_bus_name=bus_name(self))

    @property
    def bus_name(self) -> str:
        return self.bus.event_bus_name

    def grant_put(self, grantee: iam.IGrantable) -> None:
        """`events:PutEvents` on this bus only."""
        self.bus.grant_put_events_to(grantee)
