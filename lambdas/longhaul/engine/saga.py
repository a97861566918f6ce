"""The saga: undoing a job's side effects when it failed, was cancelled or expired after making them.

The job's terminal transition writes a saga for its attempt (`storage/sagas.py`); the dispatcher starts the
workflow's state machine on it (`<job>-c<attempt>`, whose first Choice takes the compensation lane, see
`state_machines/compensation_lane.py`):

    plan → more? → undo (retried; its failure path: `failed` → the lane's dead-letter queue) → plan → … → finish

`plan` lists what is left, latest effect first (reverse order of their intents); `undo` runs the latest one's
compensation tool (recorded on the effect's outbox item: a retried undo that had finished does nothing; it runs with
the job's own credentials and within its `timeout_seconds`, as an agent's tool call does), with the
events `compensation_started` and `compensation_finished`; `failed` records a compensation that gave up after its
retries (`compensation_failed`, a dead letter naming the effect); `finish` writes the job's record of what was undone
and what could not be (`JobView.compensation`). An effect whose outcome is unknown (its attempt died after acting)
is compensated too: it may have happened. Compensations are at least once: a retraction may be sent twice if its
attempt dies between sending and recording, never not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from longhaul.core import tracing
from longhaul.core.clock import iso
from longhaul.core.contracts import (
    CompensatedEffect,
    CompensationView,
    DeadLetter,
    UncompensatedEffect,
)
from longhaul.core.errors import InternalError, TransientError, kind_of
from longhaul.core.observability import emit, logger
from longhaul.core.records import EffectRecord, Job
from longhaul.core.settings import environ
from longhaul.core.step_events import SagaEvent
from longhaul.engine.failures import _cause_message, sanitize
from longhaul.engine.spec import COMPENSATION_STEP, Undo, registry
from longhaul.engine.tools import ToolContext, ToolRefused, ToolTimedOut, as_job, bounded
from longhaul.services import Services
from longhaul.storage.sagas import SAGA_STATUSES

ENDED = tuple(SAGA_STATUSES)


def handle(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The lane's function: one action of the saga."""
    event = SagaEvent.model_validate(raw_event)
    actions = {"plan": plan, "undo": undo, "failed": failed, "finish": finish}
    if event.action not in actions:
        raise InternalError(f"unknown saga action {event.action!r}", step=COMPENSATION_STEP)
    return actions[event.action](services, event)


def _job(services: Services, event: SagaEvent) -> Job:
    job = services.jobs.get_job(event.job_id)
    if job is None:
        raise InternalError(f"job {event.job_id} does not exist", step=COMPENSATION_STEP)
    return job


def pending(services: Services, job_id: str) -> list[EffectRecord]:
    """The effects still to undo, latest first."""
    return [e for e in reversed(services.effects.of_job(job_id)) if e.to_compensate]


def plan(services: Services, event: SagaEvent) -> dict[str, Any]:
    job = _job(services, event)
    if job.status not in ENDED or job.attempts != event.attempt:  # replayed meanwhile: that attempt runs now
        logger.warning("saga skipped: the job is running again", extra={"job_id": job.job_id})
        return {"remaining": 0, "next": None}
    left = pending(services, job.job_id)
    if job.compensation is not None and job.compensation.status == "pending":
        view = job.compensation.model_copy(update={"status": "running", "started_at": services.now()})
        services.jobs.update_job(job.job_id, {"compensation": view.model_dump(mode="json")}, only_if=ENDED)
        services.jobs.append_event(
            job.job_id,
            "saga_started",
            step=COMPENSATION_STEP,
            detail={"attempt": event.attempt, "effects": [e.operation_id for e in left]},
        )
    return {"remaining": len(left), "next": left[0].operation_id if left else None}


def undo(services: Services, event: SagaEvent) -> dict[str, Any]:
    """Compensate the effect `operation_id`; then what is left."""
    job = _job(services, event)
    effect = services.effects.get(job.job_id, event.operation_id or "")
    if effect is None or not effect.to_compensate:
        return plan(services, event)
    spec = registry()[job.workflow]
    assert effect.compensation is not None
    undoing = spec.tool_registry[effect.compensation]
    detail = {"operation_id": effect.operation_id, "tool": effect.tool, "compensation": undoing.name}
    services.jobs.append_event(job.job_id, "compensation_started", step=COMPENSATION_STEP, detail=detail)
    effects = services.effects
    effect = effects.compensating(effect, "pending", owner=event.execution or "")
    ctx = ToolContext(
        services, job, spec, effect.step, effect.turn, effect.call, operation_id=f"{effect.operation_id}-undo"
    )
    request = Undo(
        operation_id=effect.operation_id,
        tool=effect.tool,
        input=effect.input,
        output=effect.output,
        outcome_known=effect.status == "done",
    )
    try:  # with the job's own credentials (the tool role), within the compensation's own bound
        answer = bounded(undoing, ctx, lambda: undoing.function()(as_job(ctx, undoing), request))
    except ToolRefused as refused:  # it cannot be undone: no retry will change that
        _gave_up(services, job, effect, undoing.name, str(refused))
        return plan(services, event)
    except ToolTimedOut as timed_out:  # the lane's retries try again (a compensation is at least once)
        raise TransientError(str(timed_out), step=COMPENSATION_STEP) from timed_out
    output = undoing.output_model.model_validate(answer.model_dump()).model_dump(mode="json")
    effects.compensating(effect, "done", output=output)
    services.jobs.append_event(
        job.job_id, "compensation_finished", step=COMPENSATION_STEP, detail={**detail, "output": output}
    )
    emit("Compensations", workflow=job.workflow, outcome="done")
    return plan(services, event)


def _gave_up(services: Services, job: Job, effect: EffectRecord, compensation: str, reason: str) -> None:
    services.effects.compensating(effect, "failed", error=reason)
    detail = {"operation_id": effect.operation_id, "tool": effect.tool, "compensation": compensation, "error": reason}
    services.jobs.append_event(job.job_id, "compensation_failed", step=COMPENSATION_STEP, detail=detail)
    emit("Compensations", workflow=job.workflow, outcome="failed")


def failed(services: Services, event: SagaEvent) -> dict[str, Any]:
    """A compensation (or the lane itself) failed after its retries: record it and return its dead letter. When the
    lane itself failed, the job's record is written as it stands: what is not undone yet is listed as such."""
    job = _job(services, event)
    message = _cause_message(event.cause) or event.error or "failed"
    effect = services.effects.get(job.job_id, event.operation_id or "") if event.operation_id else None
    if effect is not None and effect.compensation_status != "done":
        _gave_up(services, job, effect, effect.compensation or "", sanitize(f"{event.error}: {message}"))
    letter = DeadLetter(
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        workflow=job.workflow,
        step=COMPENSATION_STEP,
        item=effect.seq if effect else None,
        item_name=f"{effect.tool} {effect.operation_id}" if effect else None,
        error=event.error or "CompensationFailed",
        kind=kind_of(event.error or ""),
        message=sanitize(message),
        attempts=1,
        execution=event.execution,
        trace_id=tracing.current_trace_id() or environ().get(tracing.TRACE_HEADER_ENV) or event.execution,
        failed_at=services.now(),
        replay={
            "note": "a compensation gave up: undo this effect by hand; the job's `compensation.not_undone` lists it",
            "method": "GET",
            "path": f"/v1/ops/jobs/{job.job_id}",
        },
    )
    services.dead_letters.record(letter)
    if effect is None:  # the lane itself failed (plan or finish): the job says what is left undone
        finish(services, event)
    return letter.model_dump(mode="json")


def finish(services: Services, event: SagaEvent) -> dict[str, Any]:
    """The job's record of the saga: what was undone, what could not be."""
    job = _job(services, event)
    if job.status not in ENDED or job.attempts != event.attempt:
        return {"status": "skipped"}
    undone: list[CompensatedEffect] = []
    not_undone: list[UncompensatedEffect] = []
    for effect in reversed(services.effects.of_job(job.job_id)):
        if effect.compensation is None or not effect.acted or effect.status == "failed":
            continue  # nothing to undo: no compensation declared, or it never happened
        if effect.compensation_status == "done":
            undone.append(
                CompensatedEffect(
                    operation_id=effect.operation_id,
                    tool=effect.tool,
                    compensation=effect.compensation,
                    step=effect.step,
                    at=effect.compensated_at,
                )
            )
        else:
            not_undone.append(
                UncompensatedEffect(
                    operation_id=effect.operation_id,
                    tool=effect.tool,
                    compensation=effect.compensation,
                    step=effect.step,
                    reason=effect.compensation_error or "its compensation did not run",
                )
            )
    started = job.compensation.started_at if job.compensation else None
    view = CompensationView(
        status="incomplete" if not_undone else "finished",
        attempt=event.attempt,
        undone=undone,
        not_undone=not_undone,
        started_at=started or services.now(),
        finished_at=services.now(),
    )
    services.jobs.update_job(job.job_id, {"compensation": view.model_dump(mode="json")}, only_if=ENDED)
    services.jobs.append_event(
        job.job_id,
        "saga_finished",
        step=COMPENSATION_STEP,
        detail={"status": view.status, "undone": len(undone), "not_undone": len(not_undone)},
    )
    saga = services.effects.saga(job.job_id, event.attempt)
    if saga is not None:
        services.effects.mark_saga(saga, "finished")
    logger.info("saga finished", extra={"job_id": job.job_id, "status": view.status, "at": iso(services.now())})
    return {"status": view.status}
