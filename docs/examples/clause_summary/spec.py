from typing import Annotated

from pydantic import Field

from longhaul.core.contracts import DocumentInput, Strict
from longhaul.engine.spec import WorkflowSpec, step


class ClauseSummaryInput(Strict):
    document: Annotated[DocumentInput, Field(description="The contract to summarize (text or Markdown).")]


SPEC = WorkflowSpec(
    name="clause-summary",
    description="Summarize a contract's clauses.",
    input_model=ClauseSummaryInput,
    result_model="longhaul.workflows.clause_summary.steps:ClauseSummaryResult",
    domain="longhaul.workflows.clause_summary.steps",
    steps=(
        step("read_document", timeout_seconds=120),
        step("summarize", timeout_seconds=120, calls_model=True),
        step("publish_result"),
    ),
)
