"""Signals: a step that waits for a JSON body sent to the job through the API. One mechanism with the pause and the
review: the execution waits on a task token (no compute held) and an API call, checked against the job, resumes it.

    <step> (the step runner: `arrive`) → Choice on `$.steps.<step>.next`
      "wait" → <step>: wait for signal (steer lane `.waitForTaskToken`, TimeoutSecondsPath `wait_seconds`)
               ├ resumed (the signal came) ─────────────────────┐
               └ States.Timeout → <step>: signal timed out ─────┴→ <step> again (consumes it, or says none came)
      else   → the next step

A signal is kept in the job's partition once (`JobStore.put_signal`, conditional): a second one answers 409. Sent
before its step waits, it is kept (`early`) and the step consumes it when it arrives, without waiting. Consumed, its
body is stored as an artifact and the step's output keeps only its reference (`StepContext.signal` reads it). The
wait's end is kept the same way (`status: timed_out`): a signal that comes after it is refused, never lost unseen,
and one that came in the last moment wins (the step consumes it).
"""

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from longhaul.core.clock import iso
from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus, SignalAccepted
from longhaul.core.errors import CancelledError, InternalError, SignalTimedOut
from longhaul.core.model import Model
from longhaul.core.observability import logger
from longhaul.core.records import Job
from longhaul.core.step_events import SteerEvent
from longhaul.engine.spec import SignalPolicy, StepKind, WorkflowSpec, registry
from longhaul.services import Services
from longhaul.storage import artifacts as keys

if TYPE_CHECKING:  # the API sends signals without the step machinery (its context imports the model gateway)
    from longhaul.engine.context import StepContext

# A signal's body, as JSON, at most this many bytes (it is kept in the job's partition until its step consumes it).
MAX_SIGNAL_BYTES = 64_000
RECEIVED, CONSUMED, TIMED_OUT = "received", "consumed", "timed_out"


class SignalOutput(Model):
    """A signal step's output (references only): whether the signal came, and where its body is."""

    signal: str
    next: Literal["wait", "done"] = "done"
    received: bool = False
    early: bool = False  # sent before the step waited for it
    timed_out: bool = False  # the wait ended without it
    body_key: str | None = None
    wait_seconds: int | None = None  # "wait": how long (the wait's TimeoutSecondsPath)
    until: str | None = None  # "wait": when the wait ends without the signal


class UnknownSignal(Exception):
    """The job's workflow has no signal step of that name (404)."""


class SignalRefused(Exception):
    """The signal cannot be taken: kept already, its wait ended, or the job finished (409)."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class InvalidSignal(Exception):
    """The body does not match the step's model (422 with `errors`)."""

    def __init__(self, message: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.errors = errors


def wait_name(step: str) -> str:
    return f"signal:{step}"


def policy_of(spec: WorkflowSpec, name: str) -> SignalPolicy:
    found = next((s for s in spec.signal_steps if s.name == name), None)
    if found is None or found.signal is None:
        raise UnknownSignal(f"workflow {spec.name} has no signal {name!r}")
    return found.signal


# ---------------------------------------------------------------------------------------------- the API's side


def send(services: Services, job: Job, name: str, body: Any, *, requested_by: str) -> SignalAccepted:
    """Take a signal for the job: validate it by its step's model, keep it once, and resume its step's wait if the
    step waits for it already."""
    spec = registry()[job.workflow]
    policy = policy_of(spec, name)
    if job.status in TERMINAL_STATUSES or job.status == JobStatus.CANCEL_REQUESTED:
        raise SignalRefused(f"job {job.job_id} is {job.status.value}", job_status=job.status.value)
    try:
        model = policy.body_type.model_validate(body)
    except ValidationError as invalid:
        errors = [
            {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in invalid.errors(include_url=False, include_input=False)
        ]
        raise InvalidSignal(f"the body does not match signal {name!r}", errors) from None
    text = model.model_dump_json()
    if len(text.encode()) > MAX_SIGNAL_BYTES:
        raise InvalidSignal(
            f"signal {name!r} is over {MAX_SIGNAL_BYTES} bytes",
            [{"loc": ["body"], "msg": f"at most {MAX_SIGNAL_BYTES} bytes of JSON", "type": "too_long"}],
        )
    done = services.checkpoints.get_step(job.job_id, name, None)
    if done is not None and done.succeeded:
        raise SignalRefused(f"job {job.job_id} is past its step {name!r}", signal_status="passed")
    token = services.jobs.wait_token(job.job_id, wait_name(name))
    early = token is None
    kept = services.jobs.put_signal(
        job.job_id,
        name,
        {"status": RECEIVED, "body_json": text, "early": early, "by": requested_by, "at": iso(services.now())},
    )
    if not kept:
        found = services.jobs.signal(job.job_id, name) or {}
        status = str(found.get("status", RECEIVED))
        what = "its wait timed out" if status == TIMED_OUT else f"a signal {name!r} was {status} already"
        raise SignalRefused(f"job {job.job_id}: {what}", signal_status=status)
    services.jobs.append_event(job.job_id, "signal_received", step=name, detail={"name": name, "early": early})
    if token is not None and services.tokens is not None:
        services.tokens.succeed(token, {"signal": name})
    return SignalAccepted(job_id=job.job_id, signal=name, early=early, status=job.status)


# ---------------------------------------------------------------------------------------------- the step's side


def arrive(ctx: "StepContext") -> dict[str, Any]:
    """The signal step's work (run by the step runner): consume the signal if it came, say none came if its wait
    ended, else open the wait (or pass, when the job does not want to wait: `SignalPolicy.wanted`)."""
    services, job_id, name = ctx.services, ctx.job_id, ctx.event.step
    spec = registry()[ctx.state.workflow]
    this = spec.step(name)
    assert this.kind == StepKind.SIGNAL and this.signal is not None
    policy = this.signal
    kept = services.jobs.signal(job_id, name)
    if kept is not None and kept.get("status") in (RECEIVED, CONSUMED):
        body = json.loads(str(kept["body_json"]))
        key = services.artifacts.put_json(keys.work_key(job_id, name, "signal.json"), body)
        services.jobs.consume_signal(job_id, name, iso(services.now()))
        services.jobs.clear_waiting(job_id, reason="signal")
        return SignalOutput(signal=name, received=True, early=bool(kept.get("early")), body_key=key).model_dump()
    if kept is not None:  # its wait ended without it
        services.jobs.clear_waiting(job_id, reason="signal")
        return SignalOutput(signal=name, timed_out=True).model_dump()
    seconds = ctx_wait_seconds(ctx, spec, policy)
    if seconds is None:
        return SignalOutput(signal=name).model_dump()
    ends = services.now() + timedelta(seconds=seconds)
    services.jobs.set_waiting(job_id, "signal", detail=f"waiting for signal {name!r}", until=ends, step=name)
    until = iso(ends)
    return SignalOutput(signal=name, next="wait", wait_seconds=seconds, until=until).model_dump()


def ctx_wait_seconds(ctx: "StepContext", spec: WorkflowSpec, policy: SignalPolicy) -> int | None:
    """How long this job waits for the signal: the domain's `wanted` hook says (None: not at all), else the policy."""
    if policy.wanted is None:
        return policy.timeout_seconds
    seconds = spec.hook(policy.wanted)(ctx)
    return None if seconds is None else max(1, int(seconds))


# ---------------------------------------------------------------------------------------------- the steer lane


def wait(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The signal's wait: keep the token; resume at once if the signal came (or the job stopped) meanwhile."""
    event = SteerEvent.model_validate(raw_event)
    if event.token is None:
        raise InternalError("the signal wait passed no task token", step=event.step)
    tokens = services.tokens
    assert tokens is not None
    job = services.jobs.get_job(event.job_id)
    if job is None or job.status in TERMINAL_STATUSES or job.status == JobStatus.CANCEL_REQUESTED:
        status = job.status.value if job else "gone"
        raise CancelledError(f"job {event.job_id} is {status}", step=event.step)
    services.jobs.set_wait_token(event.job_id, wait_name(event.step), event.token)
    if services.jobs.signal(event.job_id, event.step) is not None:  # it came while the token was being kept
        tokens.succeed(event.token, {"signal": event.step})
        return {"waiting": False}
    logger.info("waiting for a signal", extra={"job_id": event.job_id, "step": event.step})
    return {"waiting": True}


def timed_out(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The wait ended without the signal: keep its end (a later signal is refused), `signal_timed_out`, then fail the
    job (`on_timeout="fail"`) or go on. A signal kept in the last moment wins: the step consumes it."""
    event = SteerEvent.model_validate(raw_event)
    job = services.jobs.get_job(event.job_id)
    if job is None or job.status in TERMINAL_STATUSES or job.status == JobStatus.CANCEL_REQUESTED:
        status = job.status.value if job else "gone"
        raise CancelledError(f"job {event.job_id} is {status}", step=event.step)
    policy = policy_of(registry()[job.workflow], event.step)
    ended = services.jobs.put_signal(event.job_id, event.step, {"status": TIMED_OUT, "at": iso(services.now())})
    kept = services.jobs.signal(event.job_id, event.step) or {}
    if not ended and kept.get("status") != TIMED_OUT:
        return {"timed_out": False}  # the signal came after all
    if ended:
        seconds = event.seconds or policy.timeout_seconds
        detail = {"name": event.step, "timeout_seconds": seconds, "on_timeout": policy.on_timeout}
        services.jobs.append_event(event.job_id, "signal_timed_out", step=event.step, detail=detail)
    if policy.on_timeout == "fail":
        raise SignalTimedOut(f"signal {event.step!r} did not come in time", step=event.step)
    return {"timed_out": True}
