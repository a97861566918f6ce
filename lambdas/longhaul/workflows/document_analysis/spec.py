"""Workflow `document-analysis`: answer a question over documents, with verified citations.

parse → chunk → index → retrieve → fan out evidence extraction over passage groups → draft → verify → publish.
"""

from __future__ import annotations

from longhaul.contracts import DocumentAnalysisInput, JobResult
from longhaul.workflows.spec import WorkflowSpec, fan_out, step

SPEC = WorkflowSpec(
    name="document-analysis",
    description="Answer a question over documents, every claim with a verified verbatim citation.",
    input_model=DocumentAnalysisInput,
    result_model=JobResult,
    domain="longhaul.workflows.document_analysis.steps",
    steps=(
        step("parse_documents", timeout_seconds=300, memory_mb=1769),
        step("chunk_documents"),
        step("build_index", memory_mb=1769),
        step("retrieve_passages"),
        fan_out(
            "extract_evidence",
            over="retrieve_passages.groups",
            item_unit="passage group",
            timeout_seconds=120,
            calls_model=True,
        ),
        step("draft_answer", timeout_seconds=120, calls_model=True),
        step("verify_citations"),
        step("publish_result"),
    ),
)
