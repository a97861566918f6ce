"""Workflow `document-analysis`: answer a question over documents, with verified citations.

parse → chunk → index → retrieve → fan out evidence extraction → draft → verify citations → publish.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn

from longhaul.workflows import DOCUMENT_ANALYSIS, MAX_DEADLINE_SECONDS
from longhaul.workflows import STEPS as WORKFLOW_STEPS
from state_machines.builder import WorkflowBuilder

WORKFLOW = DOCUMENT_ANALYSIS
STEPS = WORKFLOW_STEPS[WORKFLOW]
# Per-job deadlines (default 2 h) are enforced by the steps and the sweeper; this bounds any execution.
DEADLINE = Duration.seconds(MAX_DEADLINE_SECONDS)


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
