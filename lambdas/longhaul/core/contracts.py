"""One model per contract, shared by the API, the handlers, the state machine builder and the local runtime.

The OpenAPI document in `docs/openapi.json` is generated from these models; a test fails on drift.
"""

import re
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from longhaul.core import limits
from longhaul.core.auth import Role
from longhaul.core.budgets import JobBudget, ModelLane, SlaClass, TenantPolicy
from longhaul.core.model import Model
from longhaul.core.routes import ROUTE_NAME_PATTERN

MEDIA_TYPES = ("application/pdf", "text/plain", "text/markdown")
# What the schema's patterns say is said once here, in a dialect ECMA-262 (the OpenAPI document) and Python's `re`
# (the server, with `regex_engine="python-re"`, and the tools that read the document) read alike: only BMP `\uXXXX`
# escapes (ECMA-262 without the `u` flag sees other characters as surrogate pairs), no `\s` or `.` (each dialect has
# its own), and `(?![\s\S])` for the end (Python's `$` also matches before a final newline).
PATTERN_END = r"(?![\s\S])"
UPLOAD_ID_PATTERN = rf"^up_[0-9a-f]{{32}}{PATTERN_END}"
TRIGGER_ID_PATTERN = rf"^trg_[0-9a-f]{{20}}{PATTERN_END}"
# A header value never holds a newline, so `$` is exact there (and the header is validated by the resolver's own
# regex engine, which has no look-ahead).
IDEMPOTENCY_KEY_PATTERN = r"^[A-Za-z0-9._:\-]{1,128}$"
# A job id as the API hands it out (`job_` and 28 hexadecimal digits).
JOB_ID_PATTERN = rf"^job_[0-9a-f]{{28}}{PATTERN_END}"
# What a listing's `next_cursor` is made of (URL-safe base64 without padding, or a sequence number). The document
# says it; the route checks its length (a query parameter's pattern would be checked by pydantic's default engine,
# which has no look-ahead), and the listing refuses any other value (400).
CURSOR_PATTERN = rf"^[A-Za-z0-9_-]{{1,4096}}{PATTERN_END}"
CURSOR_MAX_CHARS = 4096
# The shape of a callback URL (what `longhaul.core.addresses.check_url` checks before it looks at the host): http(s),
# a host part without credentials, no whitespace, control characters, backslash or fragment.
CALLBACK_URL_PATTERN = (
    rf"^[Hh][Tt][Tt][Pp][Ss]?://[^\u0000-\u0020\u007F\\#@/?]+(?:[/?][^\u0000-\u0020\u007F\\#]*)?{PATTERN_END}"
)
STEP_NAME_PATTERN = rf"^[a-z][a-z0-9_]{{0,63}}{PATTERN_END}"
# Characters that show nothing: controls (C0, C1), format characters (zero-width spaces and joiners, bidi marks and
# overrides, the BOM, the soft hyphen, invisible operators, variation selectors), space, line and paragraph
# separators, and the letters that render blank (Hangul fillers, the blank Braille pattern).
INVISIBLE = (
    r"\u0000-\u0020\u007F-\u00A0\u00AD\u034F\u061C\u115F\u1160\u1680\u17B4\u17B5\u180B-\u180F\u2000-\u200F"
    r"\u2028-\u202F\u205F-\u2064\u2066-\u206F\u2800\u3000\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF9-\uFFFB"
)
# A text field must contain at least one character that shows (the pattern is searched, not anchored).
VISIBLE_PATTERN = f"[^{INVISIBLE}]"
# Control characters, line/paragraph separators and bidirectional overrides (which can disguise a name).
_UNSAFE = r"\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069"
# What Python's `str.strip()` removes that `_UNSAFE` does not already exclude.
_SPACES = r"\u0020\u00A0\u1680\u2000-\u200A\u202F\u205F\u3000"
# A document or upload name as one pattern (what `check_plain_name` checks, plus a visible character other than a
# dot): no drive, no `..`, no path separator or unsafe character, no space at either end.
NAME_PATTERN = (
    rf"^(?![A-Za-z]:)(?![^{_UNSAFE}/\\]*\.\.)(?=[^{_UNSAFE}/\\]*[^{INVISIBLE}./\\])"
    rf"[^{_UNSAFE}{_SPACES}/\\](?:[^{_UNSAFE}/\\]*[^{_UNSAFE}{_SPACES}/\\])?{PATTERN_END}"
)
# Patterns as strings: `re` compiles each on first use (and caches it), not every cold start.
_UNSAFE_CHARACTERS = f"[{_UNSAFE}]"
_WINDOWS_DRIVE = r"^[A-Za-z]:"


def check_plain_name(name: str) -> str:
    """A name is shown in citations and results, never used as a path; refuse what would be one."""
    if re.search(_UNSAFE_CHARACTERS, name):
        raise ValueError("must not contain control characters")
    if "/" in name or "\\" in name or re.match(_WINDOWS_DRIVE, name):
        raise ValueError("must be a plain name, without path separators or a drive")
    if name.strip(". ") == "" or ".." in name:
        raise ValueError("must not be or contain `..`, or be only dots and spaces")
    if name != name.strip():
        raise ValueError("must not start or end with whitespace")
    if not re.match(NAME_PATTERN, name):  # what is left: no character that shows, other than dots
        raise ValueError("must contain a visible character other than a dot")
    return name


def check_visible(text: str) -> str:
    """Refuse text that shows nothing: only whitespace, zero-width, format or control characters."""
    if not re.search(VISIBLE_PATTERN, text):
        raise ValueError("must contain a visible character (not only whitespace, zero-width or control characters)")
    return text


SafeName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=limits.MAX_NAME_CHARS,
        description=f"A plain name of at most {limits.MAX_NAME_CHARS} characters: no path separators, no `..`, "
        "no control characters, no leading or trailing whitespace, at least one visible character other than a dot.",
        json_schema_extra={"pattern": NAME_PATTERN},
    ),
    AfterValidator(check_plain_name),
]
# A text field: at least one visible character (the bounds are each field's own).
Visible = AfterValidator(check_visible)
VISIBLE_SCHEMA: dict[str, Any] = {"pattern": VISIBLE_PATTERN}


class Strict(Model):
    """A request model: unknown fields are refused, and so is any value of another JSON type than the schema's (no
    `"16"` for 16, no `true` for 1), so the server accepts exactly what its OpenAPI schema describes."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


_NOT_NULL: dict[str, Any] = {"not": {"type": "null"}}


def exactly_one_of(*fields: str) -> dict[str, Any]:
    """A JSON Schema `oneOf` saying what a model validator checks: exactly one of `fields` is given (present and not
    null); each branch requires its field and allows the others only as null."""
    return {
        "oneOf": [
            {
                "required": [given],
                "properties": {f: (_NOT_NULL if f == given else {"type": "null"}) for f in fields},
            }
            for given in fields
        ]
    }


# ---------------------------------------------------------------- requests


class DocumentInput(Strict):
    """A document given inline (`text`, never a PDF) or by reference to an upload (`upload_id`): exactly one."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["text"],
                    "properties": {
                        "text": _NOT_NULL,
                        "upload_id": {"type": "null"},
                        "media_type": {"not": {"const": "application/pdf"}},
                    },
                },
                {"required": ["upload_id"], "properties": {"upload_id": _NOT_NULL, "text": {"type": "null"}}},
            ]
        }
    )

    name: Annotated[SafeName, Field(description="Name used in citations (never a storage path).")]
    text: Annotated[
        Annotated[str, Field(min_length=1, json_schema_extra=VISIBLE_SCHEMA), Visible] | None,
        Field(default=None, description="Inline text (plain or Markdown), with at least one visible character."),
    ]
    upload_id: Annotated[
        str | None, Field(default=None, pattern=UPLOAD_ID_PATTERN, description="From POST /v1/uploads.")
    ]
    media_type: Annotated[
        Literal["application/pdf", "text/plain", "text/markdown"] | None,
        Field(default=None, description="Defaults from the upload or to text/plain."),
    ]

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.text is None) == (self.upload_id is None):
            raise ValueError("give exactly one of `text` or `upload_id`")
        return self

    @field_validator("media_type")
    @classmethod
    def _inline_is_not_pdf(cls, media_type: str | None, info: ValidationInfo) -> str | None:
        if media_type == "application/pdf" and info.data.get("text") is not None:
            raise ValueError("inline text cannot be a PDF; upload it")
        return media_type


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
    model_config = ConfigDict(json_schema_extra=exactly_one_of("documents", "archive"))

    question: Annotated[
        str,
        Field(
            min_length=limits.MIN_QUESTION_CHARS,
            max_length=limits.MAX_QUESTION_CHARS,
            description=f"{limits.MIN_QUESTION_CHARS}-{limits.MAX_QUESTION_CHARS} characters, at least one visible.",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]
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
            ge=1,
            le=limits.MAX_PASSAGES,
            description=f"Passages retrieved for the question (1-{limits.MAX_PASSAGES}). Omitted: the depth of the "
            f"job's SLA class (interactive 8, standard {limits.DEFAULT_PASSAGES}, batch 32 or two a document, up to "
            "400).",
        ),
    ] = limits.DEFAULT_PASSAGES
    passages_per_group: Annotated[
        int,
        Field(
            ge=1,
            le=limits.MAX_PASSAGES_PER_GROUP,
            description=f"Passages per evidence-extraction item of the fan-out (1-{limits.MAX_PASSAGES_PER_GROUP}). "
            f"Omitted: the SLA class's (interactive {limits.DEFAULT_PASSAGES_PER_GROUP}, standard "
            f"{limits.DEFAULT_PASSAGES_PER_GROUP}, batch 2).",
        ),
    ] = limits.DEFAULT_PASSAGES_PER_GROUP
    rerank: Annotated[
        bool | None,
        Field(
            default=None,
            strict=True,
            description="Whether a rerank pass orders three times `max_passages` lexical candidates before the best "
            "are kept. Omitted or null: the SLA class's (interactive and batch: yes; standard: no).",
        ),
    ]

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
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


class AgentLimits(Strict):
    """Limits of each agent step of the job, within the tenant's ceilings (`agent_max_turns`,
    `agent_max_tool_calls`) and never above the step's own (its spec's): the tighter one holds."""

    max_turns: Annotated[
        int | None,
        Field(default=None, ge=1, le=limits.MAX_AGENT_TURNS, description="Turns (model calls) of one agent step."),
    ]
    max_tool_calls: Annotated[
        int | None,
        Field(default=None, ge=1, le=limits.MAX_AGENT_TOOL_CALLS, description="Tool calls of one agent step."),
    ]


class ThenRequest(Strict):
    """A job to submit when this one completes (for the same tenant, once): its workflow and its input, where any
    value may be a reference into this job's result, `{"$result": "/path/to/field"}` (a JSON Pointer, RFC 6901:
    `""` is the whole result, `/invoices/0/document` a field of its first invoice), replaced by that value."""

    workflow: Annotated[str, Field(min_length=1, max_length=64, description="An installed workflow.")]
    input: Annotated[
        dict[str, Any],
        Field(
            description="The next job's input, valid against its workflow's input model once the references are "
            "replaced (checked at submission with each reference as a placeholder: 422 with `errors`)."
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
            pattern=ROUTE_NAME_PATTERN,
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
    agent: Annotated[
        AgentLimits | None,
        Field(
            default=None,
            description="Limits of the job's agent steps (workflows with one: dispute-resolution); reaching one "
            "fails the job with kind `agent-limit` naming the limit.",
        ),
    ]
    callback_url: Annotated[
        str | None,
        Field(
            default=None,
            max_length=2048,
            pattern=CALLBACK_URL_PATTERN,
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
    model_lane: Annotated[
        ModelLane,
        Field(
            default="auto",
            description="How the model calls of the job's fan-out steps that call a model are made: `on_demand` (one "
            "call per item), `batch` (one Bedrock batch inference job per step, at the batch price; a step below the "
            "model's minimum of records, or whose deadline leaves too little time, calls on demand), or `auto` "
            "(`batch` for the `batch` class, else `on_demand`).",
        ),
    ]
    supersedes: Annotated[
        str | None,
        Field(
            default=None,
            pattern=JOB_ID_PATTERN,
            description="A job of the same tenant this one replaces: a queued or running one (also one waiting) is "
            "cancelled with reason `superseded` (event `job_superseded`), a finished one keeps its result, which "
            "then names this job in `superseded_by`. A job id that is not one of the tenant's is a 422 naming "
            "`supersedes` (nothing is stored).",
        ),
    ]
    then: Annotated[
        ThenRequest | None,
        Field(
            default=None,
            description="A job to chain after this one: submitted for the same tenant once this job completes (not "
            "when it fails or is cancelled), its input taking values from this job's result by "
            '`{"$result": "/json/pointer"}`; the view then shows `then_job_id`.',
        ),
    ]

    def __repr__(self) -> str:
        # Powertools formats a route's arguments into a debug message whether or not debug logging is on (an
        # f-string): pydantic's own repr walks every document of the input (0.8 s at 5,000), this one does not.
        return f"{type(self).__name__}(workflow={self.workflow!r}, …)"


class ReplayRequest(Strict):
    # A redrive resumes the execution that failed, on its own version: with `"version": "current"` it is refused.
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["mode", "version"],
                "properties": {"mode": {"const": "redrive"}, "version": {"const": "current"}},
            }
        }
    )

    from_step: Annotated[
        str | None,
        Field(
            default=None,
            pattern=STEP_NAME_PATTERN,
            description="The first step to run again. Default: the step the job failed at, else its first step "
            "without a checkpoint (nothing that completed runs again).",
        ),
    ]
    reason: Annotated[
        str,
        Field(
            min_length=3,
            max_length=500,
            description="Recorded in the job's events (at least one visible character).",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]
    mode: Literal["replay", "redrive"] = "replay"
    version: Literal["own", "current"] = Field(
        default="own",
        description="`own`: the state machine version the job ran on (a job finishes on its own version); "
        "`current`: the version deployed now (recorded in `job_replayed`). A redrive always resumes its own.",
    )
    dry_run: Annotated[
        bool,
        Field(
            default=False,
            description="Answer the plan (what would run again and what is kept) without changing or starting "
            "anything.",
        ),
    ]
    budget: Annotated[
        JobBudget | None,
        Field(
            default=None,
            description="New limits for the job (recorded in `job_replayed`); what it spent so far still counts.",
        ),
    ]

    @model_validator(mode="after")
    def _redrive_on_its_own_version(self) -> Self:
        if self.mode == "redrive" and self.version == "current":
            raise ValueError("a redrive resumes the execution on its own version; replay (mode=replay) to run another")
        return self


class JobUpdate(Strict):
    """A change to a running (or queued, or waiting) job: each field given replaces the job's own, within its
    tenant's policy as a submission's would be; at least one field."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    deadline_seconds: Annotated[
        int | None,
        Field(
            default=None,
            ge=limits.MIN_DEADLINE_SECONDS,
            le=limits.MAX_DEADLINE_SECONDS,
            description=f"The job's new deadline, this many seconds from now ({limits.MIN_DEADLINE_SECONDS}-"
            f"{limits.MAX_DEADLINE_SECONDS} s).",
        ),
    ]
    budget: Annotated[
        JobBudget | None,
        Field(
            default=None,
            description="New token and cost limits: up to the tenant's ceilings, never below what the job has spent "
            "and holds for calls in flight; an omitted field keeps the job's limit. A raise lets a job whose budget "
            "ran short go on with its next model calls.",
        ),
    ]
    sla_class: Annotated[
        SlaClass | None, Field(default=None, description="The job's SLA class (one of the tenant's `sla_classes`).")
    ]
    review: Annotated[
        ReviewRequest | None,
        Field(default=None, description="Review mode and deadline for a review step that has not opened yet."),
    ]
    instructions: Annotated[
        Annotated[str, Visible] | None,  # (null: no change; a text needs a visible character)
        Field(
            default=None,
            min_length=1,
            max_length=limits.MAX_INSTRUCTIONS_CHARS,
            description=f"Instructions (up to {limits.MAX_INSTRUCTIONS_CHARS} characters) added to the prompt of every "
            "model call of the steps that start after the update, and kept with those prompts; they replace the "
            "job's earlier instructions.",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
    ]
    agent: Annotated[
        AgentLimits | None,
        Field(default=None, description="The job's agent limits, within the tenant's ceilings."),
    ]

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("name at least one field to change")
        return self

    def fields(self) -> list[str]:
        """The fields this update changes (given, and not null: null keeps the job's own), in the model's order."""
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


class UploadRequest(Strict):
    filename: SafeName
    media_type: Annotated[
        Literal["application/pdf", "text/plain", "text/markdown", "application/zip"],
        Field(description="`application/zip` for an archive of documents (`input.archive`)."),
    ]
    trigger_id: Annotated[
        str | None,
        Field(
            default=None,
            pattern=TRIGGER_ID_PATTERN,
            description="An S3 trigger's id: the upload goes to its inbox, and starts its job (`POST /v1/triggers`).",
        ),
    ]


# ---------------------------------------------------------------- responses


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING_FOR_REVIEW = "waiting_for_review"
    # Stopped at a step boundary on request: the execution waits on a task token, no compute held, until resumed.
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCEL_REQUESTED = "cancel_requested"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})


class JobAccepted(Model):
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


class Progress(Model):
    completed: int = 0
    total: int = 0
    unit: str = "steps"
    message: str = ""
    eta_seconds: int | None = Field(
        default=None,
        description="Seconds until the job is expected to finish: the steps still ahead (and the rest of the current "
        "one), from the same workflow's recent jobs (`eta_basis`). Null for a job that has stopped or finished.",
    )
    estimated_finish_at: datetime | None = Field(
        default=None, description="When the job is expected to finish (now plus `eta_seconds`)."
    )
    eta_basis: Literal["history", "current_step"] | None = Field(
        default=None,
        description="What the ETA comes from: `history` (per step, the median seconds per item of the workflow's "
        "recent jobs, scaled to this job's items and class), or `current_step` when there is none yet (this job's "
        "own pace, covering every step still ahead).",
    )


WaitReason = Literal[
    "rate_limited", "retry_scheduled", "provider_unavailable", "external_system", "review", "signal", "paused", "child"
]


class WaitState(Model):
    """What a job waits on now (null when it waits on nothing): set and cleared by its steps and the model gateway."""

    reason: WaitReason = Field(
        description="`rate_limited` (a provider answered 429; the step is retried after its backoff), "
        "`retry_scheduled` (an attempt failed; the next one is scheduled), `provider_unavailable` (a provider is "
        "down or its circuit breaker open), `external_system` (a step waits on another system), `review` (a person "
        "decides), `signal` (the job waits for a signal), `paused` (someone paused it), `child` (a child step waits "
        "for its job: `detail` names it)."
    )
    until: datetime | None = Field(
        default=None,
        description="When the wait ends at the latest, when that is known (a retry's backoff, a deadline).",
    )
    detail: str = Field(default="", description="What it waits on, in words (the step, the provider, the error).")
    step: str | None = None
    since: datetime | None = None


class JobCancellation(Model):
    """How an operator's termination ended a job as `cancelled`: the message its tenant reads."""

    at: datetime
    message: str = Field(description="What the operator wrote for the job's owner.")
    terminated: bool = Field(default=True, description="Ended by an operator (`job_terminated` in its events).")


TERMINATED_KIND = "terminated"  # the `error.kind` of a job an operator ended as failed
TERMINATE_MESSAGE_MAX = 1000


class TerminateRequest(Strict):
    status: Literal["failed", "cancelled"] = Field(
        description="How the job ends: `failed` (its `error.message` is `message`, kind `terminated`) or `cancelled` "
        "(its `cancellation.message` is `message`)."
    )
    reason: Annotated[
        str,
        Field(
            min_length=3,
            max_length=500,
            description="Why, in the operators' words: recorded in the job's `job_terminated` event.",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]
    message: Annotated[
        str,
        Field(
            min_length=1,
            max_length=TERMINATE_MESSAGE_MAX,
            description="What the job's owner reads: its `error.message` or `cancellation.message`.",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]


class TerminateOutcome(Model):
    job_id: str
    status: JobStatus = Field(description="The job's status now: `failed` or `cancelled`.")
    previous_status: JobStatus
    message: str
    completed_steps: list[str] = Field(default_factory=list, description="Steps whose results were kept.")
    side_effects: list[str] = Field(default_factory=list, description="What happened before the job stopped.")


class JobError(Model):
    kind: str = Field(description="Failure class, e.g. transient, invalid-input, output-invalid.")
    error: str = Field(description="The ASL error name.")
    step: str | None = None
    item: int | None = None
    items: list[int] | None = Field(default=None, description="For a fan-out: every item that failed.")
    message: str
    detail: dict[str, Any] | None = Field(
        default=None, description="More about it, e.g. `segment` and `timeout_seconds` when a segment ran too long."
    )


class Usage(Model):
    input_tokens: int = Field(
        default=0, description="Prompt tokens not read from or written to a provider's cache (billed as input)."
    )
    output_tokens: int = 0
    cache_read_tokens: int = Field(
        default=0, description="Prompt tokens read from a provider's prompt cache (billed at its cache-read price)."
    )
    cache_write_tokens: int = Field(
        default=0, description="Prompt tokens written to a provider's prompt cache (billed at its cache-write price)."
    )
    cost_usd: str = Field(default="0.000000", description="Actual cost in US dollars (decimal string).")


class StepUsage(Model):
    """What one step (or fan-out item) spent, and on what."""

    step: str
    item: int | None = None
    calls: int = Field(description="Model calls settled (calls answered from a checkpointed response not counted).")
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = Field(default=0, description="Prompt tokens read from a provider's prompt cache.")
    cache_write_tokens: int = Field(default=0, description="Prompt tokens written to a provider's prompt cache.")
    cost_usd: str
    held_tokens: int = Field(description="What calls in flight still hold reserved (prompt plus output cap).")
    models: list[str] = Field(default_factory=list, description="`provider:model` that answered, per route.")


class BudgetView(Model):
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


class ReviewSummary(Model):
    """The job's review, while one is open (or how the last one ended)."""

    review_id: str
    status: Literal["pending", "decided", "expired", "cancelled"] = "pending"
    since: datetime
    deadline: datetime
    assignee_group: str
    reminders: int = 0
    kind: Literal["draft", "complete"] = Field(
        default="draft",
        description="`draft`: a reviewer decides on the job's draft; `complete`: a person writes the result of the "
        "failed job (manual completion).",
    )


class CallbackStatus(Model):
    """The latest webhook of the job: its delivery never changes the job's status."""

    status: Literal["pending", "retrying", "delivered", "dead"]
    event: str
    webhook_id: str
    attempts: int = 0
    last_attempt_at: datetime | None = None
    last_error: str | None = None


class RequestUsage(Model):
    """The AWS requests the job's steps made, by service, and the billing units estimated from them."""

    dynamodb: int = 0
    s3: int = 0
    sqs: int = 0
    dynamodb_read_units: float = Field(default=0, description="Estimated: items of at most 4 KB assumed.")
    dynamodb_write_units: int = Field(default=0, description="Estimated: items of at most 1 KB assumed.")
    s3_class_a: int = Field(default=0, description="PUT, COPY, POST and LIST requests.")
    s3_class_b: int = Field(default=0, description="GET, HEAD and other requests (DELETE is free).")


class OrchestrationCost(Model):
    """What running the workflow costs: state transitions, compute and requests (see docs/operating/cost.md)."""

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


class TierCost(Model):
    """The tokens of the calls paid at one Bedrock service tier, and what they cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    usd: str


class LaneCost(Model):
    """The model calls of one lane: their tokens (prompt tokens uncached, read from and written to the provider's
    cache; output) and what they cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    usd: str = Field(default="0.000000", description="US dollars (decimal string, six decimals).")


class ModelLanes(Model):
    """The model calls by how they were sent: each on its own (`on_demand`) or as records of a Bedrock batch
    inference job (`batch`)."""

    on_demand: LaneCost = Field(default_factory=LaneCost)
    batch: LaneCost = Field(default_factory=LaneCost)


class ModelCost(Model):
    """The model calls' tokens and cost, as the job's budget ledger settled them."""

    input_tokens: int = Field(default=0, description="Prompt tokens not read from or written to a provider's cache.")
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    usd: str
    lanes: ModelLanes = Field(default_factory=ModelLanes, description="The same figures by lane.")
    saved_usd: str = Field(
        default="0.000000",
        description="What the same tokens would have cost on demand and uncached, less what they cost (US dollars, "
        "decimal string; negative when cache writes were not read back, or tokens were paid at the Priority tier): "
        "the same tokens on demand at the Standard tier, uncached, are the measure.",
    )
    tiers: dict[str, TierCost] = Field(
        default_factory=dict,
        description="The same tokens and dollars by the service tier they were paid at (`default`: Standard, "
        "`priority`, `flex`; a route's `service_tier` for the job's SLA class).",
    )


class JobCost(Model):
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
    estimate_reason: str | None = Field(
        default=None,
        description="Why the cost is `estimated`, and whether and when it settles: a running job's figures grow; a "
        "finished job's transitions are counted on the first read after all its executions have ended (that read "
        "settles it); a Distributed Map whose child executions cannot be read keeps an estimate from below for good.",
    )


class CompensatedEffect(Model):
    """A side effect that was undone by its compensation."""

    operation_id: str
    tool: str = Field(description="The tool whose effect it was (e.g. `send_notice`).")
    compensation: str = Field(description="The tool that undid it (e.g. `send_retraction`).")
    step: str
    at: datetime | None = None


class UncompensatedEffect(Model):
    """A side effect that could not be undone, and why."""

    operation_id: str
    tool: str
    compensation: str | None = None
    step: str
    reason: str


class CompensationView(Model):
    """The saga of a job that failed, was cancelled or expired after side effects: each effect with a compensation
    is undone in reverse order (a compensation lane of its state machine)."""

    status: Literal["pending", "running", "finished", "incomplete"] = Field(
        description="`finished`: every effect was undone; `incomplete`: some could not be (see `not_undone`)."
    )
    attempt: int = Field(description="The job attempt whose effects are compensated.")
    undone: list[CompensatedEffect] = Field(default_factory=list)
    not_undone: list[UncompensatedEffect] = Field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class PauseState(Model):
    """A job's pause: who asked and when; once the job reached a step boundary and stopped, when and where."""

    requested_by: str = Field(description="The tenant (or operator) who asked for the pause.")
    requested_at: datetime
    paused_at: datetime | None = Field(
        default=None, description="When the job stopped at a step boundary (`paused`); null while it is on its way."
    )
    step: str | None = Field(default=None, description="The step it stopped before (it enters it again on resume).")


class SteerOutcome(Model):
    """The answer to a pause or a resume: the job's status now and what the request did."""

    job_id: str
    status: JobStatus
    pause: PauseState | None = Field(default=None, description="The pause requested or in force; null after resume.")
    message: str


class SignalAccepted(Model):
    """The answer to a signal: accepted, and whether its step was waiting for it already."""

    job_id: str
    signal: str
    early: bool = Field(description="Sent before its step waited for it: kept, consumed when the step is reached.")
    status: JobStatus = Field(description="The job's status when the signal was accepted.")


class ProvisionalMark(Model):
    """Where a job's provisional result comes from."""

    as_of_step: str = Field(description="The step whose output the provisional result is.")
    at: datetime | None = None


class JobTiming(Model):
    """Where a job's wall time went, in seconds, from its events and step records (not from its trace)."""

    queue_wait_seconds: float = Field(description="From the submission to its execution's start (waiting for a slot).")
    executing_seconds: float = Field(description="Steps running (each step's time between its start and its end).")
    backoff_seconds: float = Field(
        description="Waiting between a failed attempt and its retry (unless a provider's rate limit or outage "
        "failed it)."
    )
    review_wait_seconds: float = Field(description="From a review's request to its decision.")
    provider_wait_seconds: float = Field(
        description="Waiting on a model provider: from an attempt its rate limit or outage failed (`rate-limited`, "
        "`upstream-unavailable`) to the retry."
    )
    total_seconds: float = Field(description="From the submission to the end (or to now, while the job runs).")


class TraceSpan(Model):
    span_id: str = Field(description="16 hex digits.")
    parent_id: str | None = Field(description="The parent span's id; null for the job's root span (the submission).")
    name: str
    start: datetime
    end: datetime
    status: Literal["ok", "error", "unset"]
    attributes: dict[str, str | int | float | bool | list[str] | list[int] | list[float] | list[bool]] = Field(
        default_factory=dict
    )


class JobTrace(Model):
    """A job's trace: every span of its submission, queue wait, steps, items, model and AWS calls, review waits and
    webhook deliveries, in order of start."""

    trace_id: str = Field(description="32 hex digits: derived from the job's correlation id.")
    spans: list[TraceSpan]


class AgentLimitsView(Model):
    max_turns: int | None = Field(default=None, description="Turns of one agent step (the step's own when lower).")
    max_tool_calls: int | None = Field(
        default=None, description="Tool calls of one agent step (the step's own when lower)."
    )


class Escalation(Model):
    """A job flagged for engineering: who, when, the note and a link; stored on the job as `escalation`."""

    by: str
    at: datetime
    note: str
    link: str | None = None


class EscalationCleared(Model):
    """A job's escalation cleared (or there was none): the job no longer carries one."""

    job_id: str
    escalation: None = None


class ChildJob(Model):
    """A job a child step of this job started (`child(...)` in the workflow's spec)."""

    job_id: str
    workflow: str
    step: str = Field(description="The child step that started it.")
    status: JobStatus
    progress: Progress | None = None


class ScheduleTrigger(Model):
    """A job a schedule's fire started: the schedule, and the fire's scheduled time (to the minute, UTC)."""

    type: Literal["schedule"] = "schedule"
    id: str = Field(description="The schedule's id.")
    scheduled_at: datetime = Field(description="The time the fire was due (its minute).")


class ObjectTrigger(Model):
    """A job an object in an S3 trigger's inbox started (or the objects of its batch window)."""

    type: Literal["s3"] = "s3"
    id: str = Field(description="The trigger's id.")
    key: str = Field(description="The object's key (a window's first object's).")
    objects: int = Field(default=1, description="The objects the job took: 1, or a batch window's.")


class EventTrigger(Model):
    """A job an event matching an EventBridge trigger's pattern started."""

    type: Literal["eventbridge"] = "eventbridge"
    id: str = Field(description="The trigger's id.")
    event_id: str = Field(description="The matching event's id.")


#: What started a job that no caller submitted.
JobTrigger = Annotated[ScheduleTrigger | ObjectTrigger | EventTrigger, Field(discriminator="type")]


class JobView(Model):
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
    expires_at: datetime | None = Field(
        default=None,
        description="When the job's retention ends (its tenant's `retention_days` after submission): then its data "
        "is erased and the job answers 410 `job-erased`.",
    )
    error: JobError | None = None
    review: ReviewSummary | None = None
    callback: CallbackStatus | None = None
    sla_class: SlaClass = "standard"
    model_lane: ModelLane = Field(default="auto", description="The model lane the job asked for (`model_lane`).")
    workflow_version: int | None = Field(
        default=None,
        description="The version of the workflow's state machine the job runs (it finishes on the version it "
        "started on, whatever is deployed meanwhile); null until its first step ran.",
    )
    estimated_start_seconds: int | None = Field(
        default=None, description="While the job waits for a slot (`queued`): the estimated seconds until it starts."
    )
    cost: JobCost | None = None
    correlation_id: str | None = Field(
        default=None,
        description="The submission's `traceparent` trace id or `X-Request-Id`, or a new id: on the job's log lines, "
        "model calls and webhook deliveries.",
    )
    compensation: CompensationView | None = Field(
        default=None, description="After a failure, cancellation or expiry with side effects: what was undone."
    )
    pause: PauseState | None = Field(
        default=None,
        description="A pause asked for (the job stops at its next step boundary) or in force (`paused`); null "
        "otherwise.",
    )
    waiting: WaitState | None = Field(
        default=None,
        description="What the job waits on now (a rate limit, a retry, a provider, a review...); null "
        "when it waits on nothing.",
    )
    provisional: ProvisionalMark | None = Field(
        default=None,
        description="A provisional result is readable (`GET …/result?provisional=true`) before the job completes.",
    )
    timing: JobTiming | None = Field(
        default=None, description="Where the job's time went: queue wait, executing, backoff, review, provider waits."
    )
    agent: AgentLimitsView | None = Field(
        default=None,
        description="The job's agent limits: pinned at submission from the tenant's policy then (a later change of "
        "the policy does not move them), changed only by an update of the job.",
    )
    instructions: str | None = Field(
        default=None, description="Instructions given by an update, added to the prompts of later model calls."
    )
    supersedes: str | None = Field(default=None, description="The job this one replaced.")
    superseded_by: str | None = Field(default=None, description="The job that replaced this one.")
    escalation: Escalation | None = Field(
        default=None, description="Flagged for engineering by an operator: who, when, the note and a link."
    )
    input_version: int = Field(default=1, description="The version of its input (a fix by an operator adds one).")
    cancellation: JobCancellation | None = Field(
        default=None,
        description="A job an operator ended as cancelled (`POST /v1/ops/jobs/{job_id}/terminate`): when, and the "
        "operator's message to you.",
    )
    parent: str | None = Field(
        default=None, description="The job whose child step started this one (its usage and cost count there too)."
    )
    children: list[ChildJob] = Field(
        default_factory=list, description="Jobs this job's child steps started: id, workflow, step and status."
    )
    then_job_id: str | None = Field(
        default=None, description="The job its request's `then` chained, submitted when this one completed."
    )
    trigger: JobTrigger | None = Field(
        default=None, description="What started the job when no caller submitted it: a schedule or a trigger."
    )


class JobList(Model):
    jobs: list[JobView]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page; null at the end.")


class CancelOutcome(Model):
    job_id: str
    status: JobStatus
    message: str
    completed_steps: list[str] = Field(default_factory=list, description="Steps whose results were kept.")
    side_effects: list[str] = Field(default_factory=list, description="What happened before the job stopped.")


class DeadLetter(Model):
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


class DeadLetterList(Model):
    dead_letters: list[DeadLetter]


class NamedItem(Model):
    """A fan-out item as people know it: e.g. item 17 of parse_documents is the document "contract-18.txt"."""

    step: str
    item: int
    unit: str
    name: str | None = None


class ReplayOutcome(Model):
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
    version: Literal["own", "current"] = Field(
        default="own", description="Which state machine version the new attempt runs: the job's own, or the current."
    )
    from_version: int | None = Field(default=None, description="The version the job ran on before (null: unknown).")
    undecided_reviews: list[str] = Field(
        default_factory=list,
        description="Review steps that were opened and never decided (the job stopped while they waited): the new "
        "attempt asks a reviewer again before anything after them runs.",
    )
    estimated_start_seconds: int = Field(
        default=0,
        ge=0,
        description="0: the new attempt started. Otherwise it waits for an admission slot (a `replay_waiting` event "
        "says so) and is estimated to start in this many seconds.",
    )
    dry_run: bool = Field(default=False, description="True for a plan only: nothing was changed or started.")
    input_version: int = Field(default=1, description="The version of the job's input the new attempt reads.")
    invalidated_steps: list[str] = Field(
        default_factory=list,
        description="Steps whose checkpoints a fix of the input invalidated (they read a field it changed): they run "
        "again wherever the replay starts, and by default it starts at the first of them.",
    )


# ---------------------------------------------------------------- repair: fix the input, escalate


class InputFixRequest(Strict):
    """A fix of a job's input: a JSON merge patch (RFC 7396) on the input as its request gave it, and why."""

    patch: dict[str, Any] = Field(
        description="A JSON merge patch on the job's `input` (the workflow's input model): a member replaces the "
        "stored one (an array as a whole), `null` removes it, an omitted member is kept.",
        min_length=1,
    )
    reason: Annotated[
        str,
        Field(
            min_length=3,
            max_length=500,
            description="Why: recorded with who fixed it in the input's version and the job's events.",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]


class InputChange(Model):
    """One leaf the fix changed: its JSON path in the input (`documents/1/upload_id`), before and after (absent:
    null)."""

    path: str
    before: Any = None
    after: Any = None


class InputVersion(Model):
    """A version of a job's input: 1 is the submitted one; each fix adds one (the earlier ones are kept)."""

    version: int
    at: datetime
    by: str | None = Field(default=None, description="Who made it (null for the submitted input).")
    role: str | None = None
    reason: str | None = None
    changed: list[str] = Field(default_factory=list, description="The input's top-level fields it changed.")
    diff: list[InputChange] = Field(default_factory=list, description="What it changed, leaf by leaf.")


class InputFixOutcome(Model):
    job_id: str
    status: JobStatus
    input_version: int = Field(description="The new version: the next replay reads it.")
    changed: list[str] = Field(description="The input's top-level fields the fix changed.")
    diff: list[InputChange]
    invalidated_steps: list[str] = Field(
        description="The steps that read a changed field, in order: their checkpoints will not be reused."
    )
    replay_from: str | None = Field(
        description="Where a replay starts by default: the first invalidated step (null: the fix changed nothing)."
    )


class JobInputView(Model):
    job_id: str
    workflow: str
    version: int = Field(description="The current version (what a replay reads).")
    input: dict[str, Any] = Field(description="The current input as a request gives it (the workflow's input model).")
    versions: list[InputVersion] = Field(description="Every version, the first (submitted) one first.")


class EscalationRequest(Strict):
    note: Annotated[
        str,
        Field(
            min_length=3,
            max_length=2000,
            description="What engineering should look at (shown on the job, sent to the alarm topic).",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]
    link: Annotated[
        str | None,
        Field(
            default=None,
            max_length=2000,
            pattern=r"^https?://[!-~]+(?![\s\S])",
            description="A ticket or incident (http or https URL).",
        ),
    ]


class CallLinks(Model):
    prompt: str = Field(description="The exact request the step sent (an operator route).")
    response: str | None = Field(default=None, description="The raw response (none for a call that got none).")


class ModelCallView(Model):
    """One model call of a job, as its budget ledger has it, with what produced it and where its texts are kept."""

    charge_id: str = Field(description="`<job attempt>/<step>/<item>[/<n>]`: the call's entry in the budget ledger.")
    step: str | None = None
    item: int | None = None
    status: Literal["reserved", "settled", "released"] = Field(
        description="`settled`: answered and charged; `reserved`: in flight; `released`: failed, nothing charged."
    )
    at: datetime
    route: str | None = None
    provider: str | None = None
    model_id: str | None = None
    prompt_version: str | None = None
    prompt_hash: str | None = None
    response_hash: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: str
    code_version: str | None = Field(default=None, description="The code that made the call (the asset's hash).")
    workflow_version: int | None = Field(default=None, description="The job's state machine version.")
    links: CallLinks | None = None


class ModelCallList(Model):
    job_id: str
    calls: list[ModelCallView]


class KeptPrompt(Model):
    """Exactly what a model call sent (its hash is the ledger's `prompt_hash`)."""

    prompt_hash: str
    prompt_version: str
    task: str
    system: str
    prompt: str
    response_schema: dict[str, object] | None = Field(
        default=None, description="The JSON schema the answer had to fit."
    )
    max_tokens: int
    instructions: str | None = Field(
        default=None, description="The job's instructions (an update's) that `prompt` ends with, if any."
    )
    redacted: list[str] | None = Field(
        default=None,
        description="The kinds of personal data replaced by placeholders in this copy (the tenant's policy `redact` "
        "when it was kept); null: kept as sent.",
    )
    redacted_before_model: bool | None = Field(
        default=None,
        description="True: the model was sent this redacted prompt (`redact_before_model`); false or null: the model "
        "was sent the prompt with the values the placeholders stand for.",
    )


class KeptResponse(Model):
    """Exactly what a model answered (its hash is the SHA-256 of `text`)."""

    response_hash: str
    prompt_hash: str
    text: str
    model_id: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = Field(default=None, description="Prompt tokens read from the provider's cache.")
    cache_write_tokens: int | None = Field(default=None, description="Prompt tokens written to the provider's cache.")
    redacted: list[str] | None = Field(
        default=None,
        description="The kinds of personal data replaced by placeholders in this copy of the answer; null: as it came.",
    )


class EventView(Model):
    seq: int
    type: str
    step: str | None = None
    item: int | None = None
    at: datetime
    status: JobStatus | None = None
    attempt: int | None = None
    detail: dict[str, object] = Field(default_factory=dict)
    correlation_id: str | None = Field(default=None, description="The job's correlation id (`X-Request-Id`).")


class EventPage(Model):
    events: list[EventView]
    next_cursor: str | None = None


class Citation(Model):
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


class Claim(Model):
    text: str
    citations: list[Citation]


class Verification(Model):
    citations_checked: int
    citations_verified: int
    citations_dropped: int
    claims_dropped: int


class DocumentSummary(Model):
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


class PersonCompletion(Model):
    """The provenance of a result a person wrote for a failed job (a manual completion): who, through which review,
    when, and at whose request."""

    by: str = Field(description="The reviewer who submitted the result (`tenant/reviewer/key id`).")
    review_id: str = Field(description="The review of kind `complete` it was submitted through.")
    at: datetime = Field(description="When the job completed with it.")
    requested_by: str = Field(description="The operator who handed the job to a person.")
    note: str | None = Field(default=None, description="The operator's note to the person.")
    comment: str | None = Field(default=None, description="The reviewer's comment, if any.")


# Marks of a result a person wrote (absent from a result the workflow published): the workflow's result models carry
# these two fields, shown only when set.
CompletedBy = Annotated[
    Literal["person"] | None,
    Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="`person` when a person wrote this result for the failed job (a manual completion); absent when "
        "the workflow published it.",
    ),
]
Completion = Annotated[
    PersonCompletion | None,
    Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="With `completed_by: person`: who wrote it, through which review, when.",
    ),
]


class JobResult(Model):
    job_id: str
    question: str
    answer: str
    claims: list[Claim]
    citations: list[Citation]
    verification: Verification | None = Field(
        description="How citation verification went; null in a provisional result (its draft, not verified yet)."
    )
    model: str
    documents: list[DocumentSummary]
    markdown_key: str | None = None
    completed_by: CompletedBy = None
    completion: Completion = None


class DayUsageView(Model):
    day: str = Field(description="The UTC day (yyyy-mm-dd).")
    tokens: int = Field(description="Held today: settled usage plus reservations in flight.")
    cost_usd: str
    remaining_tokens: int
    remaining_cost_usd: str


class TenantPolicyView(Model):
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


class Caller(Model):
    """Whose API key or token this is: its tenant and role (what the console offers it)."""

    tenant_id: str
    role: Role = Field(
        description="`tenant` (its jobs), `reviewer` (its tenant's reviews, nothing else) or `operator` (every "
        "tenant's jobs, dead letters, replays, webhooks, policies)."
    )
    groups: list[str] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="A reviewer's groups: it sees and decides the reviews assigned to one of them (absent: every "
        "group of its tenant).",
    )
    subject: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="A JWT's subject (`sub`), as the audit trail and review decisions name the caller (absent: an "
        "API key).",
    )


class PageText(Model):
    """One page of a job's document as its steps read it: where a citation's quote is shown in context."""

    document: str
    page: int = Field(ge=1)
    text: str
    source: Literal["text", "ocr"] = Field(default="text", description="The page's text layer, or OCR of its image.")


class FactSource(Model):
    """Where a long-term fact comes from: the job, document, page and verbatim quote."""

    job_id: str
    document: str
    page: int = Field(ge=1)
    quote: str = Field(description="Verbatim text of the page that states the fact.")


class MemoryView(Model):
    """One memory of a tenant: an episode (what a past job did) or a long-term fact (with its provenance)."""

    memory_id: str
    kind: Literal["episode", "fact"]
    subject: str = Field(description="What it is about, as named (e.g. a vendor).")
    text: str = Field(description="The episode's summary, or the fact's statement.")
    job_id: str = Field(description="The job that recorded it.")
    recorded_at: datetime
    details: dict[str, object] = Field(default_factory=dict)
    key: str | None = Field(default=None, description="A fact's key (e.g. `contract-price:NW-5000`).")
    value: str | None = Field(default=None, description="A fact's value.")
    provenance: FactSource | None = None
    valid_until: datetime | None = Field(default=None, description="A fact is re-checked against its source after.")
    verified_at: datetime | None = None
    status: Literal["active", "retired"] = "active"
    retired_reason: str | None = None


class MemoryList(Model):
    tenant_id: str
    memories: list[MemoryView]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page; null at the end.")


class MemoryDeleted(Model):
    tenant_id: str
    deleted: int = Field(description="How many memories were deleted.")


class Health(Model):
    status: Literal["ok", "unavailable"]
    version: str
    checks: dict[str, Literal["ok", "failed"]] = Field(description="What readiness was checked, and how it went.")


class UploadTicket(Model):
    upload_id: str
    upload_url: str
    method: Literal["PUT"] = "PUT"
    headers: dict[str, str]
    expires_in: int


class ResultDownload(Model):
    """A presigned, expiring URL to a completed job's result (`GET` it, with no `Authorization` header)."""

    url: str = Field(description="A presigned S3 GET of the result; 403 once it has expired.")
    expires_at: datetime = Field(description="When the URL stops working.")
    media_type: Literal["application/json", "text/markdown"]
    bytes: int = Field(ge=0, description="The object's size.")


class ProblemError(Model):
    """One thing wrong with the request: where (`loc`, as the client wrote it: `body`, `query`, `header` or `path`,
    then the field's path) and what."""

    model_config = ConfigDict(extra="allow")

    loc: list[str | int]
    msg: str
    type: str | None = None


class Problem(Model):
    """RFC 9457 problem details (`application/problem+json`): `type` names the problem (stable), `title` says it,
    `status` repeats the HTTP status; the members after `instance` are this API's extensions, each present where
    its problem has it (a problem type may add others)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="The problem type: a URI (https://longhaul.dev/problems/<slug>).")
    title: str
    status: int = Field(ge=100, le=599)
    detail: str | None = None
    instance: str | None = Field(default=None, description="The request path that met the problem.")
    errors: list[ProblemError] | None = Field(default=None, description="400, 422: every field that is wrong.")
    error_id: str | None = Field(
        default=None, description="500: the id of this error, in the log line that records it (give it to support)."
    )
    job_id: str | None = Field(
        default=None, description="The job the problem is about (e.g. the one a reused key names)."
    )
    job_status: str | None = None
    review_status: str | None = None
    accepted: list[str] | None = Field(default=None, description="415: the media types accepted.")
    allowed_workflows: list[str] | None = None
    allowed_routes: list[str] | None = None
    allowed_sla_classes: list[str] | None = None
    allowed_steps: list[str] | None = None
    retry_after_seconds: int | None = Field(default=None, description="429: when to retry (also `Retry-After`).")
    submissions_per_minute: int | None = None
    renews_at: str | None = Field(default=None, description="429 daily allowance: when it renews.")


class MetricSeries(Model):
    """One metric series of the platform's namespace over the window: the dashboard's numbers, read back."""

    name: str
    dimensions: dict[str, str] = Field(default_factory=dict)
    sum: float
    count: int
    maximum: float
    average: float


class MetricsReport(Model):
    """Tokens and cost per workflow and tenant, retries per step, queue wait per SLA class, review waiting time,
    webhook failures, and every other series the functions emitted in the window: a series per metric name and
    dimension set (never per job or document), aggregated over the window."""

    window_hours: int
    start: datetime
    end: datetime
    series: list[MetricSeries]
    truncated: bool = Field(
        default=False, description="More series than the route reads at once: those after the last one are left out"
    )


# ---------------------------------------------------------------------------------------------- operators' bulk actions

BulkStatus = Literal[
    "queued",
    "running",
    "retrying",
    "waiting_for_review",
    "paused",
    "completed",
    "failed",
    "cancel_requested",
    "cancelled",
    "expired",
]
BULK_MAX_JOBS = 1000
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def iso_time_text(value: Any) -> Any:
    """A time given as text in ISO 8601 / RFC 3339 form: not a number (which pydantic would take for a Unix time)."""
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        raise ValueError("expected a date-time in ISO 8601 form, e.g. 2026-12-01T00:00:00Z")
    return value


# A time in a request: ISO 8601 text (a date, or a date and time; UTC unless it says otherwise is the caller's to say).
IsoTime = Annotated[datetime, BeforeValidator(iso_time_text), Field(strict=False)]


class BulkFilter(Strict):
    """Which jobs a bulk action takes: every field given must hold (none given: every job the action applies to)."""

    workflow: str | None = Field(
        default=None, pattern=rf"^[a-z0-9_-]{{1,64}}{PATTERN_END}", description="The jobs of this workflow."
    )
    tenant_id: str | None = Field(
        default=None, pattern=rf"^[A-Za-z0-9._-]{{1,64}}{PATTERN_END}", description="The jobs of this tenant."
    )
    status: BulkStatus | list[BulkStatus] | None = Field(
        default=None,
        description="The jobs in this status (or any of these). Default: the statuses the action applies to "
        "(replay: failed, cancelled, expired; terminate: every status not finished, and failed).",
    )
    failed_step: str | None = Field(default=None, pattern=STEP_NAME_PATTERN, description="Jobs whose error is at it.")
    error_kind: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Jobs whose `error.kind` is this (e.g. `invalid-input`, `transient`, `terminated`).",
    )
    since: IsoTime | None = Field(
        default=None, description="Jobs whose status last changed at or after this time (a failed job: when it failed)."
    )
    until: IsoTime | None = Field(default=None, description="Jobs whose status last changed at or before this time.")
    escalated: bool | None = Field(default=None, description="Only escalated jobs (true) or only the others (false).")

    def statuses(self) -> list[JobStatus] | None:
        if self.status is None:
            return None
        given = [self.status] if isinstance(self.status, str) else self.status
        return [JobStatus(s) for s in dict.fromkeys(given)]


class BulkRequest(Strict):
    filter: BulkFilter = Field(default_factory=BulkFilter, description="Which jobs.")
    dry_run: bool = Field(
        default=True,
        description="true (the default): list the matching jobs and what would happen to each, changing nothing; "
        "false: do it (send an `Idempotency-Key`: the same key answers the same, and acts on no job twice).",
    )
    reason: Annotated[
        str | None,
        Field(
            default=None,
            min_length=3,
            max_length=500,
            description="Why, recorded on each job's event log (default: the action and its filter).",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
    ]
    limit: int = Field(
        default=200, ge=1, le=BULK_MAX_JOBS, description="At most this many jobs (the most recently changed first)."
    )

    # The filter's fields are also taken at the top level of the body (`status` too, but for a terminate's, which is
    # how the jobs end); given both ways, the body is refused.
    _flat_filter: ClassVar[tuple[str, ...]] = (
        "workflow",
        "tenant_id",
        "status",
        "failed_step",
        "error_kind",
        "since",
        "until",
        "escalated",
    )

    @model_validator(mode="before")
    @classmethod
    def _gather_filter(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        flat = [k for k in cls._flat_filter if k in data and k not in cls.model_fields]
        if not flat:
            return data
        nested = data.get("filter")
        if nested is not None:
            raise ValueError(f"give the filter in `filter` or at the top level, not both (top level: {flat})")
        return {**{k: v for k, v in data.items() if k not in flat}, "filter": {k: data[k] for k in flat}}


class BulkReplayRequest(BulkRequest):
    from_step: str | None = Field(
        default=None,
        pattern=STEP_NAME_PATTERN,
        description="The step every job replays from (a job whose workflow has no such step is refused); default: "
        "each job's own (where it failed, else its first step without a checkpoint).",
    )


class BulkTerminateRequest(BulkRequest):
    status: Literal["failed", "cancelled"] = Field(
        default="cancelled", description="How each job ends (as `POST /v1/ops/jobs/{job_id}/terminate`)."
    )
    message: Annotated[
        str,
        Field(
            min_length=1,
            max_length=TERMINATE_MESSAGE_MAX,
            description="What each job's owner reads: its `error.message` or `cancellation.message`.",
            json_schema_extra=VISIBLE_SCHEMA,
        ),
        Visible,
    ]


BulkJobAction = Literal["would_replay", "would_terminate", "replayed", "terminated", "refused"]


class BulkJobOutcome(Model):
    job_id: str
    tenant_id: str
    workflow: str
    status: JobStatus = Field(description="The job's status when the action took it.")
    error_kind: str | None = None
    failed_step: str | None = None
    outcome: BulkJobAction = Field(
        description="What was (or, in a dry run, would be) done: `would_replay`, `would_terminate`, `replayed`, "
        "`terminated`, or `refused` (then `problem` says why)."
    )
    plan: ReplayOutcome | None = Field(default=None, description="Replay: the job's plan, or what was started.")
    terminated: TerminateOutcome | None = Field(default=None, description="Terminate: how the job ended.")
    problem: str | None = Field(default=None, description="Why the job was refused.")
    retry: bool = Field(
        default=False,
        description="Refused for now (the workflow engine did not answer): the same request again "
        "tries this job again.",
    )


class BulkOutcome(Model):
    action: Literal["replay", "terminate"]
    dry_run: bool
    filter: BulkFilter
    matched: int = Field(description="How many jobs matched (at most `limit`).")
    more: bool = Field(description="More jobs matched than `limit`: act again for the rest.")
    counts: dict[str, int] = Field(description="Jobs by outcome.")
    jobs: list[BulkJobOutcome]
    idempotency_key: str | None = Field(
        default=None, description="The key this answer is kept under (24 h): the same request with it answers this."
    )
