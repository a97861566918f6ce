"""Schedules and triggers on AWS (`TriggerWiring`): EventBridge Scheduler schedules in a schedule group per tenant
(created on a tenant's first schedule), one-time `at(...)` timers that delete themselves (an S3 inbox's batch window
closing), and EventBridge rules on the stack's bus (or a named one) with the function as their target.

Every name starts with the deployment's prefix (`LONGHAUL_TRIGGER_PREFIX`, the stack's name), which is what the
function's grants are scoped to: two deployments in one account never touch each other's.

A schedule's target input carries `<aws.scheduler.scheduled-time>`, which Scheduler replaces with the fire's scheduled
time; a rule's input transformer wraps the whole event (`<aws.events.event.json>`) with the trigger it is for.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from longhaul.core.ports import WiringRefused, WiringUnavailable

#: Scheduler replaces this in a target's input with the fire's scheduled time (ISO 8601, UTC).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: EventBridge replaces this in an input template with the matching event (JSON).
WHOLE_EVENT = "<aws.events.event.json>"
EVENT_PLACEHOLDER = '"__longhaul_event__"'
_NAME = re.compile(r"[^0-9A-Za-z_.-]")


def safe_name(*parts: str, limit: int = 64) -> str:
    """A Scheduler or EventBridge name of `parts` (`[0-9A-Za-z_.-]`, at most `limit`): what does not fit is replaced by
    a digest, so two tenants' names never collide."""
    name = _NAME.sub("-", "-".join(parts))
    if len(name) <= limit and name == "-".join(parts):
        return name
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
    return f"{name[: limit - 13]}-{digest}"


def group_name(prefix: str, tenant_id: str) -> str:
    return safe_name(prefix, tenant_id)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _refusal(error: Exception, field: str) -> Exception:
    """What a failed call means for the request: a refusal of its `field` (a bus that does not exist, an expression or
    pattern AWS does not take), else AWS unavailable now."""
    if isinstance(error, ClientError):
        code = _code(error)
        message = str(error.response.get("Error", {}).get("Message", "")) or code
        if code == "ResourceNotFoundException" and field == "event_bus":
            return WiringRefused("event_bus", f"no such event bus: {message}")
        if code in ("ValidationException", "InvalidEventPatternException"):
            return WiringRefused(field, f"AWS refused it: {message}")
    return WiringUnavailable(f"{type(error).__name__}: {error}")


class AwsTriggerWiring:
    def __init__(self, scheduler: Any, events: Any, *, prefix: str, role_arn: str) -> None:
        self.scheduler = scheduler
        self.events = events
        self.prefix = prefix
        self.role_arn = role_arn
        self._groups: set[str] = set()

    # ------------------------------------------------------------------ Scheduler

    def _group(self, tenant_id: str) -> str:
        name = group_name(self.prefix, tenant_id)
        if name not in self._groups:
            try:  # (looked up first: creating a group that exists is a conflict on AWS, a fresh group in moto)
                self.scheduler.get_schedule_group(Name=name)
            except ClientError as error:
                if _code(error) != "ResourceNotFoundException":
                    raise
                try:
                    self.scheduler.create_schedule_group(Name=name)
                except ClientError as conflict:
                    if _code(conflict) != "ConflictException":
                        raise
            self._groups.add(name)
        return name

    def _target(self, target: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "Arn": target,
            "RoleArn": self.role_arn,
            "Input": json.dumps(payload),
            # A fire that fails to reach the function is retried; the job's Idempotency-Key keeps it one job.
            "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 5},
        }

    def put_schedule(
        self,
        tenant_id: str,
        name: str,
        *,
        expression: str,
        timezone: str,
        enabled: bool,
        target: str,
        payload: Mapping[str, Any],
    ) -> None:
        arguments = {
            "Name": name,
            "GroupName": self._group(tenant_id),
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": timezone,
            "State": "ENABLED" if enabled else "DISABLED",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": self._target(target, payload),
        }
        try:
            try:
                self.scheduler.update_schedule(**arguments)
            except ClientError as error:
                if _code(error) != "ResourceNotFoundException":
                    raise
                self.scheduler.create_schedule(**arguments)
        except (ClientError, BotoCoreError) as error:
            raise _refusal(error, "schedule") from error

    def delete_schedule(self, tenant_id: str, name: str) -> None:
        try:
            self.scheduler.delete_schedule(Name=name, GroupName=group_name(self.prefix, tenant_id))
        except ClientError as error:
            if _code(error) != "ResourceNotFoundException":
                raise WiringUnavailable(f"{_code(error)}: {error}") from error
        except BotoCoreError as error:
            raise WiringUnavailable(str(error)) from error

    def put_timer(self, tenant_id: str, name: str, *, at: datetime, target: str, payload: Mapping[str, Any]) -> None:
        """A one-time schedule at `at` (UTC, to the second) that deletes itself once it has fired; a second
        `put_timer` of the same name keeps the first."""
        try:
            self.scheduler.create_schedule(
                Name=name,
                GroupName=self._group(tenant_id),
                ScheduleExpression=f"at({at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')})",
                ScheduleExpressionTimezone="UTC",
                State="ENABLED",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                Target=self._target(target, payload),
            )
        except ClientError as error:
            if _code(error) != "ConflictException":
                raise

    # ------------------------------------------------------------------ EventBridge rules

    def put_rule(
        self, name: str, *, bus: str, pattern: Mapping[str, Any], enabled: bool, target: str, payload: Mapping[str, Any]
    ) -> None:
        try:
            self._put_rule(name, bus=bus, pattern=pattern, enabled=enabled, target=target, payload=payload)
        except (ClientError, BotoCoreError) as error:
            code = _code(error) if isinstance(error, ClientError) else ""
            raise _refusal(error, "event_bus" if code == "ResourceNotFoundException" else "event_pattern") from error

    def _put_rule(
        self, name: str, *, bus: str, pattern: Mapping[str, Any], enabled: bool, target: str, payload: Mapping[str, Any]
    ) -> None:
        self.events.put_rule(
            Name=name,
            EventBusName=bus,
            EventPattern=json.dumps(pattern),
            State="ENABLED" if enabled else "DISABLED",
            Description="Longhaul trigger: its matching events start jobs",
        )
        template = json.dumps({**payload, "event": "__longhaul_event__"}).replace(EVENT_PLACEHOLDER, WHOLE_EVENT)
        self.events.put_targets(
            Rule=name,
            EventBusName=bus,
            Targets=[
                {
                    "Id": "longhaul",
                    "Arn": target,
                    "InputTransformer": {"InputTemplate": template},
                    "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 5},
                }
            ],
        )

    def delete_rule(self, name: str, *, bus: str) -> None:
        try:
            self.events.remove_targets(Rule=name, EventBusName=bus, Ids=["longhaul"])
            self.events.delete_rule(Name=name, EventBusName=bus)
        except ClientError as error:
            if _code(error) != "ResourceNotFoundException":
                raise WiringUnavailable(f"{_code(error)}: {error}") from error
        except BotoCoreError as error:
            raise WiringUnavailable(str(error)) from error
