"""The failure recorder of the house policy: what a state machine's Catch calls before the step's dead letter.

It marks the step (or fan-out item) and the job failed with a sanitized, readable error and the real attempt
count, and returns the dead-letter message (also indexed for operators through the dead-letters port).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from longhaul.core import tracing
from longhaul.core.contracts import DeadLetter, JobError, JobStatus
from longhaul.core.errors import ITEMS_FAILED, ChildFailed, kind_of
from longhaul.core.observability import emit, logger
from longhaul.core.records import StepError, StepRecord
from longhaul.core.settings import environ
from longhaul.core.step_events import FailureEvent
from longhaul.engine.spec import imported
from longhaul.services import Services
from longhaul.storage.jobs import TransitionRejected

MESSAGE_LIMIT = 500
# The statuses a recorded failure ends a job from (not `cancel_requested`, whose cancellation ends it `cancelled`).
FAILABLE = (
    JobStatus.QUEUED,
    JobStatus.RUNNING,
    JobStatus.RETRYING,
    JobStatus.WAITING_FOR_REVIEW,
    JobStatus.PAUSED,
)
#: The ASL names of a timeout: the Task's own (`TimeoutSeconds`) and the function's, as Lambda reports it.
TASK_TIMEOUT = "States.Timeout"
FUNCTION_TIMEOUT = "Sandbox.Timedout"


def sanitize(message: str) -> str:
    """One line, bounded, no stack traces (a traceback is reduced to its last line)."""
    text = str(message)
    if "Traceback (most recent call last)" in text:
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        text = lines[-1] if lines else ""
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def _cause_message(cause: str | None) -> str:
    if not cause:
        return ""
    try:
        parsed = json.loads(cause)
    except ValueError:
        return sanitize(cause)
    if isinstance(parsed, dict):
        return sanitize(str(parsed.get("errorMessage") or parsed.get("message") or cause))
    return sanitize(cause)


def ref_name(ref: Any) -> str | None:
    """The name an item's reference carries (a document's), if any."""
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) else None


def record_failure(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """Record a failure and return the dead-letter message (also kept in the table for operators).

    A fan-out item's failure marks only the item (the other items go on); the job fails once after the fan-out,
    with `ItemsFailed` summarising its failed items. Any other failure marks the step and the job failed. A grouped
    fan-out's failed group (`event.items`) records each of its failed items as an item's failure and returns their
    dead letters (`{"dead_letters": [...]}`, which the state machine sends one by one).
    """
    event = FailureEvent.model_validate(raw_event)
    if event.items is not None:
        return {"dead_letters": [_record(services, e) for e in _group_failures(services, event)]}
    return _record(services, event)


def _group_failures(services: Services, event: FailureEvent) -> list[FailureEvent]:
    """A failed group's items that did not commit, each as the failure of an item: with the error its runner
    recorded for its last attempt, or else (its attempt never returned: the group's invocation timed out or its
    process died before it ran or while it ran) the group's own."""
    records = {
        r.item: r for r in services.checkpoints.steps(event.job_id) if r.step == event.step and r.item is not None
    }
    failed: list[FailureEvent] = []
    for item in event.items or ():
        record = records.get(item.index)
        if record is not None and record.succeeded:
            continue
        one = event.model_copy(update={"items": None, "item": item.index, "ref": item.ref})
        if record is not None and record.error is not None and record.status in ("failed", "retrying"):
            one = one.model_copy(update={"error": record.error.error, "cause": record.error.message, "limits": None})
        failed.append(one)
    return failed


def _record(services: Services, event: FailureEvent) -> dict[str, Any]:
    jobs, checkpoints = services.jobs, services.checkpoints
    if event.error == ITEMS_FAILED:
        error, attempts = _items_failed(services, event)
    else:
        message = _cause_message(event.cause) or event.error
        error = JobError(
            kind=kind_of(event.error), error=event.error, step=event.step, item=event.item, message=message
        )
        record = checkpoints.get_step(event.job_id, event.step, event.item)
        attempts, message = _attempts_and_message(event, record.attempts if record else 0)
        error = error.model_copy(update={"message": message, "detail": _child_detail(services, event)})
        checkpoints.put_step(
            event.job_id,
            event.step,
            event.item,
            {"status": "failed", "error": error.model_dump(exclude_none=True), "attempts": attempts},
        )
    stored_error = error.model_dump(exclude_none=True)
    job = jobs.get_job(event.job_id)
    if event.item is not None:
        named = {"item_name": ref_name(event.ref)} if ref_name(event.ref) else {}
        jobs.append_event(
            event.job_id, "item_failed", step=event.step, item=event.item, detail={**stored_error, **named}
        )
    else:
        try:
            jobs.transition(
                event.job_id,
                JobStatus.FAILED,
                event="job_failed",
                step=event.step,
                item=error.item,
                detail={**stored_error, "attempts": attempts},
                set_fields={"error": stored_error, "current_step": event.step},
                # A job being cancelled ends cancelled: a failure its stop caused (locally a stopped execution may
                # still run a Catch), or one that raced the cancel, is the step's only.
                allowed_from=FAILABLE,
            )
            emit("JobsFailed", workflow=event.workflow, step=event.step, kind=error.kind)
        except TransitionRejected:
            logger.warning("job already finished; failure recorded on the step only", extra={"job_id": event.job_id})
    dead_letter = DeadLetter(
        job_id=event.job_id,
        tenant_id=job.tenant_id if job else None,
        workflow=event.workflow,
        step=event.step,
        item=event.item,
        item_name=ref_name(event.ref),
        error=error.error,
        kind=error.kind,
        message=error.message,
        attempts=attempts,
        execution=event.execution,
        trace_id=tracing.current_trace_id() or environ().get(tracing.TRACE_HEADER_ENV) or event.execution,
        failed_at=services.now(),
        replay={
            "method": "POST",
            "path": f"/v1/ops/jobs/{event.job_id}/replay",
            "body": {"from_step": event.step, "reason": "<why the replay will succeed now>"},
        },
    )
    if event.error != ITEMS_FAILED:  # the summary of a fan-out sends no dead letter of its own
        services.dead_letters.record(dead_letter)
    return dead_letter.model_dump(mode="json")


def _child_detail(services: Services, event: FailureEvent) -> dict[str, Any] | None:
    """A failed child step: the child and its error (`longhaul.api.children.child_detail`, by name: the API's)."""
    if kind_of(event.error) != ChildFailed.kind:
        return None
    job = services.jobs.get_job(event.job_id)
    if job is None:
        return None
    found: dict[str, Any] | None = imported("longhaul.api.children:child_detail")(services, job, event.step)
    return found


def _items_failed(services: Services, event: FailureEvent) -> tuple[JobError, int]:
    """The summary of a fan-out's failed items: the items the state machine saw fail (`event.outcomes`, or those of
    `event.count` that did not commit), each with the error recorded for it. An item whose failure nobody recorded
    (its recorder had not finished, or failed, when the fan-out ended; the runner records every failure its handler
    sees) never returned from an attempt: it is told as timed out."""
    records = {
        r.item: r for r in services.checkpoints.steps(event.job_id) if r.step == event.step and r.item is not None
    }
    if event.outcomes is not None:
        total = len(event.outcomes)
        numbers = [i for i, outcome in enumerate(event.outcomes) if outcome is True]
    elif event.count is not None:
        total = event.count
        numbers = [i for i in range(total) if not (i in records and records[i].succeeded)]
    else:  # a definition deployed before the summary was given either: the failures recorded
        total = len(records)
        numbers = sorted(i for i, r in records.items() if r.status == "failed")
    errors = [_item_error(records.get(i), event.step, i) for i in numbers]
    if not errors:  # every item committed after all (a late success): the fan-out's failure is its own
        message = sanitize(event.cause or "the fan-out failed, but each of its items has committed since")
        return JobError(kind="internal", error=ITEMS_FAILED, step=event.step, message=message), 0
    first = errors[0]
    error = JobError(
        kind=first.kind,
        error=first.error,
        step=event.step,
        item=numbers[0],
        items=numbers,
        message=sanitize(f"{len(numbers)} of {total} items failed (items {numbers}); first: {first.message}"),
    )
    attempts = max((r.attempts for i in numbers if (r := records.get(i)) is not None), default=0)
    return error, attempts


def _item_error(record: StepRecord | None, step: str, item: int) -> StepError:
    """What went wrong with a failed item, as recorded by its recorder or by the runner for its last attempt; else
    (no record: no attempt reached the handler; `running`: the last one never returned) a timeout."""
    if record is not None and record.error is not None and record.status in ("failed", "retrying"):
        return record.error
    return StepError(
        kind=kind_of(TASK_TIMEOUT),
        error=TASK_TIMEOUT,
        step=step,
        item=item,
        message="no attempt returned before its timeout (its failure was not recorded in time)",
    )


def _attempts_and_message(event: FailureEvent, started: int) -> tuple[int, str]:
    """How many attempts the step had and what went wrong, in words (`started`: attempts its handler began).

    A timeout that ends in the Catch has exhausted its retrier: exactly `timeout_attempts` attempts timed out
    (earlier attempts may have failed otherwise). Any failure means at least one attempt.
    """
    limits = event.limits
    if event.error in (TASK_TIMEOUT, FUNCTION_TIMEOUT) and limits is not None:
        timed_out = limits.timeout_attempts
        attempts = max(started, timed_out)
        if event.error == TASK_TIMEOUT:
            what = f"timed out after {limits.task_timeout_seconds} s"
        else:
            what = f"the function timed out after {limits.function_timeout_seconds} s"
        on = f"each of {timed_out} attempts" if attempts == timed_out else f"{timed_out} of {attempts} attempts"
        return attempts, f"{what} on {on}"
    return max(started, 1), _cause_message(event.cause) or event.error
