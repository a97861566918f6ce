"""A workflow's steer lane function: the waits of a job steered from outside (a pause), on task tokens, dispatched
on the Task's `action`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.errors import InternalError
from longhaul.core.observability import logger
from longhaul.engine import pause
from longhaul.services import services


@logger.inject_lambda_context(clear_state=True)  # never log_event: the wait's event carries the task token
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    action = event.get("action")
    logger.append_keys(job_id=event.get("job_id"), step=event.get("step"), action=action)
    if action == "pause":
        return pause.wait(event, services())
    raise InternalError(f"unknown steer action {action!r}")


init_complete()
