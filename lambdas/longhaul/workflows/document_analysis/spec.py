"""Workflow `document-analysis`: answer a question over documents, with verified citations.

list the documents → parse each (a fan-out per document, small ones in groups) → plan OCR → OCR of scanned pages
(container tasks over page batches; skipped when no page needs it) → chunk and index (a fan-out per batch of
documents) → retrieve → fan out evidence extraction over passage groups → draft → verify → review → publish. The
review (when asked for; `auto`: when verification dropped a claim) may edit the answer and the claims; edited claims
are verified against their pages like the model's.
"""

from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from longhaul.core import limits
from longhaul.core.contracts import VISIBLE_SCHEMA, DocumentAnalysisInput, JobResult, Strict, Visible
from longhaul.core.settings import Env
from longhaul.engine.spec import ReviewPolicy, WorkflowSpec, container, fan_out, review, segment, step


class EditedCitation(Strict):
    """A citation as the result shows it: `chunk_id` and `quote` are what is verified (the quote must be on that
    passage); `document` and `page`, when given, must be the passage's; `source` and `ocr_confidence` are taken
    from the passage, so a citation copied from the draft is accepted as it is."""

    chunk_id: Annotated[str, Field(min_length=1, max_length=200)]
    quote: Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=VISIBLE_SCHEMA), Visible]
    document: Annotated[str | None, Field(default=None, max_length=1000)]
    page: Annotated[int | None, Field(default=None, ge=1)]
    source: Literal["text", "ocr"] | None = None
    ocr_confidence: Annotated[float | None, Field(default=None, ge=0, le=1)]


class EditedClaim(Strict):
    text: Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=VISIBLE_SCHEMA), Visible]
    citations: Annotated[list[EditedCitation], Field(min_length=1, max_length=20)]


class AnswerEdits(Strict):
    """A reviewer's edits: a new answer and/or claims (each citation is verified like the model's)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": [field], "properties": {field: {"not": {"type": "null"}}}}
                for field in ("answer", "claims")
            ]
        }
    )

    answer: Annotated[
        Annotated[str, Field(min_length=1, max_length=20_000, json_schema_extra=VISIBLE_SCHEMA), Visible] | None,
        Field(default=None),
    ]
    claims: Annotated[list[EditedClaim] | None, Field(default=None, max_length=100)]

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.answer is None and self.claims is None:
            raise ValueError("edit the `answer`, the `claims`, or both")
        return self


SPEC = WorkflowSpec(
    name="document-analysis",
    description="Answer a question over documents, every claim with a verified verbatim citation.",
    input_model=DocumentAnalysisInput,
    result_model=JobResult,
    domain="longhaul.workflows.document_analysis.steps",
    # Memory (MB) from `bench/cost.py`'s per-step table (a 1,000-document job: every step uses 110-130 MB, ~110 of
    # them the runtime, the handler's imports and its clients) and the bounds of what one invocation holds: a parse
    # group's 8 MiB of text (+24 MB of allocations), a PDF upload alone (up to 50 MiB: its parser's working set is the
    # headroom), an index batch's 5M characters (+73 MB), every parsed document at once for plan_ocr. Below 1,769 MB a
    # function gets that share of a vCPU, so none goes below 512 MB (a cold start's imports are CPU-bound) and the
    # CPU-bound steps (parsing, indexing) keep 1,024 MB. `reads`: the input fields each step reads (a fix of the input
    # invalidates the checkpoints of the steps that read what changed).
    steps=(
        step("list_documents", memory_mb=512, reads=("documents", "archive")),
        # One document per item, run in groups of small documents (`engine.items`: one invocation per group; a
        # Distributed Map above `limits.INLINE_MAP_MAX_ITEMS` documents, one group per child execution).
        fan_out(
            "parse_documents",
            over="list_documents.documents",
            item_unit="document",
            timeout_seconds=300,
            memory_mb=1024,
            grouped=True,
            reads=(),  # its documents by the references list_documents gave
        ),
        step("plan_ocr", timeout_seconds=300, memory_mb=1769, reads=("documents", "archive")),
        container(
            "ocr_pages",
            over="plan_ocr.ocr_batches",
            worker="ocr",
            item_unit="page batch",
            timeout_seconds=900,
            heartbeat_seconds=120,
            reads=(),
        ),
        # One batch of consecutive documents per item (`batches.py`; bounded by `limits.INDEX_BATCH_MAX_*`): each
        # chunks its documents and writes their BM25 index; retrieve_passages searches the batches' indexes as one.
        fan_out(
            "build_index",
            over="plan_ocr.index_batches",
            item_unit="document batch",
            memory_mb=1024,
            reads=(),
        ),
        step("retrieve_passages", memory_mb=512, reads=("question", "max_passages", "passages_per_group", "rerank")),
        fan_out(
            "extract_evidence",
            over="retrieve_passages.groups",
            item_unit="passage group",
            timeout_seconds=120,
            calls_model=True,
            memory_mb=512,
            reads=("question",),
        ),
        # Its draft, before citation verification, is the job's provisional result.
        step(
            "draft_answer", timeout_seconds=120, calls_model=True, provisional=True, memory_mb=512, reads=("question",)
        ),
        step("verify_citations", memory_mb=512, reads=()),
        review(
            "review",
            policy=ReviewPolicy(
                assignee_group="analysts", secondary_group="analysis-leads", edits_model=AnswerEdits, mode="never"
            ),
            reads=("question",),  # the question, shown to the reviewer
        ),
        step("publish_result", memory_mb=512, reads=("question",)),
    ),
    # OCR and indexing together within a bound (a setting): past it the job fails, error kind `timeout`.
    segments=(
        segment(
            "ocr_and_index",
            steps=("plan_ocr", "ocr_pages", "build_index"),
            timeout_seconds=limits.OCR_INDEX_SEGMENT_SECONDS,
            timeout_setting=Env.OCR_INDEX_SEGMENT_SECONDS,
        ),
    ),
)
