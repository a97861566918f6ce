"""Scheduled operator tasks."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.observability import logger, metrics
from longhaul.operations import sweep as sweeping
from longhaul.services import services


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Every few minutes: expire jobs past their deadline, report jobs with no progress (event + metric) and the
    state machine versions live jobs still run."""
    s = services()
    report = sweeping.sweep(s, s.now())
    return {**report, "versions_in_use": report.versions}


init_complete()
