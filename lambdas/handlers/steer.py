"""A workflow's steer lane function: the waits of a job steered from outside (a pause, a signal, a segment's timer),
on task tokens, and their ends, dispatched on the Task's `action`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from handlers.job_keys import lane_invocation
from longhaul.core.errors import InternalError
from longhaul.core.observability import logger
from longhaul.engine import pause, segments, signals
from longhaul.services import services


@logger.inject_lambda_context(clear_state=True)  # never log_event: the wait's event carries the task token
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    action = event.get("action")
    with lane_invocation(services(), event.get("job_id"), step=event.get("step"), action=action):
        return _steer(action, event)


def _steer(action: object, event: dict[str, Any]) -> dict[str, Any]:
    if action == "pause":
        return pause.wait(event, services())
    if action == "signal":
        return signals.wait(event, services())
    if action == "signal_timeout":
        return signals.timed_out(event, services())
    if action == "segment":
        return segments.timer(event, services())
    if action == "segment_end":
        return segments.end(event, services())
    if action == "segment_timeout":
        return segments.timed_out(event, services())
    raise InternalError(f"unknown steer action {action!r}")


init_complete()
