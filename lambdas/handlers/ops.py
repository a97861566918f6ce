"""Scheduled operator tasks."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.core.observability import logger, metrics
from longhaul.guardrails import batch
from longhaul.operations import sweep as sweeping
from longhaul.operations.erasure import sweep_retention
from longhaul.services import services


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Every few minutes: expire jobs past their deadline, report jobs with no progress (event + metric) and the
    state machine versions live jobs still run; erase jobs past their retention."""
    s = services()
    if event.get("source") == batch.EVENT_SOURCE:  # a batch inference job changed state (the batch lane)
        finished = batch.on_state_change(s, _batch_jobs(s), event.get("detail") or {})
        return {"batch": event.get("detail", {}).get("batchJobName"), "finished": finished is not None}
    report = sweeping.sweep(s, s.now())
    done: dict[str, Any] = {**report, "versions_in_use": report.versions}
    # Retention: erase jobs whose retention ended, finish erasures cut short (`longhaul.operations.erasure`).
    done |= sweep_retention(s, s.now())
    if s.batch_jobs is not None:  # the batch lane's safety net: batches whose event was lost, or past their reserve
        done["batches_finished"] = batch.check(s, s.batch_jobs)
    return done


def _batch_jobs(s: Any) -> Any:
    if s.batch_jobs is None:
        raise RuntimeError("a batch inference event, but no batch role is configured")
    return s.batch_jobs


init_complete()
