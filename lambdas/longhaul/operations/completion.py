"""Route a failed job to a person: an operator opens a review of kind `complete`; a reviewer submits the result.

The failed job's execution is over, so nothing waits on a task token: the decision completes the job here. Opening
is one transaction (the review, the job's `review` and event `manual_completion_requested`, on the job being
failed); so is completing (the review decided, the job `failed → completed` — allowed only on this path,
`JobStore.complete_by_person` — with event `job_completed_by_person` and its `job.completed` webhook), after the
result passed the workflow's result model and business rules (`longhaul.review.completion`) and its renderings
were written where a normal completion writes them. A second decision (`ReviewClosed`: the API's 409
`review-closed`), or one after the job was replayed (`JobStatusConflict`), is a 409.
"""

from __future__ import annotations

import contextlib
import hashlib
from datetime import timedelta
from typing import Any

from longhaul.core import limits
from longhaul.core.auth import Principal
from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus, PersonCompletion
from longhaul.core.observability import emit, logger
from longhaul.core.problems import ApiProblem, InvalidRequest, JobStatusConflict, NotFound
from longhaul.core.records import JOB_ID, Job, ReviewRecord
from longhaul.review.completion import ResultRefused, context_of, hook, supports
from longhaul.review.contracts import (
    DecisionOutcome,
    DecisionRequest,
    ManualCompletionOutcome,
    ManualCompletionRequest,
    ReviewMaterial,
)
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.dynamo import Cancelled
from longhaul.storage.jobs import NewEvent, TransitionRejected
from longhaul.storage.reviews import ReviewClosed
from longhaul.workflows import REGISTRY

STEP = "manual-completion"  # where its material is kept among the job's work artifacts
TRIES = 4


class NotCompletableByHand(ApiProblem):
    status, slug, title = 409, "not-completable-by-hand", "This workflow cannot be completed by hand"


def review_id_for(job: Job) -> str:
    """One manual completion per attempt of the job: asked twice, the same review; after a replay, a new one."""
    return "rev_" + hashlib.sha256(f"{job.job_id}/{job.attempts}/complete".encode()).hexdigest()[:24]


def _who(principal: Principal) -> str:
    return f"{principal.tenant_id}/{principal.role}/{principal.key_id or 'unknown'}"


def _outcome(review: ReviewRecord) -> ManualCompletionOutcome:
    return ManualCompletionOutcome(
        review_id=review.review_id,
        job_id=review.job_id,
        status=review.status,
        assignee_group=review.assignee_group,
        since=review.since,
        deadline=review.deadline,
        review_url=f"/v1/reviews/{review.review_id}",
    )


def request(
    services: Services, principal: Principal, job_id: str, body: ManualCompletionRequest
) -> tuple[ManualCompletionOutcome, bool]:
    """Open the review of kind `complete` for a failed job (any tenant's: an operator's action). Returns it and
    whether it is new (asked again while it is pending: the same review, nothing written)."""
    jobs = services.jobs
    job = jobs.get_job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    spec = REGISTRY[job.workflow]
    if not supports(spec):
        raise NotCompletableByHand(f"workflow {job.workflow} has no result a person can write; replay the job")
    for _ in range(TRIES):
        existing = services.reviews.get(review_id_for(job))
        if existing is not None and existing.status == "pending" and job.status == JobStatus.FAILED:
            return _outcome(existing), False
        if job.status != JobStatus.FAILED:
            raise JobStatusConflict(
                f"job {job_id} is {job.status.value}; only a failed job is handed to a person",
                job_status=job.status.value,
            )
        now = services.now()
        by = _who(principal)
        draft = hook(spec, "draft")(context_of(services, job, spec))
        material_key = services.artifacts.put_json(
            keys.work_key(job.job_id, STEP, f"material-{job.attempts}.json"), ReviewMaterial(draft=draft, evidence=[])
        )
        failed = job.error.message if job.error and job.error.message else "the job failed"
        review = ReviewRecord(
            review_id=review_id_for(job),
            job_id=job.job_id,
            tenant_id=job.tenant_id,
            workflow=job.workflow,
            step=spec.last_step,
            kind="complete",
            since=now,
            deadline=now + timedelta(seconds=limits.MANUAL_COMPLETION_DEADLINE_SECONDS),
            deadline_seconds=limits.MANUAL_COMPLETION_DEADLINE_SECONDS,
            assignee_group=body.assignee_group,
            secondary_group=body.assignee_group,
            reasons=[f"the job failed: {failed}", f"handed to a person by {by}: {body.note}"],
            material_key=material_key,
            requested_by=by,
            note=body.note,
        )
        event = NewEvent(
            "manual_completion_requested",
            detail={
                "by": principal.tenant_id,
                "role": principal.role,
                "requested_by": by,
                "review_id": review.review_id,
                "assignee_group": body.assignee_group,
                "note": body.note,
            },
        )
        try:
            jobs.write(
                job,
                [event],
                fields={"review": review.summary().model_dump(mode="json")},
                items=[services.reviews.open_write(review)],
                only_if=[JobStatus.FAILED],
            )
        except Cancelled:  # the job moved, or the review was opened meanwhile: read again
            found = jobs.get_job(job_id)
            if found is None:
                raise NotFound(f"no job {job_id!r}") from None
            job = found
            continue
        logger.info("manual completion requested", extra={"job_id": job_id, "review_id": review.review_id})
        return _outcome(review), True
    raise JobStatusConflict(f"job {job_id} kept changing; ask again", job_status=job.status.value)


def _refusal(refused: ResultRefused) -> InvalidRequest:
    errors = [{**e, "loc": ["body", "result", *e.get("loc", [])]} for e in refused.errors]
    return InvalidRequest(refused.message, errors=errors)


def complete(
    services: Services, principal: Principal, review: ReviewRecord, decision: DecisionRequest
) -> DecisionOutcome:
    """The reviewer's result for a review of kind `complete`: checked, rendered, and the job completed with it."""
    if decision.decision != "complete" or decision.result is None:
        raise InvalidRequest(
            "a review of kind `complete` is decided with `complete` and the job's `result`",
            errors=[{"loc": ["body", "decision"], "msg": "expected 'complete' with `result`"}],
        )
    jobs, store = services.jobs, services.artifacts
    job = jobs.get_job(review.job_id)
    if job is None or job.status != JobStatus.FAILED:  # replayed meanwhile: the review is moot, and closed as such
        with contextlib.suppress(ReviewClosed):
            services.reviews.change(review, {}, status="cancelled")
        status = job.status.value if job else "missing"
        raise JobStatusConflict(
            f"job {review.job_id} is {status}: it is no longer failed, so it is not completed by hand",
            job_status=status,
        )
    spec = REGISTRY[job.workflow]
    by = f"{principal.tenant_id}/reviewer/{principal.key_id or 'unknown'}"
    now = services.now()
    completion = PersonCompletion(
        by=by,
        review_id=review.review_id,
        at=now,
        requested_by=review.requested_by or "an operator",
        note=review.note,
        comment=decision.comment,
    )
    try:
        hand = hook(spec, "complete")(context_of(services, job, spec), decision.result, completion)
    except ResultRefused as refused:  # the review stays open: the reviewer corrects and submits again
        raise _refusal(refused) from None
    store.put_bytes(keys.result_key(job.job_id, "md"), hand.markdown.encode(), "text/markdown")
    result_key = store.put_json(keys.result_key(job.job_id), hand.result)
    decided = review.model_copy(update={"status": "decided", "decision": "complete", "decided_at": now})
    total = len(spec.steps)
    fields: dict[str, Any] = {
        "result_key": result_key,
        "current_step": None,
        "error": None,
        "review": decided.summary().model_dump(mode="json"),
        "progress": {"completed": total, "total": total, "unit": "steps", "message": "completed by a person"},
    }
    detail = {
        "by": by,
        "review_id": review.review_id,
        "requested_by": completion.requested_by,
        "previous_error": job.error.model_dump(mode="json", exclude_none=True) if job.error else None,
    }
    for _ in range(TRIES):
        item = services.reviews.decision_write(
            review,
            {
                "decision": "complete",
                "comment": decision.comment,
                "edits_key": result_key,
                "decided_by": by,
                "decided_group": principal.reviews_for(review.reviewer_groups),
                "decided_at": iso(now),
            },
        )
        try:
            jobs.complete_by_person(job, detail=detail, fields=fields, items=[item])
            break
        except (Cancelled, TransitionRejected):
            latest = services.reviews.get(review.review_id)
            if latest is None or latest.status != "pending":
                closed = latest.status if latest else "missing"
                raise ReviewClosed(closed) from None
            found = jobs.get_job(review.job_id)
            if found is None or found.status != JobStatus.FAILED:
                status = found.status.value if found else "missing"
                raise JobStatusConflict(
                    f"job {review.job_id} is {status}: it is no longer failed", job_status=status
                ) from None
            job = found  # another event moved its counter: again on the job as it is
    else:
        raise JobStatusConflict(f"job {review.job_id} kept changing; submit again", job_status=job.status.value)
    emit("JobsCompleted", workflow=job.workflow)
    emit("JobsCompletedByPerson", workflow=job.workflow)
    logger.info("job completed by a person", extra={"job_id": job.job_id, "review_id": review.review_id})
    return DecisionOutcome(
        review_id=review.review_id, job_id=job.job_id, decision="complete", job_status=JobStatus.COMPLETED
    )
