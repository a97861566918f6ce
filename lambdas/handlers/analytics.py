"""The analytics export: on its schedule, every job finished since the last run is written as Parquet under the
artifacts bucket's `analytics/` prefix (`longhaul.operations.analytics`)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.observability import logger, metrics
from longhaul.operations import analytics
from longhaul.services import services


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def export(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    """Export the jobs finished since the watermark; `{"job_id": …}` exports that one job (an operator's re-run)."""
    s = services()
    if isinstance(event.get("job_id"), str):
        return {"exported": int(analytics.export_job(s, event["job_id"]) is not None), "failed": 0}
    done = analytics.export_finished(s)
    logger.info("analytics exported", extra=done)
    return done


init_complete()
