"""What a workflow provides to be completed by hand, and what it is given.

A failed job's execution is over; an operator may hand it to a person, who writes its result in a review of kind
`complete` (`longhaul.operations.completion`). A workflow that allows it has a module `by_hand` next to its steps
with two functions, each given a `StepContext` rebuilt from the job's checkpoints (the outputs of the steps that
succeeded, as its last step would have read them):

- `draft(ctx) -> dict`: what the person starts from: the job's last draft when it got that far, else the workflow's
  result skeleton;
- `complete(ctx, result: dict, completion: PersonCompletion) -> HandResult`: the person's result validated by the
  workflow's result model and its business rules (its own code, not a copy), marked `completed_by: person`, with
  its rendering as its last step publishes it; `ResultRefused` (with pydantic-style `errors`) when it does not pass.

A workflow without a `by_hand` module cannot be completed by hand (the operator's request is a 409).
"""

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from longhaul.core.records import Job, StepRecord
from longhaul.core.step_events import StepEvent, WorkflowState
from longhaul.engine.context import StepContext
from longhaul.engine.spec import WorkflowSpec
from longhaul.services import Services

MODULE = "by_hand"


class ResultRefused(Exception):
    """The person's result does not pass the workflow's model or rules: `errors` say where (locations under the
    result) and why, as a 422's `errors`."""

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors


@dataclass(frozen=True)
class HandResult:
    """A result that passed: the workflow's result model (its `completed_by`/`completion` set by the caller) and
    its Markdown rendering, both written where a normal completion writes them."""

    result: BaseModel
    markdown: str


def refused_by_model(invalid: ValidationError, message: str, *, prefix: tuple[str | int, ...] = ()) -> ResultRefused:
    """A pydantic refusal of the result as a `ResultRefused` (locations under `result`)."""
    errors = [
        {"loc": [*prefix, *e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in invalid.errors(include_url=False, include_input=False)
    ]
    return ResultRefused(message, errors)


def _module(spec: WorkflowSpec) -> ModuleType | None:
    name = f"{spec.domain.rpartition('.')[0]}.{MODULE}"
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def supports(spec: WorkflowSpec) -> bool:
    """Whether the workflow can be completed by hand (it has a `by_hand` module)."""
    return _module(spec) is not None


def hook(spec: WorkflowSpec, name: str) -> Callable[..., Any]:
    """The workflow's `by_hand.<name>` (`draft` or `complete`)."""
    module = _module(spec)
    if module is None:
        raise LookupError(f"workflow {spec.name} cannot be completed by hand")
    found: Callable[..., Any] = getattr(module, name)
    return found


def context_of(services: Services, job: Job, spec: WorkflowSpec) -> StepContext:
    """A context for the job's last step as a completion by hand sees it: the outputs of its succeeded steps (not
    their fan-out items: a fan-out's own output is its step record's)."""
    done: list[StepRecord] = [
        r for r in services.checkpoints.steps(job.job_id) if r.item is None and r.succeeded and r.output is not None
    ]
    state = WorkflowState(
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        workflow=job.workflow,
        input_key=job.input_key,
        correlation_id=job.correlation_id,
        steps={r.step: dict(r.output or {}) for r in done},
    )
    return StepContext(event=StepEvent(step=spec.last_step, input=state), services=services, job=job)
