"""The reviewer API's models, and what a workflow shows its reviewers (`ReviewMaterial`)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from longhaul.core.contracts import PATTERN_END, VISIBLE_SCHEMA, JobStatus, Strict, Visible
from longhaul.core.model import Model


class ReviewEvidence(Model):
    """One piece of evidence behind the draft, with its source."""

    claim: str | None = Field(default=None, description="What the evidence supports (or the finding it shows).")
    document: str
    page: int | None = None
    quote: str = Field(description="Verbatim text of the source.")
    verified: bool = Field(description="Whether the quote was found on that page.")


class ReviewMaterial(Model):
    """What the reviewer decides on: the draft result and the evidence with its sources."""

    draft: dict[str, Any]
    evidence: list[ReviewEvidence]


class ReviewView(Model):
    review_id: str
    job_id: str
    workflow: str
    kind: Literal["draft", "complete"] = Field(
        default="draft",
        description="`draft`: decide on the job's draft (approve, reject, edit); `complete`: the job failed and an "
        "operator handed it to a person, who submits its result (decision `complete` with `result`).",
    )
    status: Literal["pending", "decided", "expired", "cancelled"]
    since: datetime
    deadline: datetime
    assignee_group: str
    reminders: int
    rung: int = Field(
        default=0,
        description="The escalation ladder's rung: 0 waiting, 1 reminded, 2 reassigned to the secondary group, 3 the "
        "workflow's final action taken.",
    )
    reasons: list[str] = Field(description="Why review was required.")
    decision: Literal["approve", "reject", "edit", "complete"] | None = None
    decided_at: datetime | None = None
    decided_by: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Who decided (absent until decided): `<tenant>/reviewer/<key id>` (a prefix of the key's hash), "
        "or `policy` for the escalation ladder's final action.",
    )
    decided_group: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The reviewer group through which the reviewer decided (absent until a reviewer decides).",
    )
    note: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="A `complete` review: the operator's note to the person (absent for a `draft` review).",
    )


class ReviewDetail(ReviewView):
    draft: dict[str, Any] = Field(
        description="The draft result, as it would be published; for a `complete` review, the result to start from "
        "(the job's last draft if it got that far, else the workflow's result skeleton)."
    )
    evidence: list[ReviewEvidence]
    comment: str | None = None
    redacted: list[str] | None = Field(
        default=None,
        description="The kinds of personal data (the tenant's policy `redact`) replaced by placeholders in `draft` and "
        "`evidence` for this reviewer (role `reviewer`; a `pii_reviewer` sees them unredacted); null: nothing is. "
        "Edits may keep the placeholders: the decision puts their values back.",
    )
    job_status: JobStatus | None = Field(
        default=None, description="The reviewed job's status now: after a decision, whether it went on to complete."
    )


class ReviewList(Model):
    reviews: list[ReviewView]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page; null at the end.")


class DecisionRequest(Strict):
    """A reviewer's decision: `edits` go with `edit` (and only with it), `result` with `complete` (and only with it:
    the decision of a review of kind `complete`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "properties": {
                        "decision": {"enum": ["approve", "reject"]},
                        "edits": {"type": "null"},
                        "result": {"type": "null"},
                    }
                },
                {
                    "properties": {
                        "decision": {"const": "edit"},
                        "edits": {"not": {"type": "null"}},
                        "result": {"type": "null"},
                    },
                    "required": ["edits"],
                },
                {
                    "properties": {
                        "decision": {"const": "complete"},
                        "result": {"not": {"type": "null"}},
                        "edits": {"type": "null"},
                    },
                    "required": ["result"],
                },
            ]
        }
    )

    decision: Literal["approve", "reject", "edit", "complete"]
    comment: Annotated[
        Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=VISIBLE_SCHEMA), Visible] | None,
        Field(default=None, description="Why (at least one visible character)."),
    ]
    edits: Annotated[
        dict[str, Any] | None,
        Field(
            default=None,
            min_length=1,
            validate_default=True,
            description="With `edit`: the workflow's edits, validated like model output. document-analysis: "
            '`{"answer": "…", "claims": [{"text": "…", "citations": [{"chunk_id": "…", "quote": "…"}]}]}` '
            "(`answer` and/or `claims`; a citation may be copied from the draft as it is: its `document` and `page`, "
            "when given, must be its passage's, and each quote is verified on it); invoice-reconciliation: "
            '`{"summary": "…"}`, used only if every figure in it is a validated number.',
        ),
    ]

    result: Annotated[
        dict[str, Any] | None,
        Field(
            default=None,
            min_length=1,
            validate_default=True,
            description="With `complete` (a review of kind `complete`): the job's result, written by a person, "
            "validated by the workflow's result model and its business rules. invoice-reconciliation: "
            '`{"invoices": [...], "summary": "…"}` as in its result (each invoice\'s line items with their source '
            "lines and totals; the figures must add up, or a line-total or invoice-total finding must be among its "
            "`discrepancies`; the published discrepancies and statuses are the rules' own; an empty summary gets "
            "the deterministic one); document-analysis: "
            '`{"answer": "…", "claims": [{"text": "…", "citations": [{"chunk_id": "…", "quote": "…"}]}]}`, every '
            "quote verified on its passage of the job's documents.",
        ),
    ]

    @field_validator("result")
    @classmethod
    def _only_with_complete(cls, result: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        decision = info.data.get("decision")
        if decision == "complete" and result is None:
            raise ValueError("the decision `complete` needs `result`")
        if decision is not None and decision != "complete" and result is not None:
            raise ValueError("`result` goes only with the decision `complete`")
        return result

    @field_validator("edits")
    @classmethod
    def _only_with_edit(cls, edits: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        decision = info.data.get("decision")  # absent when the decision itself was refused
        if decision == "edit" and edits is None:
            raise ValueError("the decision `edit` needs `edits`")
        if decision in ("approve", "reject", "complete") and edits is not None:
            raise ValueError("`edits` go only with the decision `edit`")
        return edits


class DecisionOutcome(Model):
    review_id: str
    job_id: str
    status: Literal["decided"] = "decided"
    decision: Literal["approve", "reject", "edit", "complete"]
    job_status: JobStatus | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="A `complete` decision: the job's status after it (`completed`); absent for other decisions.",
    )


class ManualCompletionRequest(Strict):
    """Hand a failed job to a person, who writes its result (a review of kind `complete`)."""

    assignee_group: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100,
            pattern=rf"^[A-Za-z0-9][A-Za-z0-9 ._-]*{PATTERN_END}",
            description="The group of reviewers to do it (shown on the review).",
        ),
    ]
    note: Annotated[
        Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=VISIBLE_SCHEMA), Visible],
        Field(description="What the person should know: why the job failed, what to check."),
    ]


class ManualCompletionOutcome(Model):
    review_id: str
    job_id: str
    kind: Literal["complete"] = "complete"
    status: Literal["pending", "decided", "expired", "cancelled"]
    assignee_group: str
    since: datetime
    deadline: datetime
    review_url: str = Field(description="The review, for its reviewers (`GET`), and its decision (`…/decision`).")
