"""The admission dispatcher: woken after a submission that waits, after a slot is freed and after a saga is written,
and every minute. It starts executions: queued jobs', and the compensations of jobs that ended with side effects."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.observability import logger
from longhaul.operations import compensation
from longhaul.operations.admission import Admission
from longhaul.services import services


@logger.inject_lambda_context(clear_state=True)
def dispatch(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """One round: start the pending compensations, then the waiting jobs the free slots allow, weighted-fair across
    tenants and SLA classes."""
    compensations = compensation.start_pending(services())
    report = Admission(services()).dispatch()
    if report.received:
        logger.info(
            "admission round",
            extra={
                "received": report.received,
                "started": len(report.started),
                "kept": report.kept,
                "poison": len(report.poison),
            },
        )
    return {
        "received": report.received,
        "started": len(report.started),
        "dropped": len(report.dropped),
        "compensations": len(compensations),
        "poison": len(report.poison),
    }


init_complete()
