from typing import Any

from longhaul.core.llm import ModelRequest
from longhaul.core.model import Model
from longhaul.documents.intake import DocumentReader, Intake, PreparedInput, StoredDocument
from longhaul.engine.context import StepContext
from longhaul.storage import artifacts as keys
from longhaul.workflows.clause_summary.spec import ClauseSummaryInput


class JobInput(Model):
    workflow: str
    document: StoredDocument


class Summary(Model):
    clauses: list[str]


class ClauseSummaryResult(Model):
    job_id: str
    clauses: list[str]


def prepare(intake: Intake, job_input: ClauseSummaryInput) -> PreparedInput:
    intake.look_up([job_input.document])
    document = intake.document(job_input.document, index=0, loc=["document"])
    intake.check()  # every problem found so far, as one 422
    return PreparedInput(payload=JobInput(workflow="clause-summary", document=document), estimated_sla_seconds=30)


def read_document(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    job_input = JobInput.model_validate(store.get_json(ctx.state.input_key))
    text = DocumentReader(store).read(job_input.document).decode()
    return {"text_key": store.put_json(keys.work_key(ctx.job_id, "read_document", "text.json"), {"text": text})}


def summarize(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    text = store.get_json(ctx.output_of("read_document")["text_key"])["text"]
    request = ModelRequest(
        task="summarize_clauses",
        prompt_version="clause-summary-1",
        system="List the contract's clauses, one sentence each.",
        prompt=text,
        context={"text": text},
        response_schema=Summary.model_json_schema(),
        offline="longhaul.workflows.clause_summary.offline:summarize",
    )
    summary, _ = ctx.model().ask(request, Summary)
    return {"summary_key": store.put_json(keys.work_key(ctx.job_id, "summarize", "summary.json"), summary)}


def publish_result(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    summary = Summary.model_validate(store.get_json(ctx.output_of("summarize")["summary_key"]))
    result = ClauseSummaryResult(job_id=ctx.job_id, clauses=summary.clauses)
    return {"result_key": store.put_json(keys.result_key(ctx.job_id), result)}
