"""The compensation lane's function: plan, undo, failed and finish of a job's saga (`longhaul.engine.saga`),
dispatched on the Task's `action`."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from handlers.job_keys import lane_invocation
from longhaul.core.observability import logger
from longhaul.engine import saga
from longhaul.services import services


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with lane_invocation(
        services(),
        event.get("job_id"),
        workflow=event.get("workflow"),
        action=event.get("action"),
        operation_id=event.get("operation_id"),
    ):
        return saga.handle(event, services())


init_complete()
