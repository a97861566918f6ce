"""What a step's work gets: its event, the services, the job, and the model gateway (`StepContext.model()`).

The workflow's step functions take a `StepContext` and return their output references; the runner builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from longhaul.core.errors import InvalidInputError
from longhaul.core.records import Job, Provenance
from longhaul.core.step_events import Item, StepEvent, WorkflowState
from longhaul.guardrails.gateway import ModelCalls
from longhaul.services import Services
from longhaul.storage.artifacts import work_key

# Where a provisional step keeps its result, and the output field that names it.
PROVISIONAL_NAME = "provisional.json"
PROVISIONAL_KEY = "provisional_key"


@dataclass
class ItemGroup:
    """The group a grouped fan-out's item runs in (`runner.run_group`): its items in order, and what its items'
    work shares within the invocation (`shared`: e.g. the group's documents, read and parsed once, written as one
    object). A retried group builds it anew, so a step that writes from it must write the same object again."""

    items: list[Item]
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepContext:
    event: StepEvent
    services: Services
    job_attempt: int = 1
    job: Job | None = None
    provenance: Provenance | None = None  # None: this function's code version, no workflow version
    _model: ModelCalls | None = field(default=None, repr=False)
    group: ItemGroup | None = None  # a grouped fan-out's item: its group (None for any other step or item)

    @property
    def job_id(self) -> str:
        return self.event.input.job_id

    @property
    def state(self) -> WorkflowState:
        return self.event.input

    def output_of(self, step: str) -> dict[str, Any]:
        output: dict[str, Any] = self.event.input.steps[step]
        return output

    def signal(self, name: str, model: type[BaseModel] | None = None) -> Any:
        """The body of signal `name` as its (earlier) signal step consumed it, validated by `model` when given; None
        when no signal came (the step passed without waiting, or its wait timed out)."""
        output = self.event.input.steps.get(name) or {}
        key = output.get("body_key")
        if not key:
            return None
        body = self.services.artifacts.get_json(key)
        return model.model_validate(body) if model is not None else body

    def model(self) -> ModelCalls:
        """The step's model gateway: routes, breakers, budget reservations and the validation ladder."""
        if self._model is None:
            job = self.job or self.services.jobs.get_job(self.job_id)
            if job is None:
                raise InvalidInputError(f"job {self.job_id} does not exist", step=self.event.step)
            provenance = self.provenance or Provenance(code_version=self.services.settings.code_version)
            self._model = ModelCalls(
                self.services,
                job,
                self.event.step,
                self.event.item,
                self.job_attempt,
                provenance=provenance,
                attempt=self.event.attempt + 1,
            )
        return self._model

    def provisional(self, result: BaseModel) -> dict[str, Any]:
        """Keep `result` (the workflow's result model, as far as this step knows it) as the job's provisional
        result; returns what the step's output carries (`provisional_key`), which the runner records on the job
        when the step's spec says `provisional=True`."""
        key = self.services.artifacts.put_json(work_key(self.job_id, self.event.step, PROVISIONAL_NAME), result)
        return {PROVISIONAL_KEY: key}

    @property
    def model_calls(self) -> list[dict[str, Any]]:
        return self._model.calls if self._model else []


StepWork = Callable[[StepContext], dict[str, Any]]
