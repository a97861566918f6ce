"""Running a tool: the model's proposed call checked against the agent's allowed tools and the tool's input model,
then run; a tool with a side effect runs through the job's outbox (`storage/effects.py`) exactly once.

The operation id derives from (job, step, turn, call). The intent is written before the effect (only while the job
runs), the outcome after; a retried turn finds the record and answers from it instead of acting again:

- `done`: the recorded output, without calling the tool (`replayed`);
- `pending` written by this very attempt (a duplicate delivery running it now): a `TransientError`, so the state
  machine retries the turn after the other delivery has recorded the outcome;
- `pending` written by an earlier attempt, which died between the effect and its outcome: whether the effect
  happened cannot be told. An irreversible effect is never repeated: it becomes `unknown` and the model is told so;
  a reversible one is repeated (reversible tools are idempotent by their operation id);
- `failed`: it did not happen, the call runs again.

A call whose tool and input differ from what the outbox recorded under its id (a replayed turn in which the model
proposed something else) gets an operation id of its own (the id with a hash of the call), as a model charge does.
A tool refuses a call it cannot make as asked by raising `ToolRefused`: the model is told why, nothing happened.

A call runs with its job's own credentials (`services.for_tool`: the tool role assumed with a session policy naming
the job's objects and items and the effects the tool may make), never with the function's: what the outbox records
(intent, outcome, events) is written by the platform, the tool's own reads and writes by the job. A call refused by
those credentials fails with kind `access-denied`; the model is told, the turn goes on.

A call is bounded by its tool's `timeout_seconds`: it runs in a thread of its own and, still running then, is
abandoned and fails with kind `timeout` (a tool with a side effect: its outcome is `unknown`, so it is never repeated
and is compensated if the job fails). Python cannot stop a thread: the abandoned call goes on in the sandbox until it
ends by itself — its AWS calls within the SDK's bounds (`adapters.aws.TOOL_CONFIG`), its credentials within their
15 minutes — or the sandbox is recycled; its late result is dropped.

Every failure the model is told of has a `kind`: `unknown-tool`, `not-allowed` (not this step's, or not on the route
the step's model calls: `allowed_tools`), `invalid-input`, `refused`, `access-denied`, `timeout`, `unknown`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from botocore.exceptions import ClientError
from pydantic import BaseModel, ValidationError

from longhaul.core import faults, genai
from longhaul.core.errors import CancelledError, LonghaulError, PlatformConfigurationError, TransientError
from longhaul.core.observability import logger
from longhaul.core.ports import Mailer, ToolScope
from longhaul.core.records import EffectRecord, Job
from longhaul.engine.spec import Tool, WorkflowSpec
from longhaul.services import Services, for_tool
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.effects import EffectStore

T = TypeVar("T")
#: How AWS refuses a call the caller's policies do not allow (S3 and query APIs; JSON APIs).
ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException"})


class ToolTimedOut(Exception):
    """A call still running at its tool's `timeout_seconds`: abandoned."""


class ToolRefused(Exception):
    """The tool cannot make this call as asked (an unknown vendor, a line that is not a finding): the model is told
    why and may try otherwise; nothing happened."""


def operation_id(job_id: str, step: str, turn: int, call: int) -> str:
    """The stable id of a tool call: the same on every retry of its turn."""
    return "op_" + hashlib.sha256(f"{job_id}/{step}/{turn}/{call}".encode()).hexdigest()[:24]


def call_hash(tool: str, arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([tool, arguments], sort_keys=True, default=str).encode()).hexdigest()[:16]


def owner(job_attempt: int, retry: int) -> str:
    """Who wrote an intent: the job's attempt and the Task's retry count, compared in that order."""
    return f"{job_attempt:04d}.{retry:04d}"


@dataclass
class ToolContext:
    """What a tool gets: the services, its job, where it is called from and its operation id (None for a tool
    without a side effect)."""

    services: Services
    job: Job
    spec: WorkflowSpec
    step: str
    turn: int
    call: int
    operation_id: str | None = None
    # The platform's reader of the stored documents a tenant's facts cite (their provenance, recorded by the platform,
    # never named by the model): a stale fact is re-checked against its source, which may be another job's of the
    # tenant (`engine.memory.reverify`). None: `services.artifacts`.
    sources: ArtifactStore | None = None

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def tenant_id(self) -> str:
        """The tenant of the job: every memory and artifact a tool touches is this tenant's, whatever the model asks."""
        return self.job.tenant_id

    def mailer(self) -> Mailer:
        if self.services.mailer is None:
            raise PlatformConfigurationError(
                "no e-mail sender is configured (LONGHAUL_EMAIL_SENDER; `-c longhaul:email_sender=` at deploy)",
                step=self.step,
            )
        return self.services.mailer


@dataclass(frozen=True)
class ToolResult:
    """What the model is told of one call."""

    tool: str
    call: int
    ok: bool
    output: dict[str, Any] | None = None
    error: str | None = None
    operation_id: str | None = None
    replayed: bool = False  # answered from the outbox: the effect had happened on an earlier attempt
    status: str | None = None  # of a call with a side effect: done, unknown
    kind: str | None = None  # of a failure: unknown-tool, not-allowed, invalid-input, refused, access-denied, timeout…

    def message(self) -> dict[str, Any]:
        found: dict[str, Any] = {"tool": self.tool, "call": self.call, "ok": self.ok}
        for name in ("kind", "output", "error", "operation_id", "status"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        if self.replayed:
            found["replayed"] = True
        return found


@dataclass(frozen=True)
class Acted:
    """A tool's answer when it decided there was nothing to do (e.g. the notice went out on another call): the
    outbox records it as not acted, so no compensation undoes it."""

    output: BaseModel


def run_call(
    ctx: ToolContext, tool: Tool, arguments: dict[str, Any], *, allowed: tuple[str, ...], job_attempt: int, retry: int
) -> ToolResult:
    """Check and run one proposed call; never raises for the model's mistakes (they are its result), only for the
    platform's (typed errors: the turn fails or is retried). The call is an `execute_tool <tool>` span: its id the
    call's stable id, its effect's operation id once the outbox gave one."""
    with genai.tool_call(
        tool.name,
        call_id=operation_id(ctx.job_id, ctx.step, ctx.turn, ctx.call),
        side_effect=tool.side_effect,
        description=tool.description,
        arguments=arguments,
    ) as span:
        result = _run_call(ctx, tool, arguments, allowed=allowed, job_attempt=job_attempt, retry=retry)
        genai.tool_result(
            span,
            ok=result.ok,
            operation_id=result.operation_id,
            status=result.status,
            replayed=result.replayed,
            output=result.output,
        )
    return result


def _run_call(
    ctx: ToolContext, tool: Tool, arguments: dict[str, Any], *, allowed: tuple[str, ...], job_attempt: int, retry: int
) -> ToolResult:
    if tool.name not in allowed:
        return ToolResult(
            tool.name,
            ctx.call,
            ok=False,
            kind="not-allowed",
            error=f"not a tool this step may call; it may call {allowed}",
        )
    try:
        parsed = tool.input_model.model_validate(arguments)
    except ValidationError as invalid:
        errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in invalid.errors()[:10])
        return ToolResult(tool.name, ctx.call, ok=False, kind="invalid-input", error=f"invalid input: {errors}")
    if tool.side_effect == "none":
        try:
            output = _invoke(tool, ctx, parsed)
        except ToolRefused as refused:
            return ToolResult(tool.name, ctx.call, ok=False, kind="refused", error=str(refused))
        except ToolTimedOut as timed_out:
            return ToolResult(tool.name, ctx.call, ok=False, kind="timeout", error=str(timed_out))
        except ClientError as error:
            if not denied(error):
                raise
            return ToolResult(tool.name, ctx.call, ok=False, kind="access-denied", error=_denial(tool, error))
        return ToolResult(tool.name, ctx.call, ok=True, output=output.model_dump(mode="json"))
    return _through_outbox(ctx, tool, parsed, owner(job_attempt, retry))


def denied(error: ClientError) -> bool:
    """Whether AWS refused the call for want of a permission (a JSON protocol's refusal may come as a bare 403)."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    return code in ACCESS_DENIED_CODES or code == "403"


def _denial(tool: Tool, error: ClientError) -> str:
    return (
        f"AWS {error.response.get('Error', {}).get('Code', '')}: {tool.name} may not call {error.operation_name} "
        "there: a tool reaches its own job's objects and items only"
    )


def tool_scope(ctx: ToolContext, tool: Tool) -> ToolScope:
    """What a call of `tool` may reach: its job's and tenant's objects and items, the effects it names (`uses`)."""
    return ToolScope(ctx.job_id, ctx.tenant_id, ctx.step, frozenset(tool.uses))


def as_job(ctx: ToolContext, tool: Tool) -> ToolContext:
    """The context the tool's own code gets: its services signed with the job's credentials (`for_tool`)."""
    try:
        scoped = for_tool(ctx.services, tool_scope(ctx, tool))
    except ClientError as error:  # the deployment's fault (the tool role's trust, the function's grant), not the call's
        if not denied(error):
            raise
        raise PlatformConfigurationError(
            f"AWS {error.response.get('Error', {}).get('Code', '')}: this step's role may not assume the tool role "
            f"({error.operation_name})",
            step=ctx.step,
        ) from error
    if scoped is ctx.services:
        return ctx
    return dataclasses.replace(ctx, services=scoped, sources=ctx.sources or ctx.services.artifacts)


def _invoke(tool: Tool, ctx: ToolContext, parsed: BaseModel) -> BaseModel:
    answer = bounded(tool, ctx, lambda: tool.function()(as_job(ctx, tool), parsed))
    output = answer.output if isinstance(answer, Acted) else answer
    return tool.output_model.model_validate(output.model_dump())


def bounded(tool: Tool, ctx: ToolContext, work: Callable[[], T]) -> T:
    """`work()` in a thread of its own (in a copy of this context: the function's environment, its meter, the span),
    awaited `tool.timeout_seconds` at most; then `ToolTimedOut` and the thread is abandoned (a daemon: it never holds
    the process). The local runtime's `tool-hang` fault hangs the call here."""
    done = threading.Event()
    box: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            faults.active().tool_hang_point(ctx.step, ctx.turn, job_id=ctx.job_id)
            box["answer"] = context.run(work)
        except BaseException as error:  # handed to the caller, whatever it is (a crash fault included)
            box["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name=f"tool-{tool.name}", daemon=True).start()
    if not done.wait(tool.timeout_seconds):
        logger.warning(
            "tool call timed out",
            extra={"tool": tool.name, "job_id": ctx.job_id, "step": ctx.step, "turn": ctx.turn, "call": ctx.call},
        )
        raise ToolTimedOut(f"{tool.name} did not answer within its {tool.timeout_seconds:g} s: the call is abandoned")
    if "error" in box:
        raise box["error"]
    answer: T = box["answer"]
    return answer


def _through_outbox(ctx: ToolContext, tool: Tool, parsed: BaseModel, me: str) -> ToolResult:
    effects: EffectStore = ctx.services.effects
    arguments = parsed.model_dump(mode="json")
    digest = call_hash(tool.name, arguments)
    op = operation_id(ctx.job_id, ctx.step, ctx.turn, ctx.call)
    existing = effects.get(ctx.job_id, op)
    if existing is not None and existing.input_hash != digest:  # another call under this number: its own operation
        op = f"{op}-{digest[:8]}"
        existing = effects.get(ctx.job_id, op)
    ctx.operation_id = op
    if existing is None:
        existing = effects.intend(
            EffectRecord(
                operation_id=op,
                job_id=ctx.job_id,
                tenant_id=ctx.tenant_id,
                step=ctx.step,
                turn=ctx.turn,
                call=ctx.call,
                seq=0,
                tool=tool.name,
                side_effect=tool.side_effect,  # "none" never comes here
                input=arguments,
                input_hash=digest,
                owner=me,
                intended_at=ctx.services.now(),
                compensation=tool.compensation,
            )
        )
        if existing.owner != me:  # another delivery wrote the intent first
            return _recorded(ctx, tool, existing, me)
        return _act(ctx, tool, parsed, existing)
    return _recorded(ctx, tool, existing, me)


def _recorded(ctx: ToolContext, tool: Tool, effect: EffectRecord, me: str) -> ToolResult:
    """Answer from the outbox, or act when the record says the effect did not happen (or may be repeated)."""
    effects = ctx.services.effects
    if effect.status == "done":
        logger.info("tool call answered from the outbox", extra={"operation_id": effect.operation_id})
        return ToolResult(
            tool.name, ctx.call, ok=True, output=effect.output, operation_id=effect.operation_id, replayed=True,
            status="done",
        )  # fmt: skip
    if effect.status == "unknown":
        return _unknown(tool, ctx, effect)
    if effect.status == "pending" and effect.owner >= me:
        raise TransientError(f"{tool.name} {effect.operation_id} is under way in another delivery", step=ctx.step)
    if effect.status == "pending" and tool.side_effect == "irreversible":
        effect = effects.outcome(effect, "unknown", error="the attempt that acted died before recording the outcome")
        ctx.services.jobs.append_event(
            ctx.job_id,
            "effect_unknown",
            step=ctx.step,
            item=ctx.turn,
            detail={"operation_id": effect.operation_id, "tool": tool.name},
        )
        return _unknown(tool, ctx, effect)
    parsed = tool.input_model.model_validate(effect.input)  # failed, or a reversible one left pending: act again
    return _act(ctx, tool, parsed, effect)


def _unknown(tool: Tool, ctx: ToolContext, effect: EffectRecord) -> ToolResult:
    return ToolResult(
        tool.name,
        ctx.call,
        ok=False,
        kind="unknown",
        operation_id=effect.operation_id,
        status="unknown",
        error="an earlier attempt of this call died after acting and before recording the outcome: it may have "
        "happened; it is not repeated",
    )


def _act(ctx: ToolContext, tool: Tool, parsed: BaseModel, effect: EffectRecord) -> ToolResult:
    effects = ctx.services.effects
    try:
        answer = bounded(tool, ctx, lambda: tool.function()(as_job(ctx, tool), parsed))
    except ToolRefused as refused:
        effects.outcome(effect, "failed", acted=False, error=str(refused))
        return ToolResult(
            tool.name, ctx.call, ok=False, kind="refused", error=str(refused), operation_id=effect.operation_id
        )
    except ToolTimedOut as timed_out:  # it may still act: never repeated, compensated if the job fails
        effect = effects.outcome(effect, "unknown", error=str(timed_out))
        ctx.services.jobs.append_event(
            ctx.job_id,
            "effect_unknown",
            step=ctx.step,
            item=ctx.turn,
            detail={"operation_id": effect.operation_id, "tool": tool.name, "reason": "timeout"},
        )
        return ToolResult(
            tool.name, ctx.call, ok=False, kind="timeout", error=str(timed_out), operation_id=effect.operation_id,
            status="unknown",
        )  # fmt: skip
    except ClientError as error:
        if not denied(error):
            raise
        effects.outcome(effect, "failed", acted=False, error=_denial(tool, error))
        return ToolResult(
            tool.name, ctx.call, ok=False, kind="access-denied", error=_denial(tool, error),
            operation_id=effect.operation_id,
        )  # fmt: skip
    except CancelledError:
        raise
    except LonghaulError as error:
        effects.outcome(effect, "failed", acted=False, error=f"{type(error).__name__}: {error.message}")
        raise
    acted = not isinstance(answer, Acted)
    output = tool.output_model.model_validate((answer.output if isinstance(answer, Acted) else answer).model_dump())
    faults.active().crash_before_outcome(ctx.step, ctx.turn, job_id=ctx.job_id)
    recorded = effects.outcome(effect, "done", output=output.model_dump(mode="json"), acted=acted)
    ctx.services.jobs.append_event(
        ctx.job_id,
        "effect_done",
        step=ctx.step,
        item=ctx.turn,
        detail={"operation_id": effect.operation_id, "tool": tool.name, "acted": acted},
    )
    return ToolResult(
        tool.name, ctx.call, ok=True, output=recorded.output, operation_id=effect.operation_id, status="done"
    )
