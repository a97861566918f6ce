"""The reviewer API's use cases: list a tenant's reviews, show one (draft, evidence, reasons), decide.

Only keys with the `reviewer` role reach these (another role is a 403); a review of another tenant is a 404, and so
is a review of a group the reviewer is not in (`Principal.groups`; `ReviewRecord.reviewer_groups`: the group it is
assigned to and, once the escalation ladder reassigned it, the group it was first assigned to). A reviewer without
groups (a key made without `--groups`) reviews every group of its tenant. A decision is a conditional write on the
review being pending (a second decision, or one after the deadline's final action, is a 409), then the waiting
execution is resumed with the task token, which never leaves the store.

Personal data: when the tenant's policy redacts some kinds (`redact`), a `reviewer` sees the draft and the evidence
with placeholders (`<IBAN_1>`), a `pii_reviewer` as they are. The placeholders are made again from the material when a
reviewer's edits come back (the same text redacts to the same placeholders), and an edit that kept one gets its value
back: the mapping is never stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import ValidationError

from longhaul.core.auth import Principal
from longhaul.core.clock import iso
from longhaul.core.observability import REVIEW_WAIT_METRIC, emit
from longhaul.core.ports import EngineUnavailable
from longhaul.core.problems import ApiProblem, BadRequest, Forbidden, InvalidRequest, NotFound
from longhaul.core.records import ReviewRecord, ReviewStatus
from longhaul.core.redaction import Redactor
from longhaul.review.contracts import (
    DecisionOutcome,
    DecisionRequest,
    ReviewDetail,
    ReviewList,
    ReviewMaterial,
    ReviewView,
)
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.listing import BadCursor
from longhaul.storage.reviews import ReviewClosed
from longhaul.workflows import REGISTRY

REVIEW_ID_PREFIX = "rev_"


class ReviewConflict(ApiProblem):
    status, slug, title = 409, "review-closed", "The review is no longer pending"


def _view(review: ReviewRecord) -> dict[str, Any]:
    return {
        "review_id": review.review_id,
        "job_id": review.job_id,
        "workflow": review.workflow,
        "kind": review.kind,
        "status": review.status,
        "since": review.since,
        "deadline": review.deadline,
        "assignee_group": review.assignee_group,
        "reminders": review.reminders,
        "rung": review.rung,
        "reasons": review.reasons,
        "decision": review.decision,
        "decided_at": review.decided_at,
        "decided_by": review.decided_by,
        "decided_group": review.decided_group,
        "note": review.note,
    }


@dataclass
class ReviewService:
    services: Services

    def _reviewer(self, principal: Principal) -> str:
        if not principal.is_reviewer:
            raise Forbidden("review routes need a key with the reviewer role")
        return principal.tenant_id

    def _review(self, principal: Principal, review_id: str) -> ReviewRecord:
        tenant = self._reviewer(principal)
        found = (
            self.services.reviews.get(review_id, tenant_id=tenant) if review_id.startswith(REVIEW_ID_PREFIX) else None
        )
        if found is None or principal.reviews_for(found.reviewer_groups) is None:
            raise NotFound(f"no review {review_id!r}")
        return found

    def list(self, principal: Principal, status: ReviewStatus, limit: int, cursor: str | None) -> ReviewList:
        tenant = self._reviewer(principal)
        try:
            found, next_cursor = self.services.reviews.page(
                tenant,
                status,
                limit=limit,
                cursor=cursor,
                visible=None if principal.groups is None else lambda r: bool(principal.reviews_for(r.reviewer_groups)),
            )
        except BadCursor:
            raise BadRequest("cursor must be a value returned as next_cursor by the same listing") from None
        return ReviewList(reviews=[ReviewView.model_validate(_view(r)) for r in found], next_cursor=next_cursor)

    def detail(self, principal: Principal, review_id: str) -> ReviewDetail:
        review = self._review(principal, review_id)
        material = ReviewMaterial.model_validate(self.services.artifacts.get_json(review.material_key))
        job = self.services.jobs.get_job(review.job_id)
        draft, evidence, redactor = self._redacted(principal, review, material)
        return ReviewDetail.model_validate(
            {
                **_view(review),
                "draft": draft,
                "evidence": evidence,
                "comment": review.comment,
                "redacted": sorted(redactor.kinds) if redactor is not None else None,
                "job_status": job.status if job else None,
            }
        )

    def _redacted(
        self, principal: Principal, review: ReviewRecord, material: ReviewMaterial
    ) -> tuple[dict[str, Any], Sequence[Any], Redactor | None]:
        """The draft and evidence as this reviewer sees them, and the redactor that made its placeholders (None: a
        `pii_reviewer`, or a tenant whose policy redacts nothing). Always made in the same order, draft first."""
        kinds = [] if principal.sees_personal_data else self.services.budgets.policy(review.tenant_id).redact
        if not kinds:
            return material.draft, [e.model_dump() for e in material.evidence], None
        redactor = Redactor(kinds)
        draft = redactor.redact_value(material.draft)
        evidence = [redactor.redact_value(e.model_dump()) for e in material.evidence]
        return draft, evidence, redactor

    def decide(self, principal: Principal, review_id: str, request: DecisionRequest) -> DecisionOutcome:
        review = self._review(principal, review_id)
        if review.status != "pending":
            raise ReviewConflict(f"review {review_id} is already {review.status}", review_status=review.status)
        if review.kind == "complete":  # a failed job's result, written by a person: no execution waits on it
            from longhaul.operations import completion  # a reviewer's rarer action: not every cold start's import

            try:
                return completion.complete(self.services, principal, review, request)
            except ReviewClosed as closed:
                raise ReviewConflict(
                    f"review {review_id} is already {closed.status}", review_status=closed.status
                ) from None
        if request.decision == "complete":
            raise InvalidRequest(
                "the decision `complete` is for a review of kind `complete` (a failed job handed to a person)",
                errors=[{"loc": ["body", "decision"], "msg": "approve, reject or edit"}],
            )
        edits_key = self._edits(principal, review, request)
        try:
            decided = self.services.reviews.change(
                review,
                {
                    "decision": request.decision,
                    "comment": request.comment,
                    "edits_key": edits_key,
                    "decided_by": f"{principal.tenant_id}/reviewer/{principal.key_id or 'unknown'}",
                    "decided_group": principal.reviews_for(review.reviewer_groups),
                    "decided_at": iso(self.services.now()),
                },
                status="decided",
            )
        except ReviewClosed as closed:
            raise ReviewConflict(
                f"review {review_id} is already {closed.status}", review_status=closed.status
            ) from None
        self._resume(decided)
        waited = (self.services.now() - review.since).total_seconds() if review.since else None
        if waited is not None:
            emit(REVIEW_WAIT_METRIC, max(waited, 0.0), MetricUnit.Seconds, workflow=review.workflow)
        assert decided.decision is not None
        return DecisionOutcome(review_id=decided.review_id, job_id=decided.job_id, decision=decided.decision)

    def _edits(self, principal: Principal, review: ReviewRecord, request: DecisionRequest) -> str | None:
        if request.decision != "edit":
            if request.edits:
                raise InvalidRequest(
                    "`edits` go with the decision `edit`",
                    errors=[{"loc": ["body", "edits"], "msg": "only with decision edit"}],
                )
            return None
        if not request.edits:
            raise InvalidRequest(
                "the decision `edit` needs `edits`", errors=[{"loc": ["body", "edits"], "msg": "required"}]
            )
        policy = REGISTRY[review.workflow].step(review.step).review
        assert policy is not None
        given = request.edits
        if not principal.sees_personal_data and self.services.budgets.policy(review.tenant_id).redact:
            material = ReviewMaterial.model_validate(self.services.artifacts.get_json(review.material_key))
            redactor = self._redacted(principal, review, material)[2]
            given = redactor.restore_value(given) if redactor is not None else given
        try:
            edits = policy.edits_model.model_validate(given)
        except ValidationError as invalid:
            errors = [
                {"loc": ["body", "edits", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                for e in invalid.errors(include_url=False, include_input=False)
            ]
            raise InvalidRequest("the edits do not match the workflow's edits", errors=errors) from None
        return self.services.artifacts.put_json(keys.work_key(review.job_id, review.step, "edits.json"), edits)

    def _resume(self, review: ReviewRecord) -> None:
        """Resume the waiting execution now; if the token is spent (a rung just ended) the lane's next step reads the
        decision from the store, so nothing is lost."""
        token, tokens = self.services.reviews.token(review.review_id), self.services.tokens
        if token is None or tokens is None:
            return
        with contextlib.suppress(EngineUnavailable):  # the decision is stored: the lane applies it at the next rung
            tokens.succeed(token, {"decided": True})
