"""The reviewer API's models, and what a workflow shows its reviewers (`ReviewMaterial`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from longhaul.core.contracts import Strict


class ReviewEvidence(BaseModel):
    """One piece of evidence behind the draft, with its source."""

    claim: str | None = Field(default=None, description="What the evidence supports (or the finding it shows).")
    document: str
    page: int | None = None
    quote: str = Field(description="Verbatim text of the source.")
    verified: bool = Field(description="Whether the quote was found on that page.")


class ReviewMaterial(BaseModel):
    """What the reviewer decides on: the draft result and the evidence with its sources."""

    draft: dict[str, Any]
    evidence: list[ReviewEvidence]


class ReviewView(BaseModel):
    review_id: str
    job_id: str
    workflow: str
    status: Literal["pending", "decided", "expired", "cancelled"]
    since: datetime
    deadline: datetime
    assignee_group: str
    reminders: int
    reasons: list[str] = Field(description="Why review was required.")
    decision: Literal["approve", "reject", "edit"] | None = None
    decided_at: datetime | None = None


class ReviewDetail(ReviewView):
    draft: dict[str, Any] = Field(description="The draft result, as it would be published.")
    evidence: list[ReviewEvidence]
    comment: str | None = None


class ReviewList(BaseModel):
    reviews: list[ReviewView]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page; null at the end.")


class DecisionRequest(Strict):
    decision: Literal["approve", "reject", "edit"]
    comment: Annotated[str | None, Field(default=None, max_length=2000)]
    edits: Annotated[
        dict[str, Any] | None,
        Field(
            default=None,
            description="With `edit`: the workflow's edits, validated like model output. document-analysis: "
            '`{"answer": "…", "claims": [{"text": "…", "citations": [{"chunk_id": "…", "quote": "…"}]}]}` '
            "(`answer` and/or `claims`; a citation may be copied from the draft as it is: its `document` and `page`, "
            "when given, must be its passage's, and each quote is verified on it); invoice-reconciliation: "
            '`{"summary": "…"}`, used only if every figure in it is a validated number.',
        ),
    ]


class DecisionOutcome(BaseModel):
    review_id: str
    job_id: str
    status: Literal["decided"] = "decided"
    decision: Literal["approve", "reject", "edit"]
