"""Step handlers of the workflows: one per state machine step (`handlers.steps.<step name>`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from longhaul import document_analysis
from longhaul.observability import logger
from longhaul.runner import StepWork, run_step
from longhaul.runner import record_failure as _record_failure
from longhaul.wiring import services

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def _step(work: StepWork) -> Handler:
    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        logger.append_keys(job_id=event.get("input", {}).get("job_id"), step=event.get("step"), item=event.get("item"))
        return run_step(event, work, services(), steps=document_analysis.STEPS)

    return handler


parse_documents = _step(document_analysis.parse_documents)
chunk_documents = _step(document_analysis.chunk_documents)
build_index = _step(document_analysis.build_index)
retrieve_passages = _step(document_analysis.retrieve_passages)
extract_evidence = _step(document_analysis.extract_evidence)
draft_answer = _step(document_analysis.draft_answer)
verify_citations = _step(document_analysis.verify_citations)
publish_result = _step(document_analysis.publish_result)


@logger.inject_lambda_context(clear_state=True)
def record_failure(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(job_id=event.get("job_id"), step=event.get("step"))
    return _record_failure(event, services())
