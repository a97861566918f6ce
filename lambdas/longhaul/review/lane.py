"""The review step's lane: open a review, wait on a task token, climb the escalation ladder, apply the decision.

The state machine runs (see `state_machines.builder.WorkflowBuilder.review`):

    <review step> (open_review, through the step runner) → Choice on `next`
      "wait"     → <step>: wait (Lambda `.waitForTaskToken`, TimeoutSecondsPath = one rung) → <step>: advance → Choice
      "stop"     → Fail (the job was rejected or expired: already recorded)
      otherwise  → the next step (no review needed, or the decision is in)

The wait holds no compute: the Lambda stores the token (server side only), moves the job to `waiting_for_review`
and returns. A decision resumes the token at once; a rung's timeout ends the wait instead, and `advance` takes the
next rung of the ladder: a reminder at one third of the deadline (event + metric), reassignment to the secondary
group at two thirds (event), the policy's final action at the deadline (`expire`: the job ends `expired`;
`approve`: it goes on as approved). Each rung is a new wait with its own timeout, so nothing waits forever even if
a decision's token was lost: the next `advance` reads the decision from the store, which is the truth.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel

from longhaul.core import limits, tracing
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, JobError, JobStatus, WaitState
from longhaul.core.errors import CancelledError, InternalError
from longhaul.core.observability import REVIEW_WAIT_METRIC, emit, logger
from longhaul.core.records import Job, ReviewRecord, version_number
from longhaul.core.step_events import ReviewEvent
from longhaul.engine.context import StepContext
from longhaul.engine.spec import ReviewPolicy, registry
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.jobs import NewEvent, TransitionRejected
from longhaul.storage.reviews import ReviewClosed

RUNGS = 3  # remind, reassign, final action: the wait is split in three equal parts
EXPIRED_REASON = "review not answered in time"
S = JobStatus


def review_id_for(job: Job, step: str) -> str:
    """One review per job attempt and step: a retried step opens the same review again, a replay a new one."""
    return "rev_" + hashlib.sha256(f"{job.job_id}/{job.attempts}/{step}".encode()).hexdigest()[:24]


def rung_seconds(deadline_seconds: int) -> int:
    """One rung's wait, rounded up: the three rungs end at the deadline or after it, never before."""
    return max(1, math.ceil(deadline_seconds / RUNGS))


def _policy(workflow: str, step: str) -> ReviewPolicy:
    policy = registry()[workflow].step(step).review
    if policy is None:
        raise InternalError(f"{workflow}/{step} is not a review step", step=step)
    return policy


def _progress(workflow: str, step: str, message: str, *, done: bool = False) -> dict[str, Any]:
    """The job's progress while its review step waits for a person (the step is not done until it is decided)."""
    names = registry()[workflow].step_names
    completed = names.index(step) + (1 if done else 0)
    return {"completed": completed, "total": len(names), "unit": "steps", "message": message}


def _waiting(review: ReviewRecord) -> dict[str, Any]:
    message = f"{review.step}: waiting for a reviewer ({review.assignee_group}) until {iso(review.deadline)}"
    return _progress(review.workflow, review.step, message)


def _wait(review: ReviewRecord, seconds: int | None = None) -> dict[str, Any]:
    return {
        "next": "wait",
        "required": True,
        "review_id": review.review_id,
        "wait_seconds": seconds or rung_seconds(review.deadline_seconds),
    }


# ---------------------------------------------------------------------- open (the review step's work)


def open_review(ctx: StepContext) -> dict[str, Any]:
    """Decide whether the job needs a review (its mode, the workflow's reasons) and open it."""
    services, step, workflow = ctx.services, ctx.event.step, ctx.state.workflow
    spec, policy = registry()[workflow], _policy(workflow, step)
    job = services.jobs.get_job(ctx.job_id)
    assert job is not None  # the runner checked it
    mode = job.review_mode or policy.mode
    # An agent that reached a limit and hands over to review is reviewed whatever the mode.
    handed = [
        f"agent step {s.name} reached its {out['limit']} limit: {out.get('message', '')}"
        for s in spec.agent_steps
        if (out := ctx.state.steps.get(s.name) or {}).get("limit")
    ]
    # A segment that ran past its bound and hands over to review likewise.
    handed += [
        str(out.get("message") or f"segment {g.name} ran past its bound")
        for g in spec.segments
        if (out := ctx.state.steps.get(g.name) or {}).get("timed_out")
    ]
    if mode == "never" and not handed:
        return {"next": "continue", "required": False, "mode": mode}
    reasons = [*handed, *(str(r) for r in spec.hook("review_reasons")(ctx))]
    if mode == "auto" and not reasons:
        return {"next": "continue", "required": False, "mode": mode}
    if mode == "always":
        reasons = ["the job asked for review of every draft (mode always)", *reasons]
    material: BaseModel = spec.hook("review_material")(ctx)
    material_key = services.artifacts.put_json(keys.work_key(job.job_id, step, "material.json"), material)
    deadline_seconds = job.review_deadline_seconds or policy.deadline_seconds
    now = services.now()
    review = services.reviews.open(
        ReviewRecord(
            review_id=review_id_for(job, step),
            job_id=job.job_id,
            tenant_id=job.tenant_id,
            workflow=workflow,
            step=step,
            since=now,
            deadline=now + timedelta(seconds=deadline_seconds),
            deadline_seconds=deadline_seconds,
            assignee_group=policy.assignee_group,
            secondary_group=policy.secondary_group,
            reasons=reasons,
            material_key=material_key,
        )
    )
    # Waiting for a person does not eat the job's own time: its deadline moves past the review's.
    fields: dict[str, Any] = {"review": review.summary().model_dump(mode="json")}
    latest = review.deadline + timedelta(seconds=limits.REVIEW_DEADLINE_MARGIN_SECONDS)
    if job.deadline_at is None or job.deadline_at < latest:
        fields["deadline_at"] = iso(latest)
    services.jobs.update_job(job.job_id, fields)
    return _wait(review)


def close_for_stopped_job(
    services: Services, job: Job, status: Literal["cancelled", "expired"]
) -> dict[str, Any] | None:
    """A cancelled or expired job's open review, closed for its reviewers (its wait stopped with the execution) and
    its token dropped. Returns the job's summary of it to store with the job's own status change, so that the job
    and the review never disagree; None when the job has no open review."""
    if job.review is None or job.review.status != "pending":
        return None
    review = services.reviews.get(job.review.review_id)
    if review is None:
        return None
    try:
        review = services.reviews.change(review, {}, status=status)
    except ReviewClosed:  # decided or closed meanwhile: the job shows what it is now
        review = services.reviews.get(review.review_id) or review
    services.reviews.drop_token(review.review_id)
    return review.summary().model_dump(mode="json")


# ---------------------------------------------------------------------- the lane's Lambda (wait, advance)


def _review_of(services: Services, event: ReviewEvent) -> tuple[Job, ReviewRecord]:
    opened = event.input.steps.get(event.step) or {}
    review = services.reviews.get(str(opened.get("review_id") or ""))
    job = services.jobs.get_job(event.input.job_id)
    if review is None or job is None:
        raise InternalError("the review or its job does not exist", step=event.step)
    if job.status in TERMINAL_STATUSES or job.status == S.CANCEL_REQUESTED:
        raise CancelledError(f"job {job.job_id} is {job.status.value}", step=event.step)
    if review.review_id != review_id_for(job, event.step):  # an earlier attempt's: its decision is not this one's
        raise InternalError(
            f"review {review.review_id} belongs to an earlier attempt of job {job.job_id}", step=event.step
        )
    logger.append_keys(workflow_version=version_number(job.state_machine_version))
    return job, review


def _stop(services: Services, event: ReviewEvent, review: ReviewRecord) -> dict[str, Any]:
    """End the execution through JobStopped for a review closed without a decision: right only when its job stopped
    (cancelled, expired: recorded with the job). A live job would be left with nothing recorded, so that is a failure
    the step's failure path records."""
    job = services.jobs.get_job(event.input.job_id)
    if job is not None and job.status not in TERMINAL_STATUSES and job.status != S.CANCEL_REQUESTED:
        raise InternalError(
            f"review {review.review_id} is {review.status} while its job is {job.status.value}", step=event.step
        )
    return {"next": "stop", "review_id": review.review_id}


def wait(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """Store the token and wait (the job is `waiting_for_review`); if the review closed meanwhile, resume at once."""
    event = ReviewEvent.model_validate(raw_event)
    job, review = _review_of(services, event)
    if event.token is None:
        raise InternalError("the wait Task passed no task token", step=event.step)
    tokens = services.tokens
    assert tokens is not None
    if review.status != "pending":
        tokens.succeed(event.token, {"closed": review.status})
        return {"waiting": False}
    services.reviews.set_token(review.review_id, event.token)
    if job.status in (S.RUNNING, S.RETRYING):
        with contextlib.suppress(TransitionRejected):  # moved meanwhile: the next advance sorts it out
            services.jobs.transition(
                job.job_id,
                S.WAITING_FOR_REVIEW,
                event="review_requested",
                step=event.step,
                detail={
                    "review_id": review.review_id,
                    "assignee_group": review.assignee_group,
                    "deadline": iso(review.deadline),
                    "reasons": review.reasons,
                },
                set_fields={
                    "current_step": event.step,
                    "review": review.summary().model_dump(mode="json"),
                    "wait_state": review_wait(review, services.now()),
                    "progress": _waiting(review),
                },
                allowed_from=[S.RUNNING, S.RETRYING],
            )
            emit("ReviewsRequested", workflow=job.workflow)
    again = services.reviews.get(review.review_id)
    if again is not None and again.status != "pending":  # decided while the token was being stored
        tokens.succeed(event.token, {"closed": again.status})
    return {"waiting": True}


def advance(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """After a wait: apply the decision, or take the ladder's next rung."""
    event = ReviewEvent.model_validate(raw_event)
    job, review = _review_of(services, event)
    services.reviews.drop_token(review.review_id)  # spent either way: a later wait stores a new one
    for _ in range(3):  # a decision may land while a rung is taken: then apply it
        if review.status == "decided":
            return _apply(services, event, job, review)
        if review.status != "pending":
            return _stop(services, event, review)
        try:
            return _climb(services, event, job, review)
        except ReviewClosed:
            latest = services.reviews.get(review.review_id)
            assert latest is not None
            review = latest
    raise InternalError("the review kept changing", step=event.step)


def _climb(services: Services, event: ReviewEvent, job: Job, review: ReviewRecord) -> dict[str, Any]:
    policy, jobs, rung = _policy(job.workflow, event.step), services.jobs, review.rung + 1
    detail: dict[str, Any] = {"review_id": review.review_id, "rung": rung, "deadline": iso(review.deadline)}
    if rung == 1:
        review = services.reviews.change(review, {"rung": rung, "reminders": review.reminders + 1})
        jobs.append_event(
            job.job_id, "review_reminder", step=event.step, detail={**detail, "assignee_group": review.assignee_group}
        )
        emit("ReviewReminders", workflow=job.workflow)
    elif rung == 2:
        review = services.reviews.change(
            review, {"rung": rung, "assignee_group": review.secondary_group, "first_group": review.assignee_group}
        )
        jobs.append_event(
            job.job_id,
            "review_reassigned",
            step=event.step,
            detail={**detail, "from": policy.assignee_group, "to": review.assignee_group},
        )
        emit("ReviewsReassigned", workflow=job.workflow)
    elif (early := (review.deadline - services.now()).total_seconds()) > 0:
        # The rungs' waits ended before the deadline the job shows (a wait cut short, a clock ahead of the waits): the
        # final action waits for the rest of it, so a review never ends before its advertised deadline.
        return _wait(review, math.ceil(early))
    elif policy.final_action == "approve":
        review = services.reviews.change(
            review,
            {
                "rung": rung,
                "decision": "approve",
                "decided_by": "policy",
                "decided_at": iso(services.now()),
                "comment": f"approved by the workflow's policy: {EXPIRED_REASON}",
            },
            status="decided",
        )
        jobs.append_event(job.job_id, "review_auto_approved", step=event.step, detail=detail)
        _waited(services, review)
        return _apply(services, event, job, review)
    else:
        review = services.reviews.change(review, {"rung": rung}, status="expired")
        error = JobError(kind="review-expired", error="ReviewExpired", step=event.step, message=EXPIRED_REASON)
        with contextlib.suppress(TransitionRejected):
            jobs.transition(
                job.job_id,
                S.EXPIRED,
                event="job_expired",
                step=event.step,
                detail={**detail, "reason": EXPIRED_REASON},
                set_fields={
                    "error": error.model_dump(exclude_none=True),
                    "review": review.summary().model_dump(mode="json"),
                    "current_step": None,
                },
            )
        emit("ReviewsExpired", workflow=job.workflow)
        _waited(services, review)
        return {"next": "stop", "review_id": review.review_id}
    fields: dict[str, Any] = {"review": review.summary().model_dump(mode="json")}
    if job.status == S.WAITING_FOR_REVIEW:  # the progress says who it waits for now
        fields["progress"] = _waiting(review)
    jobs.update_job(job.job_id, fields, only_if=[S.WAITING_FOR_REVIEW, S.RUNNING])
    return _wait(review)


def _waited(services: Services, review: ReviewRecord) -> None:
    """How long a review waited, for the review-wait alarm (its p50 per workflow): emitted when a person decides
    (`api.reviews`) and here, when the ladder ends it (auto-approved or expired) — a review nobody decides counts."""
    waited = max((services.now() - review.since).total_seconds(), 0.0)
    emit(REVIEW_WAIT_METRIC, waited, MetricUnit.Seconds, workflow=review.workflow)


def review_wait(review: ReviewRecord, now: datetime) -> dict[str, Any]:
    """The job's wait state while its review is open: who decides, until its deadline."""
    state = WaitState(
        reason="review",
        until=review.deadline,
        detail=f"waiting for a reviewer of {review.assignee_group} to decide (review {review.review_id})",
        step=review.step,
        since=now,
    )
    return state.model_dump(mode="json")


def _review_wait_span(job: Job, review: ReviewRecord, now: datetime) -> None:
    """The review's wait in the job's trace, with its real times: from its request to its decision."""
    with tracing.job_trace(job.correlation_id, "apply review", {tracing.JOB_ID: job.job_id}):
        tracing.record_span(
            "review wait",
            review.since,
            review.decided_at or now,
            {
                tracing.JOB_ID: job.job_id,
                tracing.STEP: review.step,
                "longhaul.review_id": review.review_id,
                "longhaul.review_decision": review.decision or "",
                "longhaul.review_rung": review.rung,
            },
            error="ReviewRejected" if review.decision == "reject" else None,
        )


def _apply(services: Services, event: ReviewEvent, job: Job, review: ReviewRecord) -> dict[str, Any]:
    """Resume the job with the decision (approve/edit), or fail it (reject)."""
    _review_wait_span(job, review, services.now())
    jobs, summary = services.jobs, review.summary().model_dump(mode="json")
    detail = {
        "review_id": review.review_id,
        "decision": review.decision,
        "decided_by": review.decided_by,
        "decided_group": review.decided_group,
        "comment": review.comment,
    }
    if review.decision == "reject":
        message = f"the reviewer rejected the draft: {review.comment}" if review.comment else "the reviewer rejected it"
        error = JobError(kind="review-rejected", error="ReviewRejected", step=event.step, message=message[:500])
        with contextlib.suppress(TransitionRejected):
            jobs.transition(
                job.job_id,
                S.FAILED,
                event="job_failed",
                step=event.step,
                detail={**error.model_dump(exclude_none=True), **detail},
                set_fields={"error": error.model_dump(exclude_none=True), "review": summary},
            )
            emit("JobsFailed", workflow=job.workflow, step=event.step, kind=error.kind)
        return {"next": "stop", "review_id": review.review_id}
    if job.status == S.WAITING_FOR_REVIEW:
        try:
            jobs.transition(
                job.job_id,
                S.RUNNING,
                event="review_decided",
                step=event.step,
                detail=detail,
                set_fields={
                    "review": summary,
                    "wait_state": None,
                    "progress": _progress(job.workflow, event.step, f"{event.step}: {review.decision}", done=True),
                },
            )
        except TransitionRejected as moved:
            raise CancelledError(f"job {job.job_id} moved while resuming: {moved}", step=event.step) from None
    else:  # decided before the wait moved the job: it is still running (the decision goes on the bus with its event)
        decided = NewEvent("review_decided", step=event.step, detail=detail)
        jobs.append_with_bus(job.job_id, decided, {"review": summary})
    output = {
        "next": "continue",
        "required": True,
        "review_id": review.review_id,
        "decision": review.decision,
        "edits_key": review.edits_key,
    }
    # The step's checkpoint carries the decision: a replay from a later step does not ask again.
    services.checkpoints.put_step(job.job_id, event.step, None, {"status": "succeeded", "output": output})
    logger.info("review decided", extra={"job_id": job.job_id, "review_id": review.review_id})
    return output
