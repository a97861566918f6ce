"""The review lane's function: `wait` (store the task token, the job waits for review) and `advance` (apply the
decision or take the escalation ladder's next rung), dispatched on the Task's `action`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.errors import InternalError
from longhaul.core.observability import bind_job, logger
from longhaul.engine.usage import recording
from longhaul.review import lane
from longhaul.services import services


@logger.inject_lambda_context(clear_state=True)  # never log_event: the wait's event carries the task token
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    state = event.get("input") or {}
    action = event.get("action")
    bind_job(
        state.get("job_id"),
        state.get("correlation_id"),
        workflow=state.get("workflow"),
        step=event.get("step"),
        action=action,
    )
    with recording(services(), state.get("job_id")):  # billed like a step: the job's cost counts it
        if action == "wait":
            return lane.wait(event, services())
        if action == "advance":
            return lane.advance(event, services())
        raise InternalError(f"unknown review action {action!r}")


init_complete()
