"""Workflow `document-analysis`: answer a question over documents, with verified citations.

parse → OCR of scanned pages (container tasks, only when a page needs it) → chunk → index → retrieve →
fan out evidence extraction → draft → verify citations → review → publish.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn

from state_machines.builder import WorkflowBuilder


def define(b: WorkflowBuilder, *, timeout: Duration) -> sfn.StateMachine:
    definition = (
        b.step("parse_documents")
        .next(b.container("ocr_pages"))
        .next(b.step("chunk_documents"))
        .next(b.step("build_index"))
        .next(b.step("retrieve_passages"))
        .next(b.fan_out("extract_evidence"))
        .next(b.step("draft_answer"))
        .next(b.step("verify_citations"))
        .next(b.review("review"))
        .next(b.step("publish_result"))
        .next(sfn.Succeed(b, "Job completed"))
    )
    return b.state_machine(definition, timeout=timeout)
