"""Workflow `document-analysis`: answer a question over documents, with verified citations.

parse → chunk → index → retrieve → fan out evidence extraction → draft → verify citations → publish.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn

from state_machines.builder import WorkflowBuilder

WORKFLOW = "document-analysis"
STEPS = (
    "parse_documents",
    "chunk_documents",
    "build_index",
    "retrieve_passages",
    "extract_evidence",
    "draft_answer",
    "verify_citations",
    "publish_result",
)
DEADLINE = Duration.hours(2)


def define(b: WorkflowBuilder) -> sfn.StateMachine:
    definition = (
        b.step("parse_documents", timeout_seconds=300, memory_mb=1769)
        .next(b.step("chunk_documents"))
        .next(b.step("build_index", memory_mb=1769))
        .next(b.step("retrieve_passages"))
        .next(b.fan_out("extract_evidence", items_path="$.steps.retrieve_passages.groups", timeout_seconds=120))
        .next(b.step("draft_answer", timeout_seconds=120))
        .next(b.step("verify_citations"))
        .next(b.step("publish_result"))
        .next(sfn.Succeed(b, "Job completed"))
    )
    return b.state_machine(definition, timeout=DEADLINE)
