"""EventBridge: a rule's Lambda targets are invoked, as on AWS.

moto's `Rule.send_to_targets` (the rules of `PutEvents`, and of S3's EventBridge notifications) matches the event
against the rule's pattern, applies each target's input transformer, and delivers to log groups, archives, queues,
buses and API destinations: at a Lambda target it raises `NotImplementedError` (which S3 swallows, and which stops
the delivery to the rule's later targets). The patch lets moto deliver to the targets it knows, and repeats what that
method does for a Lambda target of an enabled rule with an event pattern (`EventPattern.matches_event`,
`EventTemplateParser.parse` with the target's `InputTransformer`) and hands the function ARN and its input to the
local platform's invoker (`INVOKE`, set at start), which invokes it asynchronously as EventBridge does: `PutEvents`
(or the S3 `PutObject` that sent the event) does not wait for the function.

Scheduled rules (no pattern) are left to `local.schedules.Scheduler`, and the platform's own delivery of Bedrock's
events (`local.schedules.deliver`) calls the function directly, so nothing is invoked twice.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from local.moto_patches.core import _define, _module, _original, _restore

LOG = logging.getLogger(__name__)
#: The local platform's asynchronous invoke of a function (ARN, event); empty: Lambda targets are skipped, as upstream.
INVOKE: list[Callable[[str, dict[str, Any]], None]] = []


def _is_function(arn: str) -> bool:
    return ":lambda:" in arn and ":function:" in arn


def _send_to_targets(self: Any, original_event: dict[str, Any], transform_input: bool = True) -> None:
    upstream = _original(_module("moto.events.models").Rule, "send_to_targets")
    others = [t for t in self.targets if not _is_function(str(t.get("Arn", "")))]
    if others:  # moto's own delivery, to the targets it knows (it raises NotImplementedError at a Lambda target)
        rest = copy.copy(self)
        rest.targets = others
        upstream(rest, original_event, transform_input)
    if not INVOKE or self.state != "ENABLED" or not self.event_pattern.get_pattern():
        return
    if not self.event_pattern.matches_event(original_event):
        return
    parser = _module("moto.events.utils").EventTemplateParser
    for target in self.targets:
        arn = str(target.get("Arn", ""))
        if not _is_function(arn):
            continue
        transformer = target.get("InputTransformer") or {}
        if transformer and transform_input:
            event = parser.parse(
                input_template=transformer.get("InputTemplate"),
                input_paths_map=transformer.get("InputPathsMap", {}),
                event=original_event,
            )
        else:
            event = dict(original_event)
        for invoke in list(INVOKE):
            try:
                invoke(arn, event)
            except Exception:  # as on AWS, a target that cannot be reached does not fail the PutEvents
                LOG.exception("rule %s could not invoke %s", self.name, arn)


def invoke_lambda_targets() -> None:
    """Rules' Lambda targets are invoked through `INVOKE`."""
    _define(_module("moto.events.models").Rule, "send_to_targets", _send_to_targets)


def skip_lambda_targets() -> None:
    _restore(_module("moto.events.models").Rule, "send_to_targets")
