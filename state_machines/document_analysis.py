"""Workflow `document-analysis`: answer a question over documents, with verified citations.

list documents → parse each document (fan-out) → plan OCR → OCR of scanned pages (container tasks, only when a page
needs it) → chunk → index → retrieve → fan out evidence extraction → draft → verify citations → review → publish.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn

from state_machines.builder import WorkflowBuilder


def define(b: WorkflowBuilder, *, timeout: Duration) -> sfn.StateMachine:
    definition = (
        b.step("list_documents")
        .next(b.fan_out("parse_documents"))
        .next(b.step("plan_ocr"))
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
