"""Scheduled operator tasks."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from longhaul.core.observability import logger, metrics
from longhaul.operations import sweep as sweeping
from longhaul.services import services


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """Every few minutes: expire jobs past their deadline, report jobs with no progress (event + metric)."""
    s = services()
    return sweeping.sweep(s, s.now())
