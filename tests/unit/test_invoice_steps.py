"""The invoice workflow's extraction step around a scripted model: every value is sourced, an invoice whose values
are not where they say is extracted again with the errors as feedback (bounded), and what survives is a finding."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.core.llm import ModelGateway, ModelRequest, ModelResponse, Usage
from longhaul.core.records import Job
from longhaul.core.step_events import StepEvent
from longhaul.engine.context import StepContext
from longhaul.services import Services
from longhaul.workflows.invoice_reconciliation import steps
from longhaul.workflows.invoice_reconciliation.extraction import extract_invoice
from tests.unit.step_support import JOB_ID, TENANT, WORKFLOW, events
from tests.unit.step_support import job as job  # the fixture

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "invoices"
DOCUMENT = "inv_01_northwind.txt"


class ScriptedModel:
    """A model that answers with the next scripted text and remembers what it was asked."""

    model_id = "scripted"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        text = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return ModelResponse(
            text=text, usage=Usage(input_tokens=100, output_tokens=50), model_id="scripted", stop_reason="end_turn"
        )


@dataclasses.dataclass(frozen=True)
class ScriptedServices(Services):
    model: Any = None

    def gateway(self) -> ModelGateway:
        gateway: ModelGateway = self.model
        return gateway


def _pages() -> list[tuple[int, str]]:
    return [(1, (SAMPLES / DOCUMENT).read_text())]


def _good() -> str:
    return extract_invoice(DOCUMENT, _pages()).model_dump_json()


def _misquoted() -> str:
    """A plausible extraction whose first unit price is not written in the line it quotes."""
    invoice = json.loads(_good())
    invoice["line_items"][0]["unit_price"] = "4.57"
    return json.dumps(invoice)


def _run(services: Services, model: ScriptedModel) -> dict[str, Any]:
    current = services.jobs.get_job(JOB_ID)
    if current is not None and current.status == JobStatus.QUEUED:
        services.jobs.transition(JOB_ID, JobStatus.RUNNING, event="job_started")  # a mid-job step: the job runs
    scripted = ScriptedServices(
        **{f.name: getattr(services, f.name) for f in dataclasses.fields(Services)}, model=model
    )
    ref = services.artifacts.put_json(
        f"work/{JOB_ID}/parse_documents/invoice-000.json", {"document": DOCUMENT, "pages": _pages()}
    )
    event = StepEvent.model_validate(
        {
            "step": "extract_invoices",
            "item": 0,
            "ref": ref,
            "input": {"job_id": JOB_ID, "tenant_id": TENANT, "workflow": WORKFLOW, "input_key": "unused"},
        }
    )
    output = steps.extract_invoices(StepContext(event, scripted))
    extraction = steps.Extraction.model_validate(services.artifacts.get_json(output["extraction_key"]))
    return {"output": output, "extraction": extraction}


def test_a_sourced_extraction_is_asked_for_once(services: Services, job: Job) -> None:
    model = ScriptedModel(_good())
    result = _run(services, model)
    assert len(model.requests) == 1
    assert result["extraction"].errors == [] and result["extraction"].attempts == 1
    assert len(services.checkpoints.charges(JOB_ID)) == 1


def test_an_unsourced_value_is_extracted_again_with_the_errors_as_feedback(services: Services, job: Job) -> None:
    model = ScriptedModel(_misquoted(), _good())
    result = _run(services, model)

    assert len(model.requests) == 2
    feedback = model.requests[1].context["feedback"]
    assert any("line_items[0].unit_price" in line and "4.57" in line for line in feedback)
    assert "line_items[0].unit_price" in model.requests[1].prompt
    assert result["extraction"].errors == [] and result["extraction"].attempts == 2
    retried = [e for e in events(services.jobs) if e.type == "extraction_retried"]
    assert len(retried) == 1 and retried[0].item == 0
    assert len(services.checkpoints.charges(JOB_ID)) == 2, "each call is charged once"


def test_re_extraction_is_bounded_and_what_survives_is_an_unsourced_value(services: Services, job: Job) -> None:
    model = ScriptedModel(_misquoted())
    result = _run(services, model)

    assert len(model.requests) == 1 + steps.MAX_REEXTRACTIONS
    (error,) = result["extraction"].errors
    assert error.field == "line_items[0].unit_price"
    assert result["output"]["unsourced_values"] == 1


@pytest.mark.parametrize("answer", ["not json at all", '{"document": "x", "line_items": "nope"}'])
def test_output_that_is_not_the_schema_fails_the_step_as_output_invalid(
    services: Services, job: Job, answer: str
) -> None:
    from longhaul.core.errors import OutputInvalidError

    with pytest.raises(OutputInvalidError):
        _run(services, ScriptedModel(answer))
