"""What the API's job routes use of jobs that start jobs, apart from the submission (`longhaul.api.children`
submits, and imports `longhaul.api.jobs`; `longhaul.api.jobs` imports this): a request's `then` checked
(`then_problems`) and resolved (`resolve`, JSON Pointer references into the result), a job's children as its view
shows them, the cancellation of a job's children."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from longhaul.core.auth import Principal
from longhaul.core.contracts import ChildJob, ThenRequest
from longhaul.core.observability import logger
from longhaul.core.problems import ApiProblem
from longhaul.core.records import Job
from longhaul.engine.spec import registry
from longhaul.services import Services

REFERENCE = "$result"


def _reference(value: Any) -> str | None:
    """The pointer of `{"$result": "/path"}`, or None for any other value."""
    if isinstance(value, Mapping) and set(value) == {REFERENCE} and isinstance(value[REFERENCE], str):
        return str(value[REFERENCE])
    return None


def references(template: Any, at: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], str]]:
    """Every reference in a template, with where it is."""
    pointer = _reference(template)
    if pointer is not None:
        return [(at, pointer)]
    if isinstance(template, Mapping):
        return [r for k, v in template.items() for r in references(v, (*at, str(k)))]
    if isinstance(template, list):
        return [r for i, v in enumerate(template) for r in references(v, (*at, i))]
    return []


def pointer_problem(pointer: str) -> str | None:
    """What is wrong with a JSON Pointer (RFC 6901), or None."""
    if pointer and not pointer.startswith("/"):
        return "a JSON Pointer is empty (the whole result) or starts with `/`"
    parts = pointer.split("/")[1:]
    if any("~" in p.replace("~0", "").replace("~1", "") for p in parts):
        return "`~` is written `~0` and `/` is written `~1` in a JSON Pointer"
    return None


class Unresolved(Exception):
    """A reference names nothing in the result."""


def point(document: Any, pointer: str) -> Any:
    """The value a JSON Pointer names (RFC 6901; hand-written: ten lines, and the Lambda asset stays one library
    lighter), or `Unresolved`."""
    found = document
    for raw in pointer.split("/")[1:] if pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        elif isinstance(found, Mapping) and part in found:
            found = found[part]
        else:
            raise Unresolved(f"{pointer!r} names nothing in the result (at {part!r})")
    return found


def resolve(template: Any, result: Any) -> Any:
    """The template with each reference replaced by the value it points at in `result`."""
    pointer = _reference(template)
    if pointer is not None:
        return point(result, pointer)
    if isinstance(template, Mapping):
        return {k: resolve(v, result) for k, v in template.items()}
    if isinstance(template, list):
        return [resolve(v, result) for v in template]
    return template


def then_problems(then: ThenRequest, deployed: Iterable[str]) -> list[dict[str, Any]]:
    """What is wrong with a request's `then` (422 `errors` at their paths): an unknown workflow, a bad pointer, or an
    input its workflow's model refuses anywhere but where a reference stands (its value is known only later)."""
    loc: list[str | int] = ["body", "then"]
    specs = registry()
    if then.workflow not in specs or then.workflow not in set(deployed):
        allowed = sorted(set(specs) & set(deployed))
        return [{"loc": [*loc, "workflow"], "msg": f"not a deployed workflow: {allowed}", "type": "unknown_workflow"}]
    problems: list[dict[str, Any]] = []
    found = references(then.input)
    for at, pointer in found:
        problem = pointer_problem(pointer)
        if problem:
            problems.append({"loc": [*loc, "input", *at, REFERENCE], "msg": problem, "type": "json_pointer"})
    placed = {at for at, _ in found}
    try:
        specs[then.workflow].input_model.model_validate(then.input)
    except ValidationError as invalid:
        for error in invalid.errors(include_url=False, include_input=False):
            where = tuple(error["loc"])
            if any(where[: len(at)] == at for at in placed):
                continue  # at (or inside) a reference: its value comes from the result
            problems.append({"loc": [*loc, "input", *where], "msg": error["msg"], "type": error["type"]})
    return problems


def children_of(services: Services, job: Job) -> list[ChildJob]:
    """The job's children as its view shows them (their status now)."""
    shown = []
    for step, known in job.children.items():
        child = services.jobs.get_job(known["job_id"])
        if child is None:
            continue
        progress = None if child.finished else child.shown_progress()
        shown.append(
            ChildJob(job_id=child.job_id, workflow=child.workflow, step=step, status=child.status, progress=progress)
        )
    return shown


def cancel_children(cancel: Any, job: Job) -> None:
    """Cancel the job's unfinished children (`cancel`: the API's, by job id, as the job's tenant)."""
    for known in job.children.values():
        try:
            cancel(known["job_id"])
        except ApiProblem as refused:  # finished meanwhile, or its stop is left to the sweep
            logger.info("child not cancelled now", extra={"job_id": known["job_id"], "reason": refused.detail})


def principal_of(tenant_id: str) -> Principal:
    """Who submits a child or a chained job: the tenant itself (the platform acting for it)."""
    return Principal(tenant_id=tenant_id, role="tenant", key_id="platform")
