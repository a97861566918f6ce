"""The workflows: one package each (`<name>/spec.py`, `<name>/steps.py` and the library only it uses), found by
`longhaul.engine.spec.registry()` — adding a workflow adds a folder here, nothing else — and what derives from them
for the API: the job request as a union discriminated on `workflow` (so OpenAPI shows each workflow's input).

May import: review, engine, guardrails, documents, services, storage, adapters, core. A workflow's package imports
no other workflow's; what two workflows share is `longhaul.documents`."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, create_model

from longhaul.core.contracts import JobRequestBase
from longhaul.engine.spec import Registry, StepKind, StepSpec, WorkflowSpec, registry

# Every package here whose `spec` module defines `SPEC`.
REGISTRY = registry()


def _request_model(spec: WorkflowSpec) -> type[JobRequestBase]:
    name = "".join(part.title() for part in spec.name.split("-")) + "Request"
    model: type[JobRequestBase] = create_model(
        name,
        __base__=JobRequestBase,
        __doc__=f"A `{spec.name}` job: {spec.description}",
        workflow=(Literal[spec.name], ...),  # type: ignore[arg-type]
        input=(spec.input_model, ...),
    )
    return model


REQUEST_MODELS: tuple[type[JobRequestBase], ...] = tuple(_request_model(s) for s in REGISTRY.values())
# The body of POST /v1/jobs: one request model per workflow, chosen by `workflow`.
JobRequest: Any = (
    Annotated[Union[REQUEST_MODELS], Field(discriminator="workflow")]  # noqa: UP007
    if len(REQUEST_MODELS) > 1
    else REQUEST_MODELS[0]
)
JOB_REQUEST: TypeAdapter[JobRequestBase] = TypeAdapter(JobRequest)

__all__ = ["JOB_REQUEST", "REGISTRY", "JobRequest", "Registry", "StepKind", "StepSpec", "WorkflowSpec"]
