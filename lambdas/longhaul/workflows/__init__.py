"""The workflows: one package each (`<name>/spec.py`, `<name>/steps.py` and the library only it uses), found by
`longhaul.engine.spec.registry()` — adding a workflow adds a folder here, nothing else — and what derives from them
for the API: the job request as a union discriminated on `workflow` (so OpenAPI shows each workflow's input), the
result a job of each workflow answers, and a reviewer's decision with the edits of every workflow that has a review.

May import: review, engine, guardrails, documents, services, storage, adapters, core. A workflow's package imports
no other workflow's; what two workflows share is `longhaul.documents`."""

import threading
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, TypeAdapter, create_model

from longhaul.core.contracts import BudgetView, JobRequestBase
from longhaul.core.model import adapter
from longhaul.engine.spec import Registry, StepKind, StepSpec, WorkflowSpec, registry
from longhaul.review.contracts import DecisionRequest

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
# Built on its first validation, as the models are (`longhaul.core.model`): a cold start does not pay for it.
JOB_REQUEST: TypeAdapter[JobRequestBase] = adapter(JobRequest)


def _result_model(spec: WorkflowSpec) -> type[BaseModel]:
    name = "".join(part.title() for part in spec.name.split("-")) + "JobResult"
    model: type[BaseModel] = create_model(
        name,
        __base__=spec.result_type,
        __doc__=f"The result of a `{spec.name}` job, with its budget.",
        budget=(
            BudgetView | None,
            Field(default=None, description="Limits, usage, cost and what remains, per step."),
        ),
        provisional=(
            bool,
            Field(
                default=False,
                description="True: the job has not completed and this is its provisional result (`?provisional=true`), "
                "the output of the step `as_of_step`; false: the final result.",
            ),
        ),
        as_of_step=(
            str | None,
            Field(default=None, description="A provisional result's step (null for the final result)."),
        ),
        superseded_by=(
            str | None,
            Field(default=None, description="The job that replaced this one (a submission's `supersedes`), if any."),
        ),
    )
    return model


_results: dict[str, type[BaseModel]] = {}
_results_lock = threading.Lock()


def result_models() -> dict[str, type[BaseModel]]:
    """The body of GET /v1/jobs/{id}/result by workflow: its result and its budget. Built on first use (the result
    route and the OpenAPI document), as a spec's result model is imported then (`WorkflowSpec.result_model`); once,
    however many requests ask at once (the OpenAPI document names these very classes)."""
    with _results_lock:
        if not _results:
            _results.update({name: _result_model(spec) for name, spec in REGISTRY.items()})
        return _results


def job_result_body() -> Any:
    """The union of every workflow's `result_models()`: what the result route documents."""
    results = tuple(result_models().values())
    return Union[results] if len(results) > 1 else results[0]  # noqa: UP007


# The edits a reviewer may send: those of every workflow with a review step (the review's own workflow checks them).
EDITS_MODELS: tuple[type[BaseModel], ...] = tuple(
    dict.fromkeys(s.review.edits_model for spec in REGISTRY.values() for s in spec.steps if s.review is not None)
)
_Edits: Any = Union[EDITS_MODELS] if len(EDITS_MODELS) > 1 else EDITS_MODELS[0]  # noqa: UP007
# The body of POST /v1/reviews/{id}/decision: a `DecisionRequest` whose `edits` are one of the workflows' edits.
DecisionBody: type[DecisionRequest] = create_model(
    "DecisionRequest",
    __base__=DecisionRequest,
    __doc__=DecisionRequest.__doc__,
    edits=(
        _Edits | None,
        Field(
            default=None,
            validate_default=True,
            description="With `edit` (and only then): the edits of the review's workflow (document-analysis: "
            "`answer` and/or `claims`; invoice-reconciliation: `summary`), validated like model output.",
        ),
    ),
)


def decision_request(body: DecisionRequest) -> DecisionRequest:
    """A `DecisionBody` as the review lane takes it: the edits as the reviewer wrote them."""
    dumped = body.model_dump(exclude_unset=True)
    if isinstance(body.edits, BaseModel):
        dumped["edits"] = body.edits.model_dump(exclude_unset=True)
    return DecisionRequest.model_validate(dumped)


__all__ = [
    "EDITS_MODELS",
    "JOB_REQUEST",
    "REGISTRY",
    "DecisionBody",
    "JobRequest",
    "Registry",
    "StepKind",
    "StepSpec",
    "WorkflowSpec",
    "decision_request",
    "job_result_body",
    "result_models",
]
