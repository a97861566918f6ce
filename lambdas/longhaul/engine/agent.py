"""One turn of an agent step: the platform's body of every `agent(...)` step (`AGENT_WORK`).

The state machine runs the step as a loop the console shows turn by turn (`state_machines/agent_loop.py`): a Task
whose event names the turn as its item, then a Choice that takes another turn while the last one says `turn`. A turn:

1. reads the conversation as the previous turn checkpointed it (`work/<job>/<step>/session-<n>.json`; the first
   turn starts from the workflow's brief): the session memory of the agent, its scratchpad (`notes`) included;
2. checks the limits: turns and tool calls (the step's, tightened by the job's within its tenant's ceilings), the
   job's deadline (time for another turn) and budget (a refused reservation): reaching one raises
   `AgentLimitError` naming it, or, when the step hands over to review, ends the step with the limit recorded;
3. asks the model through the gateway (routes, breakers, budget, the validation ladder) for an `AgentDecision`:
   tool calls, or the final output; the offline model plays the workflow's scripted policy;
4. validates each proposed call against the tools offered (the step's, less those its route does not allow:
   `allowed_tools`) and the tool's input model and runs it with the job's own credentials, within the tool's
   `timeout_seconds` (a side effect through the outbox, once: `engine.tools`), or validates the final output (its
   model, the workflow's check); what was wrong (a failure's `kind`) is told to the model in the next turn;
5. checkpoints the conversation (the runner commits the turn as item `n` of the step) and records an `agent_turn`
   event (turn, tools called, tokens).

A crash mid-turn reruns the turn from the last checkpoint: its model call is answered from the budget ledger (same
charge, same prompt) and its tool calls from the outbox, so nothing is paid or done twice. Only references travel
between states: the session and the output are artifacts.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Self

from pydantic import BaseModel, Field, ValidationError, model_validator

from longhaul.core import genai, redaction
from longhaul.core.errors import AgentLimitError, BudgetExceededError, InternalError
from longhaul.core.llm import ModelRequest
from longhaul.core.model import Model
from longhaul.core.records import Job
from longhaul.engine.context import StepContext
from longhaul.engine.spec import AgentPolicy, StepSpec, Tool, WorkflowSpec, registry
from longhaul.engine.tools import ToolContext, ToolResult, run_call
from longhaul.services import Services
from longhaul.storage import artifacts as keys

MAX_ANSWER_TOKENS = 4096
TURN_RESERVE_SECONDS = 60  # a turn needs at least this long before the job's deadline (else `deadline`)
LIMITS = ("max_turns", "max_tool_calls", "deadline", "budget")


class ToolCallRequest(Model):
    tool: str = Field(min_length=1, max_length=64)
    input: dict[str, Any] = Field(default_factory=dict)


class AgentDecision(Model):
    """What the model answers each turn: tool calls to make, or its final output (never both)."""

    thought: str = Field(default="", max_length=4000, description="Why, in a sentence or two.")
    tool_calls: list[ToolCallRequest] = Field(default_factory=list, max_length=500)
    final: dict[str, Any] | None = Field(default=None, description="The step's output, when it is done.")
    notes: dict[str, Any] | None = Field(default=None, description="Replaces the scratchpad kept between turns.")

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if self.final is not None and self.tool_calls:
            raise ValueError("give either tool calls or a final answer, not both")
        if self.final is None and not self.tool_calls:
            raise ValueError("call at least one tool, or give the final answer")
        return self


class AgentBrief(Model):
    """What an agent starts from: its task in words and the (small) context it works on."""

    task: str
    context: dict[str, Any] = Field(default_factory=dict)


class Message(Model):
    role: Literal["assistant", "tool", "platform"]
    turn: int
    content: dict[str, Any]


class Session(Model):
    """The conversation after `turns` turns: the agent's session memory, checkpointed every turn."""

    step: str
    turns: int = 0
    tool_calls: int = 0
    brief: AgentBrief
    messages: list[Message] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Limits:
    max_turns: int
    max_tool_calls: int


def session_key(job_id: str, step: str, turns: int) -> str:
    return keys.work_key(job_id, step, f"session-{turns:03d}.json")


def output_key(job_id: str, step: str) -> str:
    return keys.work_key(job_id, step, "output.json")


def limits_of(step: StepSpec, job: Job, ceilings: Callable[[], Limits]) -> Limits:
    """The tighter of the step's limits and the job's. A job's limits are pinned at submission (from its tenant's
    ceilings then) and change only by an update of the job, so a tenant raising its ceilings while the job runs, or
    before a replay resumes it, does not move them; only a job admitted before limits were pinned reads the
    tenant's ceilings (`ceilings`, called only then)."""
    policy = step.agent
    assert policy is not None
    turns, calls = job.agent_max_turns, job.agent_max_tool_calls
    if turns is None or calls is None:
        tenant = ceilings()
        turns, calls = turns or tenant.max_turns, calls or tenant.max_tool_calls
    return Limits(max_turns=min(policy.max_turns, turns), max_tool_calls=min(policy.max_tool_calls, calls))


def tenant_ceilings(services: Services, tenant_id: str) -> Limits:
    tenant = services.budgets.policy(tenant_id)
    return Limits(tenant.agent_max_turns, tenant.agent_max_tool_calls)


def turn(ctx: StepContext) -> dict[str, Any]:
    """One turn (the event's item is its number, from 0); the turn's output: references and counts only. The turn
    is an `invoke_agent <step>` span (its model call and tool calls nested in it)."""
    step, number = ctx.event.step, ctx.event.item
    with (
        genai.agent_turn(step, turn=number or 0, conversation=f"{ctx.job_id}/{step}") as span,
        redaction.bound(ctx.model().policy().redact),  # the turn's tool spans and log lines (the tenant's policy)
    ):
        output = _turn(ctx)
        genai.set_attributes(
            span,
            {
                genai.AGENT_NEXT: output.get("next"),
                genai.AGENT_TOOL_CALLS: output.get("tool_calls"),
                genai.AGENT_LIMIT: output.get("limit"),
            },
        )
    return output


def _turn(ctx: StepContext) -> dict[str, Any]:
    spec = registry()[ctx.state.workflow]
    step = spec.step(ctx.event.step)
    policy = step.agent
    number = ctx.event.item
    if policy is None or number is None:
        raise InternalError(f"{ctx.event.step} is not an agent step's turn", step=ctx.event.step)
    services, job = ctx.services, ctx.job or services_job(ctx)
    store = services.artifacts
    session = (
        Session(step=step.name, brief=AgentBrief.model_validate(spec.hook(policy.brief)(ctx).model_dump()))
        if number == 0
        else Session.model_validate(store.get_json(session_key(job.job_id, step.name, number)))
    )
    limits = limits_of(step, job, lambda: tenant_ceilings(services, job.tenant_id))
    reached = _limit_reached(ctx, step, job, session, limits)
    if reached is not None:
        return _ended_at_limit(ctx, policy, session, reached)
    route, tools = offered_tools(spec, step, services, job)
    request = agent_request(spec, step, policy, tools, session, limits)
    try:
        decision, _ = ctx.model().ask(request, AgentDecision)
    except BudgetExceededError as refused:
        return _ended_at_limit(ctx, policy, session, AgentLimitError.reached("budget", refused.message, step=step.name))
    session.messages.append(Message(role="assistant", turn=number, content=decision.model_dump(exclude_none=True)))
    if decision.notes is not None:
        session.notes = decision.notes
    results: list[ToolResult] = []
    finished: BaseModel | None = None
    if decision.final is not None:
        finished = _final(ctx, spec, policy, decision.final, session, number)
    else:
        if session.tool_calls + len(decision.tool_calls) > limits.max_tool_calls:
            error = AgentLimitError.reached(
                "max_tool_calls",
                f"{session.tool_calls} tool calls made, {len(decision.tool_calls)} more proposed, the limit is "
                f"{limits.max_tool_calls}",
                step=step.name,
                item=number,
            )
            return _ended_at_limit(ctx, policy, session, error)
        by_name = {t.name: t for t in spec.tool_registry.values()}
        offered = tuple(t.name for t in tools)
        for index, call in enumerate(decision.tool_calls):
            tool = by_name.get(call.tool)
            if tool is None:
                result = ToolResult(
                    call.tool, index, ok=False, kind="unknown-tool", error=f"no tool {call.tool!r}; tools: {offered}"
                )
            elif tool.name in policy.tools and tool.name not in offered:  # the step's, not on its model's route
                result = ToolResult(
                    call.tool, index, ok=False, kind="not-allowed",
                    error=f"{call.tool!r} is not allowed on route {route!r}; it allows {offered}",
                )  # fmt: skip
            else:
                tool_ctx = ToolContext(services, job, spec, step.name, number, index)
                result = run_call(
                    tool_ctx,
                    tool,
                    call.input,
                    allowed=offered,
                    job_attempt=ctx.job_attempt,
                    retry=ctx.event.attempt,
                )
            results.append(result)
            session.messages.append(Message(role="tool", turn=number, content=result.message()))
        session.tool_calls += len(decision.tool_calls)
    session.turns = number + 1
    _record_turn(ctx, session, results, finished is not None)
    if finished is not None:
        key = store.put_json(output_key(job.job_id, step.name), finished)
        store.put_json(session_key(job.job_id, step.name, session.turns), session)
        return {"next": "done", "turn": session.turns, "output_key": key, "tool_calls": session.tool_calls}
    key = store.put_json(session_key(job.job_id, step.name, session.turns), session)
    return {"next": "turn", "turn": session.turns, "session_key": key, "tool_calls": session.tool_calls}


def offered_tools(spec: WorkflowSpec, step: StepSpec, services: Services, job: Job) -> tuple[str, tuple[Tool, ...]]:
    """The route the step's model calls in this job, and the tools offered to the model: the step's, less those the
    route does not allow (`allowed_tools`; None: all)."""
    route = services.routing.route_for(step.name, job.route, job.sla_class)
    configured = services.routing.routes.get(route)
    allowed = configured.allowed_tools if configured is not None else None
    tools = spec.tools_of(step.name)
    return route, tools if allowed is None else tuple(t for t in tools if t.name in allowed)


def services_job(ctx: StepContext) -> Job:
    job = ctx.services.jobs.get_job(ctx.job_id)
    if job is None:
        raise InternalError(f"job {ctx.job_id} does not exist", step=ctx.event.step)
    return job


def _limit_reached(
    ctx: StepContext, step: StepSpec, job: Job, session: Session, limits: Limits
) -> AgentLimitError | None:
    number = session.turns
    if number >= limits.max_turns:
        return AgentLimitError.reached(
            "max_turns", f"{number} turns taken without finishing, the limit is {limits.max_turns}", step=step.name
        )
    if job.deadline_at is not None:
        reserve = timedelta(seconds=min(step.timeout_seconds or TURN_RESERVE_SECONDS, TURN_RESERVE_SECONDS))
        left = job.deadline_at - ctx.services.now()
        if left < reserve:
            return AgentLimitError.reached(
                "deadline",
                f"{max(0, int(left.total_seconds()))} s left before the job's deadline, a turn needs "
                f"{int(reserve.total_seconds())} s",
                step=step.name,
            )
    return None


def _ended_at_limit(ctx: StepContext, policy: AgentPolicy, session: Session, error: AgentLimitError) -> dict[str, Any]:
    """A limit ends the step: it fails `agent-limit`, or hands over to the workflow's review with the limit named."""
    ctx.services.jobs.append_event(
        ctx.job_id,
        "agent_limit_reached",
        step=ctx.event.step,
        item=ctx.event.item,
        detail={
            "limit": error.limit,
            "message": error.message,
            "turns": session.turns,
            "tool_calls": session.tool_calls,
        },
    )
    if policy.on_limit == "fail":
        error.item = None  # the step fails as a whole (its turn is not an item of a fan-out)
        raise error
    return {"next": "done", "turn": session.turns, "limit": error.limit, "message": error.message,
            "tool_calls": session.tool_calls}  # fmt: skip


def _final(
    ctx: StepContext, spec: WorkflowSpec, policy: AgentPolicy, final: dict[str, Any], session: Session, number: int
) -> BaseModel | None:
    """The validated final output, or None with what was wrong told to the model (the loop goes on)."""
    try:
        output = policy.output_type.model_validate(final)
    except ValidationError as invalid:
        problems = [f"{'.'.join(map(str, e['loc'])) or 'output'}: {e['msg']}" for e in invalid.errors()[:10]]
        session.messages.append(Message(role="platform", turn=number, content={"final_refused": problems}))
        return None
    if policy.check is not None:
        problems = [str(p) for p in spec.hook(policy.check)(ctx, output)]
        if problems:
            session.messages.append(Message(role="platform", turn=number, content={"final_refused": problems[:20]}))
            return None
    return output


def _record_turn(ctx: StepContext, session: Session, results: list[ToolResult], finished: bool) -> None:
    calls = ctx.model_calls
    ctx.services.jobs.append_event(
        ctx.job_id,
        "agent_turn",
        step=ctx.event.step,
        item=ctx.event.item,
        detail={
            "turn": session.turns,
            "tools": [r.tool for r in results],
            "tool_calls": len(results),
            "refused": sum(1 for r in results if not r.ok),
            "failures": {
                k: sum(1 for r in results if r.kind == k) for k in sorted({r.kind for r in results if r.kind})
            },
            "total_tool_calls": session.tool_calls,
            "tokens": {
                "input": sum(int(c.get("input_tokens", 0)) for c in calls),
                "output": sum(int(c.get("output_tokens", 0)) for c in calls),
            },
            "finished": finished,
        },
    )


SYSTEM = """You are an agent working one step of a durable workflow, one turn at a time. Each turn, answer with one
JSON object: {"thought": "<short>", "tool_calls": [{"tool": "<name>", "input": {...}}]} to call tools (their results
come back next turn), or {"thought": "<short>", "final": {...}} when the step is done. "notes" (an object) replaces
your scratchpad, which is shown to you every turn. Call only the tools listed, with inputs matching their schemas.
Tools with side effects act once per call: do not repeat a call that succeeded."""


def agent_request(
    spec: WorkflowSpec, step: StepSpec, policy: AgentPolicy, tools: tuple[Tool, ...], session: Session, limits: Limits
) -> ModelRequest:
    """The turn's request: the protocol, the tools and output schema, the brief and the conversation so far. The
    offline model reads `context` (the scripted policy); a provider reads the prompt."""
    described = [
        {
            "name": t.name,
            "description": t.description,
            "side_effect": t.side_effect,
            "input_schema": t.input_model.model_json_schema(),
        }
        for t in tools
    ]
    system = "\n\n".join(
        [
            SYSTEM,
            "Tools:\n" + _json(described),
            "The final answer's schema:\n" + _json(policy.output_type.model_json_schema()),
            f"Limits: {limits.max_turns} turns, {limits.max_tool_calls} tool calls.",
        ]
    )
    transcript = "\n".join(f"[{m.role} turn {m.turn}] {_json(m.content)}" for m in session.messages)
    # The protocol, tools, schemas and limits (system), the task and its context are every turn's: the stable prefix
    # a provider caches; the scratchpad and the conversation change each turn and come after it.
    brief = "\n\n".join([f"Task: {session.brief.task}", "Context:\n" + _json(session.brief.context)])
    prompt = "\n\n".join(
        [
            brief,
            "Scratchpad:\n" + _json(session.notes),
            f"Turn {session.turns + 1}. Conversation so far:\n{transcript or '(none)'}",
        ]
    )
    return ModelRequest(
        task=f"agent:{spec.name}:{step.name}",
        prompt_version=policy.prompt_version,
        system=system,
        prompt=prompt,
        context={
            "step": step.name,
            "turn": session.turns,
            "brief": session.brief.model_dump(),
            "messages": [m.model_dump() for m in session.messages],
            "notes": session.notes,
            "tools": [t.name for t in tools],
        },
        max_tokens=MAX_ANSWER_TOKENS,
        response_schema=AgentDecision.model_json_schema(),
        offline=policy.offline,
        stable_prompt_chars=len(brief) + 2,
    )


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
