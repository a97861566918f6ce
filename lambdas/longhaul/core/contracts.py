"""One model per contract, shared by the API, the handlers, the state machine builder and the local runtime.

The OpenAPI document in `docs/openapi.json` is generated from these models; a test fails on drift.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from longhaul.core import limits
from longhaul.core.budgets import JobBudget, SlaClass, TenantPolicy

MEDIA_TYPES = ("application/pdf", "text/plain", "text/markdown")
UPLOAD_ID_PATTERN = r"^up_[0-9a-f]{32}$"
# Control characters, line/paragraph separators and bidirectional overrides (which can disguise a name).
_UNSAFE_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


def check_plain_name(name: str) -> str:
    """A name is shown in citations and results, never used as a path; refuse what would be one."""
    if _UNSAFE_CHARACTERS.search(name):
        raise ValueError("must not contain control characters")
    if "/" in name or "\\" in name or _WINDOWS_DRIVE.match(name):
        raise ValueError("must be a plain name, without path separators or a drive")
    if name.strip(". ") == "" or ".." in name:
        raise ValueError("must not be or contain `..`, or be only dots and spaces")
    if name != name.strip():
        raise ValueError("must not start or end with whitespace")
    return name


SafeName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=limits.MAX_NAME_CHARS,
        description=f"A plain name of at most {limits.MAX_NAME_CHARS} characters: no path separators, no `..`, "
        "no control characters, no leading or trailing whitespace.",
    ),
    AfterValidator(check_plain_name),
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- requests


class DocumentInput(Strict):
    """A document given inline (`text`) or by reference to an upload (`upload_id`)."""

    name: Annotated[SafeName, Field(description="Name used in citations (never a storage path).")]
    text: Annotated[str | None, Field(default=None, min_length=1, description="Inline text (plain or Markdown).")]
    upload_id: Annotated[
        str | None, Field(default=None, pattern=UPLOAD_ID_PATTERN, description="From POST /v1/uploads.")
    ]
    media_type: Annotated[
        Literal["application/pdf", "text/plain", "text/markdown"] | None,
        Field(default=None, description="Defaults from the upload or to text/plain."),
    ]

    @model_validator(mode="after")
    def _one_source(self) -> DocumentInput:
        if (self.text is None) == (self.upload_id is None):
            raise ValueError("give exactly one of `text` or `upload_id`")
        if self.text is not None and not self.text.strip():
            raise ValueError("`text` is blank")
        return self


class ArchiveInput(Strict):
    """Documents given as one uploaded ZIP archive: each member is a document, named by its path inside it."""

    upload_id: Annotated[
        str,
        Field(
            pattern=UPLOAD_ID_PATTERN,
            description="From POST /v1/uploads (`application/zip`). Checked at submission from its central "
            f"directory: 1 to {limits.MAX_DOCUMENTS} documents (.pdf, .txt, .md, .markdown; folders allowed, "
            "directories, `__MACOSX/` and `.DS_Store` skipped), relative names without `..`, backslashes or "
            f"control characters (up to {limits.MAX_ARCHIVE_NAME_CHARS} characters), no links or encrypted "
            f"members, stored or deflate only, each member up to {limits.MAX_UPLOAD_BYTES} bytes expanded and "
            f"{limits.MAX_ARCHIVE_EXPANDED_BYTES} bytes in all, no member expanding more than "
            f"{limits.MAX_ARCHIVE_RATIO} times, no overlapping members.",
        ),
    ]


class DocumentAnalysisInput(Strict):
    question: Annotated[str, Field(min_length=limits.MIN_QUESTION_CHARS, max_length=limits.MAX_QUESTION_CHARS)]
    documents: Annotated[
        list[DocumentInput] | None,
        Field(
            default=None,
            min_length=1,
            max_length=limits.MAX_DOCUMENTS,
            description=f"1 to {limits.MAX_DOCUMENTS} documents (or give `archive`).",
        ),
    ]
    archive: Annotated[
        ArchiveInput | None,
        Field(default=None, description="The documents as one uploaded ZIP archive (or give `documents`)."),
    ]
    max_passages: Annotated[
        int,
        Field(
            ge=1, le=limits.MAX_PASSAGES, description=f"Passages retrieved for the question (1-{limits.MAX_PASSAGES})."
        ),
    ] = limits.DEFAULT_PASSAGES
    passages_per_group: Annotated[
        int,
        Field(
            ge=1,
            le=limits.MAX_PASSAGES_PER_GROUP,
            description=f"Passages per evidence-extraction item of the fan-out (1-{limits.MAX_PASSAGES_PER_GROUP}).",
        ),
    ] = limits.DEFAULT_PASSAGES_PER_GROUP

    @model_validator(mode="after")
    def _unique_names(self) -> DocumentAnalysisInput:
        if (self.documents is None) == (self.archive is None):
            raise ValueError("give exactly one of `documents` or `archive`")
        names = [d.name for d in self.documents or ()]
        if len(set(names)) != len(names):
            raise ValueError("document names must be unique (citations refer to them)")
        return self


class ReviewRequest(Strict):
    """Whether a person reviews the job's draft before it is published, and how long they have."""

    mode: Annotated[
        Literal["always", "never", "auto"] | None,
        Field(
            default=None,
            description="`always`, `never`, or `auto` (when the workflow's own check asks for it: document-analysis "
            "when citation verification dropped a claim, invoice-reconciliation when a discrepancy was found). "
            "Default: the workflow's.",
        ),
    ]
    deadline_seconds: Annotated[
        int | None,
        Field(
            default=None,
            ge=limits.MIN_REVIEW_DEADLINE_SECONDS,
            le=limits.MAX_REVIEW_DEADLINE_SECONDS,
            description="How long the review may wait: a reminder at a third, reassignment at two thirds, the "
            f"workflow's final action at the end ({limits.MIN_REVIEW_DEADLINE_SECONDS}-"
            f"{limits.MAX_REVIEW_DEADLINE_SECONDS} s; default: the workflow's).",
        ),
    ]


class JobRequestBase(Strict):
    """What every job request has; each workflow's request (`longhaul.workflows.JobRequest`, a union on `workflow`)
    adds its `workflow` name and its `input` model."""

    workflow: str
    input: BaseModel
    budget: Annotated[
        JobBudget | None,
        Field(
            default=None,
            description="Token and cost limits of this job, within the tenant's ceilings (422 above them); omitted "
            "fields take the ceilings.",
        ),
    ]
    route: Annotated[
        str | None,
        Field(
            default=None,
            pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$",
            description="The model route of every model step of this job (a configured route the tenant may use); "
            "default: each step's configured route.",
        ),
    ]
    deadline_seconds: Annotated[
        int | None,
        Field(
            default=None,
            ge=limits.MIN_DEADLINE_SECONDS,
            le=limits.MAX_DEADLINE_SECONDS,
            description=f"End the job `expired` after this long ({limits.MIN_DEADLINE_SECONDS}-"
            f"{limits.MAX_DEADLINE_SECONDS} s, default {limits.DEFAULT_DEADLINE_SECONDS}).",
        ),
    ]
    review: Annotated[ReviewRequest | None, Field(default=None, description="Human review before publishing.")]
    callback_url: Annotated[
        str | None,
        Field(
            default=None,
            max_length=2048,
            description="Where to POST signed webhooks (Standard Webhooks) when the job completes, fails, is "
            "cancelled or expires, and when it waits for review: `https` to a public address (plain `http` only "
            "for origins in LONGHAUL_CALLBACK_ALLOWLIST).",
        ),
    ]
    sla_class: Annotated[
        SlaClass,
        Field(
            default="standard",
            description="How urgently the job should start: `interactive` before `standard` before `batch` when "
            "jobs wait for a slot (weighted, with aging, so none waits forever); one of the tenant's `sla_classes`.",
        ),
    ]


class ReplayRequest(Strict):
    from_step: Annotated[str, Field(min_length=1, max_length=64, description="The first step to run again.")]
    reason: Annotated[str, Field(min_length=3, max_length=500, description="Recorded in the job's events.")]
    mode: Literal["replay", "redrive"] = "replay"
    budget: Annotated[
        JobBudget | None,
        Field(
            default=None,
            description="New limits for the job (recorded in `job_replayed`); what it spent so far still counts.",
        ),
    ]


class UploadRequest(Strict):
    filename: SafeName
    media_type: Annotated[
        Literal["application/pdf", "text/plain", "text/markdown", "application/zip"],
        Field(description="`application/zip` for an archive of documents (`input.archive`)."),
    ]


# ---------------------------------------------------------------- responses


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING_FOR_REVIEW = "waiting_for_review"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCEL_REQUESTED = "cancel_requested"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})


class JobAccepted(BaseModel):
    job_id: str
    status: JobStatus
    status_url: str
    events_url: str
    result_url: str
    estimated_sla_seconds: int
    estimated_start_seconds: int = Field(
        default=0,
        description="0 when the job started at once; when it waits for a slot (`queued`), the estimated seconds "
        "until it starts: ceil(jobs of its tenant waiting / the tenant's jobs_in_flight) x the job's "
        "estimated_sla_seconds.",
    )


class Progress(BaseModel):
    completed: int = 0
    total: int = 0
    unit: str = "steps"
    message: str = ""
    eta_seconds: int | None = None


class JobError(BaseModel):
    kind: str = Field(description="Failure class, e.g. transient, invalid-input, output-invalid.")
    error: str = Field(description="The ASL error name.")
    step: str | None = None
    item: int | None = None
    items: list[int] | None = Field(default=None, description="For a fan-out: every item that failed.")
    message: str


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: str = Field(default="0.000000", description="Actual cost in US dollars (decimal string).")


class StepUsage(BaseModel):
    """What one step (or fan-out item) spent, and on what."""

    step: str
    item: int | None = None
    calls: int = Field(description="Model calls settled (calls answered from a checkpointed response not counted).")
    input_tokens: int
    output_tokens: int
    cost_usd: str
    held_tokens: int = Field(description="Worst cases still reserved by calls in flight.")
    models: list[str] = Field(default_factory=list, description="`provider:model` that answered, per route.")


class BudgetView(BaseModel):
    """The job's budget: its limits, what is held against them (settled usage plus reservations in flight) and
    what remains."""

    max_tokens: int
    max_cost_usd: str
    held_tokens: int
    held_cost_usd: str
    remaining_tokens: int
    remaining_cost_usd: str
    exhausted: str | None = Field(default=None, description="`job` or `tenant` once a reservation did not fit.")
    steps: list[StepUsage] = Field(default_factory=list)


class ReviewSummary(BaseModel):
    """The job's review, while one is open (or how the last one ended)."""

    review_id: str
    status: Literal["pending", "decided", "expired", "cancelled"] = "pending"
    since: datetime
    deadline: datetime
    assignee_group: str
    reminders: int = 0


class CallbackStatus(BaseModel):
    """The latest webhook of the job: its delivery never changes the job's status."""

    status: Literal["pending", "retrying", "delivered", "dead"]
    event: str
    webhook_id: str
    attempts: int = 0
    last_attempt_at: datetime | None = None
    last_error: str | None = None


class RequestUsage(BaseModel):
    """The AWS requests the job's steps made, by service, and the billing units estimated from them."""

    dynamodb: int = 0
    s3: int = 0
    sqs: int = 0
    dynamodb_read_units: float = Field(default=0, description="Estimated: items of at most 4 KB assumed.")
    dynamodb_write_units: int = Field(default=0, description="Estimated: items of at most 1 KB assumed.")
    s3_class_a: int = Field(default=0, description="PUT, COPY, POST and LIST requests.")
    s3_class_b: int = Field(default=0, description="GET, HEAD and other requests (DELETE is free).")


class OrchestrationCost(BaseModel):
    """What running the workflow costs: state transitions, compute and requests (see README, What a job costs)."""

    transitions: int | None = Field(
        default=None,
        description="Billed state transitions of every execution of the job (Distributed Map children included); "
        "null until its executions have ended.",
    )
    history_events: int | None = Field(default=None, description="Events in the histories of the job's executions.")
    lambda_invocations: int = 0
    lambda_gb_seconds: float = Field(default=0, description="Billed duration x configured memory of step invocations.")
    fargate_seconds: float = Field(default=0, description="Billed task time of container steps (a minute at least).")
    requests: RequestUsage = Field(default_factory=RequestUsage)
    usd: str = Field(description="US dollars (decimal string, six decimals).")


class ModelCost(BaseModel):
    """The model calls' tokens and cost, as the job's budget ledger settled them."""

    input_tokens: int = 0
    output_tokens: int = 0
    usd: str


class JobCost(BaseModel):
    """What the job has cost so far, priced from the repository's price table (one region, dated)."""

    currency: Literal["USD"] = "USD"
    total: str = Field(description="Orchestration plus model, US dollars (decimal string).")
    orchestration: OrchestrationCost
    model: ModelCost
    region: str
    prices_as_of: date
    estimated: bool = Field(
        description="True while a figure is still incomplete: the job runs, its transitions are not counted yet, "
        "or a child execution's history was not reachable."
    )


class JobView(BaseModel):
    job_id: str
    tenant_id: str = Field(description="Whose job it is (operators list every tenant's jobs).")
    workflow: str
    status: JobStatus
    current_step: str | None = None
    progress: Progress
    attempts: int = Field(default=1, description="Executions started for this job (a replay adds one).")
    model: str
    usage: Usage = Field(default_factory=Usage)
    budget: BudgetView | None = None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    deadline_at: datetime | None = None
    error: JobError | None = None
    review: ReviewSummary | None = None
    callback: CallbackStatus | None = None
    sla_class: SlaClass = "standard"
    estimated_start_seconds: int | None = Field(
        default=None, description="While the job waits for a slot (`queued`): the estimated seconds until it starts."
    )
    cost: JobCost | None = None


class JobList(BaseModel):
    jobs: list[JobView]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page; null at the end.")


class CancelOutcome(BaseModel):
    job_id: str
    status: JobStatus
    message: str
    completed_steps: list[str] = Field(default_factory=list, description="Steps whose results were kept.")
    side_effects: list[str] = Field(default_factory=list, description="What happened before the job stopped.")


class DeadLetter(BaseModel):
    job_id: str
    tenant_id: str | None = None
    workflow: str
    step: str
    item: int | None = None
    item_name: str | None = Field(default=None, description="The item's document, when the item is one.")
    error: str
    kind: str
    message: str
    attempts: int
    execution: str | None = None
    trace_id: str | None = None
    failed_at: datetime
    replay: dict[str, object]


class DeadLetterList(BaseModel):
    dead_letters: list[DeadLetter]


class NamedItem(BaseModel):
    """A fan-out item as people know it: e.g. item 17 of parse_documents is the document "contract-18.txt"."""

    step: str
    item: int
    unit: str
    name: str | None = None


class ReplayOutcome(BaseModel):
    job_id: str
    status: JobStatus
    attempt: int
    execution: str
    from_step: str
    rerun_steps: list[str] = Field(description="Every step that will run again, in order (those without a checkpoint).")
    rerun_items: dict[str, list[int]] = Field(
        description="By fan-out step: its items that will run again (a step whose items are only known once an "
        "earlier step has run again is not listed)."
    )
    kept_items: dict[str, list[int]] = Field(description="By fan-out step: its items whose checkpoints are reused.")
    rerun_named: list[NamedItem] = Field(
        default_factory=list, description="The items that will run again, each with its step, unit and name."
    )


class EventView(BaseModel):
    seq: int
    type: str
    step: str | None = None
    item: int | None = None
    at: datetime
    status: JobStatus | None = None
    attempt: int | None = None
    detail: dict[str, object] = Field(default_factory=dict)


class EventPage(BaseModel):
    events: list[EventView]
    next_cursor: str | None = None


class Citation(BaseModel):
    document: str = Field(description="The document's name as submitted.")
    page: int = Field(ge=1)
    chunk_id: str
    quote: str = Field(description="Verbatim text from that page.")
    source: Literal["text", "ocr"] = Field(
        default="text", description="Where the page's text came from: its text layer, or OCR of its image."
    )
    ocr_confidence: float | None = Field(
        default=None, ge=0, le=1, description="For OCR text: the page's mean line confidence."
    )


class Claim(BaseModel):
    text: str
    citations: list[Citation]


class Verification(BaseModel):
    citations_checked: int
    citations_verified: int
    citations_dropped: int
    claims_dropped: int


class JobResult(BaseModel):
    job_id: str
    question: str
    answer: str
    claims: list[Claim]
    citations: list[Citation]
    verification: Verification
    model: str
    documents: list[DocumentSummary]
    markdown_key: str | None = None


class DocumentSummary(BaseModel):
    name: str
    media_type: str
    pages: int
    pages_needing_ocr: list[int] = Field(
        default_factory=list,
        description="Pages without a text layer that OCR has not read (not in `pages_unreadable`: each page is in one "
        "list at most).",
    )
    pages_ocr: list[int] = Field(default_factory=list, description="Pages whose text was read by OCR.")
    pages_unreadable: list[int] = Field(
        default_factory=list, description="Pages OCR tried and could not read (blank, or too low a confidence)."
    )


class DayUsageView(BaseModel):
    day: str = Field(description="The UTC day (yyyy-mm-dd).")
    tokens: int = Field(description="Held today: settled usage plus reservations in flight.")
    cost_usd: str
    remaining_tokens: int
    remaining_cost_usd: str


class TenantPolicyView(BaseModel):
    tenant_id: str
    policy: TenantPolicy
    source: Literal["stored", "default"]
    today: DayUsageView
    previous: TenantPolicy | None = Field(
        default=None, description="After a PUT or PATCH: the policy before it (the defaults if there was none)."
    )
    reset: list[str] = Field(
        default_factory=list,
        description="After a PUT or PATCH: the fields it put back to their defaults (a PUT replaces the whole "
        "policy, so every field its body omits takes its default; a PATCH resets only the fields given as null).",
    )


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    version: str
    checks: dict[str, Literal["ok", "failed"]] = Field(description="What readiness was checked, and how it went.")


class UploadTicket(BaseModel):
    upload_id: str
    upload_url: str
    method: Literal["PUT"] = "PUT"
    headers: dict[str, str]
    expires_in: int


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, object]] | None = None


JobResult.model_rebuild()
