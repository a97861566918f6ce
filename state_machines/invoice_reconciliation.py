"""Workflow `invoice-reconciliation`: parse → extract each invoice → check rules and reconcile → summarize → review
→ publish."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn

from state_machines.builder import WorkflowBuilder


def define(b: WorkflowBuilder, *, timeout: Duration) -> sfn.StateMachine:
    definition = (
        b.step("parse_documents")
        .next(b.fan_out("extract_invoices"))
        .next(b.step("check_invoices"))
        .next(b.step("summarize_findings"))
        .next(b.review("review"))
        .next(b.step("publish_report"))
        .next(sfn.Succeed(b, "Job completed"))
    )
    return b.state_machine(definition, timeout=timeout)
