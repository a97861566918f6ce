"""Step handlers: one entry point for every step of every workflow, dispatched on the event's own (workflow, step)
through the workflow registry; the failure recorder of the house policy, and the item tally of its Distributed
Maps."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from handlers.job_keys import lane_invocation
from longhaul.core import correlation, tracing
from longhaul.core.observability import bind_job, logger
from longhaul.engine.failures import record_failure as _record_failure
from longhaul.engine.items import tally
from longhaul.engine.runner import run_group, run_step
from longhaul.engine.spec import CHILD_WAIT, StepKind, imported, registry
from longhaul.services import services


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    state = event.get("input") or {}
    bind_job(
        state.get("job_id"),
        state.get("correlation_id"),
        workflow=state.get("workflow"),
        step=event.get("step"),
        item=event.get("item"),
        attempt=event.get("attempt", 0),
    )
    with (
        correlation.bound(state.get("correlation_id")),
        tracing.job_trace(
            state.get("correlation_id"),
            "invoke step",
            {tracing.JOB_ID: state.get("job_id"), tracing.STEP: event.get("step")},
        ),
    ):
        if event.get("token") is not None:  # a child step's wait, or the batch lane's Task before a fan-out
            if child_step(state.get("workflow"), event.get("step")):
                return imported(CHILD_WAIT)(event, services())  # type: ignore[no-any-return]
            from longhaul.engine.batch_lane import submit_batch

            return submit_batch(event, services())
        if event.get("items") is not None:  # a grouped fan-out's group of items
            return run_group(event, services())
        return run_step(event, services())


def child_step(workflow: object, step: object) -> bool:
    spec = registry().get(str(workflow))
    return spec is not None and str(step) in spec.step_names and spec.step(str(step)).kind == StepKind.CHILD


@logger.inject_lambda_context(clear_state=True)
def record_failure(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with lane_invocation(
        services(), event.get("job_id"), workflow=event.get("workflow"), step=event.get("step"), item=event.get("item")
    ):
        return _record_failure(event, services())


@logger.inject_lambda_context(clear_state=True)
def tally_items(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with lane_invocation(services(), event.get("job_id"), workflow=event.get("workflow"), step=event.get("step")):
        return tally(event, services())


init_complete()
