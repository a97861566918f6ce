"""Steering a job that has not finished: an update of its limits, class, review and instructions; supersession.

A job's limits (deadline, budget, agent turns and tool calls) are pinned at submission from its tenant's policy then;
an update is the only way they change, and it says so in the job's log (`job_updated`, naming the fields and who
asked). An update is judged as a submission is, against the policy in force now: a deadline within the API's bounds,
a budget up to the tenant's ceilings and never below what the job has spent and holds for calls in flight, an SLA
class the tenant may use, agent limits within its ceilings; a refusal writes nothing. What each field changes:

- `deadline_seconds`: the job's deadline becomes now + that many seconds; the sweep (and, locally, the time-scaled
  clock) expire it then, not at the old one;
- `budget`: the limits every later reservation is checked against (`storage/budgets.py` reads them from the job at
  each call); a raise also lifts a `budget_exhausted` mark of the job's own budget, so its next calls are admitted;
- `sla_class`: the job's class; a job waiting for a slot is queued again in its new class;
- `review`: the mode and deadline a review step reads when it opens (one already open keeps its own);
- `instructions`: added by the model gateway to the prompt of every call of the steps that start after the update
  (`guardrails/gateway.py`), and kept with those prompts;
- `agent`: the limits the job's agent turns read (`engine/agent.py`) from the next turn on.

Supersession: a submission naming `supersedes` must name a job of the same tenant (else a 422 naming the field,
before anything is stored); once the new job is accepted, the old one is marked `superseded_by` (event
`job_superseded`) and, unless it has finished, cancelled with reason `superseded` through the cancel path.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from longhaul.core.auth import Principal
from longhaul.core.budgets import JobBudget, TenantPolicy, job_limits, to_micro
from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, AgentLimits, JobStatus, JobUpdate
from longhaul.core.ports import Waiting
from longhaul.core.problems import ApiProblem, InvalidRequest, Unavailable
from longhaul.core.records import JOB_ID, Job
from longhaul.services import Services
from longhaul.storage.dynamo import Cancelled, backoff
from longhaul.storage.jobs import NewEvent

UPDATE_TRIES = 8  # conditional writes tried while the job's steps write to it too
#: The statuses in which a job takes an update: every one but the terminal ones and a cancellation under way.
UPDATABLE = frozenset(s for s in JobStatus if s not in TERMINAL_STATUSES and s != JobStatus.CANCEL_REQUESTED)


class AlreadyFinished(ApiProblem):
    status, slug, title = 409, "already-finished", "The job has already finished"


def update_job(services: Services, principal: Principal, job: Job, change: JobUpdate) -> Job:
    """Apply `change` to `job` (the caller's, already found): 409 for a finished job, 422 naming every field outside
    the tenant's policy; the job as written. A change that changes nothing writes nothing."""
    for tries in range(UPDATE_TRIES):
        if job.status not in UPDATABLE:
            raise AlreadyFinished(
                f"job {job.job_id} is {job.status.value}; only a job that has not finished can be updated",
                job_status=job.status.value,
            )
        policy = services.budgets.policy(job.tenant_id)  # the policy in force now (a consistent read)
        fields = _fields(services, job, change, policy)
        changed = sorted({name for name in change.fields() if _changes(job, name, fields)})
        if not changed:
            return job
        detail = {"fields": changed, "requested_by": principal.role, "by": principal.tenant_id}
        if change.deadline_seconds is not None:
            detail["deadline_at"] = fields["deadline_at"]
        try:
            updated = services.jobs.write(
                job, [NewEvent("job_updated", detail=detail)], fields=fields, only_if=UPDATABLE
            )
        except Cancelled:  # a step wrote to the job meanwhile (or it finished): judge the change again
            backoff(tries)
            job = services.jobs.get_job(job.job_id) or job
            continue
        if "sla_class" in changed:
            _requeue(services, updated)
        return updated
    raise Unavailable(f"job {job.job_id} kept changing while it was being updated; send the update again")


# The job's attributes each field of an update sets.
_SETS: dict[str, tuple[str, ...]] = {
    "deadline_seconds": ("deadline_at", "deadline_seconds"),
    "budget": ("budget_tokens", "budget_cost_micro"),
    "sla_class": ("sla_class",),
    "review": ("review_mode", "review_deadline_seconds"),
    "instructions": ("instructions",),
    "agent": ("agent_max_turns", "agent_max_tool_calls"),
}


def _changes(job: Job, name: str, fields: dict[str, Any]) -> bool:
    if name == "deadline_seconds":
        return True  # "from now": a deadline moves whenever one is given
    return any(attribute in fields and fields[attribute] != getattr(job, attribute) for attribute in _SETS[name])


def _fields(services: Services, job: Job, change: JobUpdate, policy: TenantPolicy) -> dict[str, Any]:
    """The job's attributes the change sets, or `InvalidRequest` naming every field outside the policy."""
    problems: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
    if change.deadline_seconds is not None:
        fields["deadline_at"] = iso(services.now() + timedelta(seconds=change.deadline_seconds))
        fields["deadline_seconds"] = change.deadline_seconds
    if change.budget is not None:
        problems += _budget(job, change.budget, policy, fields)
    if change.sla_class is not None:
        if change.sla_class not in policy.sla_classes:
            problems.append(
                {"loc": ["body", "sla_class"], "msg": f"not an SLA class this tenant may use: {policy.sla_classes}"}
            )
        fields["sla_class"] = change.sla_class
    if change.review is not None:
        if change.review.mode is not None:
            fields["review_mode"] = change.review.mode
        if change.review.deadline_seconds is not None:
            fields["review_deadline_seconds"] = change.review.deadline_seconds
    if change.instructions is not None:
        fields["instructions"] = change.instructions
    if change.agent is not None:
        problems += agent_problems(change.agent, policy)
        if change.agent.max_turns is not None:
            fields["agent_max_turns"] = change.agent.max_turns
        if change.agent.max_tool_calls is not None:
            fields["agent_max_tool_calls"] = change.agent.max_tool_calls
    if problems:
        raise InvalidRequest(
            "the update is not within the tenant's policy or below what the job has spent",
            errors=problems,
            **(
                {"allowed_sla_classes": policy.sla_classes}
                if change.sla_class not in (None, *policy.sla_classes)
                else {}
            ),
        )
    return fields


def _budget(job: Job, budget: JobBudget, policy: TenantPolicy, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The budget's limits (an omitted one keeps the job's), up to the ceilings, not below what is spent and held."""
    _, _, problems = job_limits(budget, policy)
    tokens = budget.max_tokens if budget.max_tokens is not None else job.budget_tokens
    cost = to_micro(budget.max_cost_usd) if budget.max_cost_usd is not None else job.budget_cost_micro
    if tokens is None or cost is None:  # a job admitted before budgets: the ceilings, as its first call would take
        default_tokens, default_cost, _ = job_limits(None, policy)
        tokens, cost = tokens or default_tokens, cost or default_cost
    if budget.max_tokens is not None and tokens < job.spent_tokens:
        problems.append(
            {
                "loc": ["body", "budget", "max_tokens"],
                "msg": f"below the {job.spent_tokens} tokens the job has spent and holds for calls in flight",
            }
        )
    if budget.max_cost_usd is not None and cost < job.spent_cost_micro:
        problems.append(
            {
                "loc": ["body", "budget", "max_cost_usd"],
                "msg": f"below the {job.spent_cost_micro / 1_000_000:.6f} USD the job has spent and holds for calls "
                "in flight",
            }
        )
    fields["budget_tokens"], fields["budget_cost_micro"] = tokens, cost
    raised = tokens > (job.budget_tokens or 0) or cost > (job.budget_cost_micro or 0)
    if job.budget_exhausted == "job" and raised:  # its next calls are judged against the new limits
        fields["budget_exhausted"] = None
    return problems


def agent_problems(
    agent: AgentLimits | None, policy: TenantPolicy, *, loc: tuple[str, ...] = ("body", "agent")
) -> list[dict[str, Any]]:
    """Agent limits above the tenant's ceilings (422, naming the field)."""
    problems: list[dict[str, Any]] = []
    if agent is not None and agent.max_turns is not None and agent.max_turns > policy.agent_max_turns:
        problems.append(
            {
                "loc": [*loc, "max_turns"],
                "msg": f"exceeds the tenant's ceiling of {policy.agent_max_turns} turns per agent step",
            }
        )
    if agent is not None and agent.max_tool_calls is not None and agent.max_tool_calls > policy.agent_max_tool_calls:
        problems.append(
            {
                "loc": [*loc, "max_tool_calls"],
                "msg": f"exceeds the tenant's ceiling of {policy.agent_max_tool_calls} tool calls per agent step",
            }
        )
    return problems


def _requeue(services: Services, job: Job) -> None:
    """A job waiting for a slot is queued again in its new class (its message in the old class's queue no longer
    matches the job and is dropped)."""
    if job.status != JobStatus.QUEUED or not job.waiting or services.intake is None:
        return
    services.intake.send(Waiting(job.job_id, job.tenant_id, job.sla_class, job.created_at))


# ---------------------------------------------------------------------- supersession


def check_supersedes(services: Services, principal: Principal, job_id: str) -> Job:
    """The job a submission names in `supersedes`: the caller's tenant's, else a 422 naming the field."""
    found = services.jobs.get_job(job_id, tenant_id=principal.tenant_id) if JOB_ID.match(job_id) else None
    if found is None:
        raise InvalidRequest(
            "the job to supersede is not one of this tenant's",
            errors=[{"loc": ["body", "supersedes"], "msg": f"no job {job_id!r} of this tenant", "type": "unknown_job"}],
        )
    return found


def supersede(services: Services, job: Job, by: str) -> None:
    """Mark `job` superseded by the job `by` and record `job_superseded` (whatever its status: a finished job keeps
    its result, which then names its successor)."""
    services.jobs.update_job(job.job_id, {"superseded_by": by}, only_if=list(JobStatus))
    services.jobs.append_event(job.job_id, "job_superseded", step=job.current_step, detail={"by": by})
