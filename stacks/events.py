"""Events out: the stack's EventBridge bus, on which every job status change (and each review's request and decision)
is put, the schema of each kind in the stack's schema registry, the operators' tap, and the grants to put on the bus.

- The bus is named for the stack (`bus_name`), so a platform team's rules and other stacks can name it; every
  function reads its name from `LONGHAUL_EVENT_BUS`. Whatever writes a status change puts its events
  (`longhaul.storage.bus`): `events:PutEvents` on this bus only (`grant_put`).
- The schema registry holds the OpenAPI 3 schema of `Job Status Changed` (`longhaul.core.bus.registry_schema`), named
  as EventBridge names its own (`longhaul@JobStatusChanged`), so code bindings can be downloaded for it.
- The tap: a rule on the bus sends every Longhaul event to a queue that the operators' route `GET /v1/ops/events`
  (and `longhaul ops events --follow`) reads; locally the in-memory AWS delivers to it as EventBridge does.
"""

from __future__ import annotations

import json

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_eventschemas as eventschemas
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from longhaul.core.bus import JOB_STATUS_CHANGED, SOURCE, registry_schema
from stacks.nag import acknowledge

#: The `source` of every event Longhaul puts on its bus.
EVENT_SOURCE = SOURCE
#: How long an event waits in the operators' tap for a reader.
TAP_RETENTION = Duration.days(1)


def bus_name(scope: Construct) -> str:
    """The bus's name: the stack's (`Longhaul-<stage>`); event bus names allow up to 256 characters."""
    return Stack.of(scope).stack_name[:256]


def schema_name(detail_type: str) -> str:
    """`longhaul@JobStatusChanged`: EventBridge's own naming of a source's detail type."""
    return f"{SOURCE}@{detail_type.replace(' ', '')}"


class Events(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(self, "Bus", event_bus_name=bus_name(self))
        # Named by CloudFormation (registry names allow no digits, which a stage may have).
        self.registry = eventschemas.CfnRegistry(
            self,
            "Registry",
            description=f"Longhaul's events on the bus {bus_name(self)}: job status changes, review requests and "
            "decisions",
        )
        # The status change's schema (the reviews' events are documented in the manual: the stack is near
        # CloudFormation's resource limit, and a schema is one resource each).
        self.schema = eventschemas.CfnSchema(
            self,
            "JobStatusChangedSchema",
            registry_name=self.registry.attr_registry_name,
            schema_name=schema_name(JOB_STATUS_CHANGED),
            type="OpenApi3",
            content=json.dumps(registry_schema(JOB_STATUS_CHANGED), sort_keys=True),
            description=f"{SOURCE}: {JOB_STATUS_CHANGED}",
        )
        self.tap = sqs.Queue(
            self,
            "Tap",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=TAP_RETENTION,
        )
        acknowledge(
            self.tap,
            "SQS3",
            "The operators' tap of the bus: an event nobody read expires with the queue's retention; the bus keeps "
            "none to redrive.",
        )
        self.tap_rule = events.Rule(
            self,
            "TapRule",
            event_bus=self.bus,
            event_pattern=events.EventPattern(source=[SOURCE]),
            targets=[targets.SqsQueue(self.tap)],
            description="Every Longhaul event to the operators' tap (GET /v1/ops/events)",
        )

    @property
    def bus_name(self) -> str:
        return self.bus.event_bus_name

    def grant_put(self, grantee: iam.IGrantable) -> None:
        """`events:PutEvents` on this bus only."""
        self.bus.grant_put_events_to(grantee)

    def grant_tap_reads(self, grantee: iam.IGrantable) -> None:
        """Receive (and delete what was read) from the operators' tap."""
        self.tap.grant_consume_messages(grantee)
