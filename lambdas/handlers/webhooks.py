"""The webhook delivery state machine's functions: one delivery attempt, and the dead letter after the last."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.observability import logger
from longhaul.services import services
from longhaul.webhooks import dispatcher


@logger.inject_lambda_context(clear_state=True)
def deliver(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(webhook_id=event.get("webhook_id"), job_id=event.get("job_id"))
    return dispatcher.deliver(event, services())


@logger.inject_lambda_context(clear_state=True)
def dead_letter(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(webhook_id=event.get("webhook_id"), job_id=event.get("job_id"))
    return dispatcher.dead_letter(event, services())


init_complete()
