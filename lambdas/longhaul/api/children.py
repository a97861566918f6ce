"""Jobs that start jobs: a workflow's child steps (`child("name", workflow=…, input=…)` in its spec) and a request's
`then` (a job chained after this one).

A child step is two states (`state_machines.builder.WorkflowBuilder.child`):

    <step>: wait for child  (`.waitForTaskToken`, `open_wait`: submit the child through the admission path, keep the
                             token; a child that ended already resumes it at once)
    <step>                  (the runner, `finish`: the child's outcome — its reference as the step's output, its usage
                             and cost added to this job's, or `ChildFailed` into the step's failure path)

The child is submitted for the same tenant with `Idempotency-Key` `child.<job>.<step>` (a retried or replayed wait
starts one child), the parent's SLA class and route, what remains of the parent's budget and deadline: its spend
counts against the parent's budget. Whatever ends the child (its last step, its failure, a cancel, the sweep) resumes
the parent's token from the same write (`JobStore.on_finished` → `job_finished`); the wait's own bound and the
parent's deadline end a wait nobody resumed. Cancelling a parent cancels its unfinished children (`JobService.cancel`).

A request's `then` (`ThenRequest`) is checked at submission (`then_problems`: the workflow, and the input against its
model with every `{"$result": "/pointer"}` as a placeholder) and submitted when the job completes, once
(`Idempotency-Key` `then.<job>`), its references replaced by the values of the job's result (`resolve`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from longhaul.api.chains import Unresolved, resolve
from longhaul.core import limits
from longhaul.core.budgets import usd
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus, ThenRequest
from longhaul.core.errors import (
    BudgetExceededError,
    CancelledError,
    ChildFailed,
    InternalError,
    InvalidInputError,
    TransientError,
)
from longhaul.core.observability import logger
from longhaul.core.problems import ApiProblem, DailyAllowanceExhausted, RateLimited, Unavailable
from longhaul.core.records import Job
from longhaul.core.step_events import StepEvent
from longhaul.engine.spec import WorkflowSpec, registry
from longhaul.services import Services
from longhaul.storage.dynamo import Cancelled, backoff
from longhaul.storage.jobs import NewEvent

if TYPE_CHECKING:
    from longhaul.engine.context import StepContext

STOPPED = frozenset({JobStatus.CANCEL_REQUESTED, *TERMINAL_STATUSES})
ROLL_UP_TRIES = 8


def wait_name(step: str) -> str:
    return f"child:{step}"


def child_key(job_id: str, step: str) -> str:
    return f"child.{job_id}.{step}"


def then_key(job_id: str) -> str:
    return f"then.{job_id}"


# ---------------------------------------------------------------------------------------------- a child step's wait


def open_wait(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """`<step>: wait for child`: submit the child (once per job and step), keep the token, and resume it at once if
    the child has ended already."""
    event = StepEvent.model_validate(raw_event)
    if event.token is None:
        raise InternalError("the child wait passed no task token", step=event.step)
    job = services.jobs.get_job(event.input.job_id)
    if job is None or job.status in STOPPED:
        raise CancelledError(f"job {event.input.job_id} is {job.status.value if job else 'gone'}", step=event.step)
    spec = registry()[job.workflow]
    child_id = _start_child(services, spec, job, event)
    services.jobs.set_wait_token(job.job_id, wait_name(event.step), event.token)
    services.jobs.set_waiting(job.job_id, "child", detail=f"waiting for child job {child_id}", step=event.step)
    child = services.jobs.get_job(child_id)
    if child is not None and child.finished:  # it ended before the token was kept: nobody else resumes it
        _resume(services, job.job_id, event.step, child)
    return {"waiting": True, "child_job_id": child_id}


def _start_child(services: Services, spec: WorkflowSpec, job: Job, event: StepEvent) -> str:
    from longhaul.api.jobs import JobService  # the submission path (on a child step's first use)
    from longhaul.engine.context import StepContext
    from longhaul.workflows import JOB_REQUEST

    this = spec.step(event.step)
    assert this.child is not None
    known = job.children.get(event.step)
    if known is not None:
        return known["job_id"]
    ctx = StepContext(event.model_copy(update={"token": None}), services, job_attempt=job.attempts, job=job)
    child_input = spec.hook(this.child.input)(ctx)
    body: dict[str, Any] = {
        "workflow": this.child.workflow,
        "input": child_input,
        "sla_class": job.sla_class,
        "deadline_seconds": _remaining_deadline(services, job),
    }
    if job.route:
        body["route"] = job.route
    budget = _remaining_budget(job)
    if budget:
        body["budget"] = budget
    try:
        request = JOB_REQUEST.validate_python(body)
    except ValidationError as invalid:
        raise InvalidInputError(
            f"the input of child {this.child.workflow} is not valid: {invalid.errors(include_url=False)[0]['msg']}",
            step=event.step,
        ) from None
    try:
        accepted, _ = JobService(services).submit_as(
            job.tenant_id,
            request,
            child_key(job.job_id, event.step),
            parent_job_id=job.job_id,
            parent_step=event.step,
        )
    except (RateLimited, Unavailable) as busy:
        raise TransientError(f"child {this.child.workflow} not accepted yet: {busy.detail}", step=event.step) from None
    except DailyAllowanceExhausted as spent:
        raise BudgetExceededError(str(spent.detail), step=event.step) from None
    except ApiProblem as refused:
        detail = f"{refused.detail}: {refused.errors}" if refused.errors else str(refused.detail)
        raise InvalidInputError(f"child {this.child.workflow} refused: {detail}", step=event.step) from None
    started = {"job_id": accepted.job_id, "workflow": this.child.workflow}
    services.jobs.update_job(job.job_id, {"children": {**job.children, event.step: started}})
    services.jobs.append_event(
        job.job_id,
        "child_started",
        step=event.step,
        detail={"child_job_id": accepted.job_id, "workflow": this.child.workflow},
    )
    return accepted.job_id


def _remaining_deadline(services: Services, job: Job) -> int:
    if job.deadline_at is None:
        return limits.MAX_DEADLINE_SECONDS
    left = int((job.deadline_at - services.now()).total_seconds())
    return max(limits.MIN_DEADLINE_SECONDS, min(limits.MAX_DEADLINE_SECONDS, left))


def _remaining_budget(job: Job) -> dict[str, Any]:
    """What the parent may still spend: the child's budget (its spend then counts against the parent's)."""
    budget: dict[str, Any] = {}
    if job.budget_tokens is not None:
        budget["max_tokens"] = max(1, job.budget_tokens - job.spent_tokens)
    if job.budget_cost_micro is not None:
        budget["max_cost_usd"] = usd(max(1, job.budget_cost_micro - job.spent_cost_micro))
    return budget


# ---------------------------------------------------------------------------------------------- a child step's outcome


def finish(ctx: StepContext) -> dict[str, Any]:
    """The child step's work, once its wait ended: the child's reference (and its result's) as the step's output, its
    usage and cost added to this job's; a child that failed, was cancelled or expired fails the step `ChildFailed`."""
    services, job_id, step = ctx.services, ctx.job_id, ctx.event.step
    job = services.jobs.get_job(job_id)
    known = job.children.get(step) if job else None
    if job is None or known is None:
        raise InternalError(f"job {job_id}: step {step} started no child", step=step)
    child = services.jobs.get_job(known["job_id"])
    if child is None:
        raise InternalError(f"child job {known['job_id']} is gone", step=step)
    services.jobs.clear_waiting(job_id, reason="child")
    if not child.finished:
        raise ChildFailed(f"child job {child.job_id} ({child.workflow}) did not finish in time", step=step)
    _roll_up(services, job, step, child)
    if child.status != JobStatus.COMPLETED:
        what = child.error.message if child.error else child.status.value
        raise ChildFailed(f"child job {child.job_id} ({child.workflow}) {child.status.value}: {what}", step=step)
    return {
        "child_job_id": child.job_id,
        "workflow": child.workflow,
        "status": child.status.value,
        "result_key": child.result_key,
    }


def _roll_up(services: Services, job: Job, step: str, child: Job) -> None:
    """The child's usage and cost, added to this job's once: the same transaction marks the child rolled up (a retry
    of the step finds the mark)."""
    if job.children.get(step, {}).get("rolled_up"):
        return
    add = {
        "usage_input_tokens": child.usage_input_tokens,
        "usage_output_tokens": child.usage_output_tokens,
        "usage_cache_read_tokens": child.usage_cache_read_tokens,
        "usage_cache_write_tokens": child.usage_cache_write_tokens,
        "cost_micro": child.cost_micro,
        "spent_tokens": child.spent_tokens,
        "spent_cost_micro": child.spent_cost_micro,
        "model_list_cost_micro": child.model_list_cost_micro,
    }
    detail = {"child_job_id": child.job_id, "status": child.status.value, "cost_usd": usd(child.cost_micro)}
    for tries in range(ROLL_UP_TRIES):
        marked = {**job.children, step: {**job.children[step], "rolled_up": "yes"}}
        try:
            services.jobs.write(
                job,
                [NewEvent("child_finished", step=step, detail=detail)],
                fields={"children": marked},
                add={k: v for k, v in add.items() if v},
            )
            return
        except Cancelled:  # the job changed meanwhile (an event): read it again
            backoff(tries)
            job = services.jobs.get_job(job.job_id) or job
            if job.children.get(step, {}).get("rolled_up"):
                return
    raise TransientError(f"job {job.job_id} kept changing; child {child.job_id} not rolled up", step=step)


def child_detail(services: Services, job: Job, step: str | None) -> dict[str, Any] | None:
    """A failed child step's error detail: the child and its error (the failure recorder adds it to the job's)."""
    known = job.children.get(step or "")
    if known is None:
        return None
    child = services.jobs.get_job(known["job_id"])
    error = child.error.model_dump(exclude_none=True) if child and child.error else None
    return {
        "child_job_id": known["job_id"],
        "workflow": known["workflow"],
        "child_status": child.status.value if child else None,
        "child_error": error,
    }


# ---------------------------------------------------------------------------------------------- a job ended


def job_finished(services: Services, job: Job) -> None:
    """Told of every terminal transition of a job with a parent, children or a `then` (`JobStore.on_finished`):
    resume the parent's wait; submit the chained job of a completed one."""
    if job.parent_job_id and job.parent_step:
        _resume(services, job.parent_job_id, job.parent_step, job)
    if job.status == JobStatus.COMPLETED and job.then:
        submit_then(services, job)


def _resume(services: Services, parent_id: str, step: str, child: Job) -> None:
    token = services.jobs.wait_token(parent_id, wait_name(step))
    if token is None or services.tokens is None:
        return  # its wait keeps no token yet: `open_wait` finds the child ended when it keeps it
    services.tokens.succeed(token, {"child_job_id": child.job_id, "status": child.status.value})


def submit_then(services: Services, job: Job) -> str | None:
    """Submit the job `then` chains (once: `then.<job>` is its Idempotency-Key) and name it on this job."""
    from longhaul.api.jobs import JobService
    from longhaul.workflows import JOB_REQUEST

    assert job.then is not None
    then = ThenRequest.model_validate_json(job.then)
    try:
        result = services.artifacts.get_json(job.result_key) if job.result_key else {}
        body = {"workflow": then.workflow, "input": resolve(then.input, result), "sla_class": job.sla_class}
        request = JOB_REQUEST.validate_python(body)
        accepted, _ = JobService(services).submit_as(job.tenant_id, request, then_key(job.job_id))
    except (Unresolved, ValidationError, ApiProblem) as refused:
        message = str(getattr(refused, "detail", None) or refused)[:500]
        logger.warning("the chained job was not submitted", extra={"job_id": job.job_id, "reason": message})
        services.jobs.append_event(job.job_id, "then_refused", detail={"message": message})
        return None
    services.jobs.update_job(job.job_id, {"then_job_id": accepted.job_id}, only_if=[JobStatus.COMPLETED])
    services.jobs.append_event(
        job.job_id, "then_submitted", detail={"job_id": accepted.job_id, "workflow": then.workflow}
    )
    return accepted.job_id
