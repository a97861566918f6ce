"""Fault injection, a test hook of the local runtime (never configured in AWS).

Spec: `<step>[#<item>]=<kind>[x<times>],…` e.g. `draft_answer=transientx2,extract_evidence#3=invalid-input`.
`kind` is a failure class name (`errors.BY_KIND`), or one of the runtime faults: `crash-after-side-effect` (the
step's work runs, then the process dies before its checkpoint), `crash-before-outcome` (at an agent step: a tool's
side effect happens, then the process dies before the outbox records its outcome), `hang` (the invocation outlives
its Task timeout), `duplicate` (the same event is delivered twice), `slow` (the step's work starts
`SLOW_SECONDS` late, within its attempt), `tool-hang` (at an agent step: a tool call never answers; it is abandoned
at its tool's `timeout_seconds`), or, at a step that calls a model, a model-output
fault applied to
each call's answer: `malformed-output` (broken JSON that mechanical repair fixes), `schema-invalid-output` (valid
JSON of the wrong shape), `truncated-output` (cut off at the token limit, as the provider's stop reason says),
`refusal` (the provider refuses, as its guardrail would), `model-unavailable` (the call fails as an outage would:
the retried step calls again). Without `x<times>` a fault fires on every attempt (for
model-output faults: on every call). `#<item>` names a fan-out's item, or an agent step's turn (from 0).

`x<times>` counts per job: each job meets the fault that many times (`draft_answer=transientx2`: every job fails
twice at `draft_answer`, then its third attempt runs), and a replay of the job does not meet it again. A rule naming
an item counts that job's item; a rule without one counts across the job's items. The counts of the most recent
`MAX_COUNTED_JOBS` jobs are kept (a job forgotten meanwhile would meet its faults again).

The step runner fires `slow` and the failure classes before the work and `crash-after-side-effect` after it; the
local Lambda runtime fires `hang` and `duplicate` around the invocation; an agent's tool runner fires
`crash-before-outcome` and `tool-hang`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Set
from dataclasses import dataclass
from typing import Protocol

from longhaul.core.erasure import FAULT_STEPS
from longhaul.core.errors import BY_KIND, LonghaulError
from longhaul.core.llm import ModelResponse

CRASH = "crash-after-side-effect"
CRASH_BEFORE_OUTCOME = "crash-before-outcome"
HANG = "hang"
DUPLICATE = "duplicate"
SLOW = "slow"
TOOL_HANG = "tool-hang"
RUNTIME_KINDS = (CRASH, CRASH_BEFORE_OUTCOME, HANG, DUPLICATE, SLOW, TOOL_HANG)
TOOL_HANG_SECONDS = 300.0  # how long a `tool-hang` holds its call (its thread, abandoned at the tool's timeout)
SLOW_SECONDS = 1.0  # how late a `slow` fault starts the step's work (real seconds: it is the work that is slow)
MALFORMED, SCHEMA_INVALID, TRUNCATED, REFUSAL, UNAVAILABLE = (
    "malformed-output",
    "schema-invalid-output",
    "truncated-output",
    "refusal",
    "model-unavailable",
)
OUTPUT_KINDS = (MALFORMED, SCHEMA_INVALID, TRUNCATED)
MODEL_KINDS = (*OUTPUT_KINDS, REFUSAL, UNAVAILABLE)
KINDS = tuple(sorted(BY_KIND)) + RUNTIME_KINDS + MODEL_KINDS
MAX_COUNTED_JOBS = 4096  # the jobs whose counts are kept, most recently faulted first
# What each runtime and model fault does (a failure class does what its error class's docstring says).
MEANINGS: dict[str, str] = {
    CRASH: "The step's work runs, then the process dies before its checkpoint: the retry must not redo the work.",
    CRASH_BEFORE_OUTCOME: "At an agent step: a tool's side effect happens, then the process dies before the outbox "
    "records its outcome.",
    HANG: "The invocation outlives its Task timeout.",
    DUPLICATE: "The same event is delivered twice.",
    TOOL_HANG: "At an agent step: a tool call hangs (it never answers); the call is abandoned at its tool's "
    "`timeout_seconds` and fails with kind `timeout`, and the turn goes on.",
    SLOW: f"The step's work starts {SLOW_SECONDS:g} s late, within its attempt (its span and the job's executing "
    "time show it).",
    MALFORMED: "The model's answer is broken JSON (prose, a fence, a trailing comma) that mechanical repair fixes.",
    SCHEMA_INVALID: "The model's answer is valid JSON of the wrong shape.",
    TRUNCATED: "The model's answer is cut off at the token limit, as the provider's stop reason says.",
    REFUSAL: "The provider refuses, as its guardrail would.",
    UNAVAILABLE: "The model call fails as an outage would (`UpstreamUnavailableError`, after the call started): the "
    "route's fallback answers, else the state machine retries the step and the call is made again.",
}


def meaning(kind: str) -> str:
    """What injecting `kind` does: a runtime or model fault's description, or a failure class's."""
    if kind in BY_KIND:
        doc = " ".join((BY_KIND[kind].__doc__ or "").split())
        return f"The step raises `{BY_KIND[kind].__name__}`" + (f": {doc}" if doc else ".")
    return MEANINGS[kind]


_RULE = re.compile(r"^(?P<step>[a-z_]+)(?:#(?P<item>\d+))?=(?P<kind>[a-z\-]+?)(?:x(?P<times>\d+))?$")


class StepCatalog(Protocol):
    """The steps a fault may name (`longhaul.engine.spec.Registry` is one)."""

    @property
    def all_steps(self) -> Set[str]: ...

    @property
    def all_fan_out_steps(self) -> Set[str]: ...

    @property
    def all_model_steps(self) -> Set[str]: ...

    @property
    def all_agent_steps(self) -> Set[str]: ...


class CrashFault(BaseException):
    """The process dies (like `Runtime.ExitError`): nothing after it runs, nothing is recorded."""

    error_type = "Runtime.ExitError"


@dataclass(frozen=True)
class Fault:
    step: str
    item: int | None
    kind: str
    times: int | None  # per job; None: always


class FaultInjector:
    def __init__(self, spec: str = "", catalog: StepCatalog | None = None) -> None:
        """`catalog`: the deployed steps, against which each rule's step is checked (a rule naming no step of it, an
        item of a step without items, or a model fault at a step without a model is refused). Without it only the
        syntax and the kinds are checked."""
        self._lock = threading.Lock()
        self.spec = spec
        self.faults = self.parse(spec, catalog)
        # per job: how many times each counted rule (by its position in `faults`) has fired
        self._fired: OrderedDict[str, list[int]] = OrderedDict()

    @staticmethod
    def parse(spec: str, catalog: StepCatalog | None = None) -> list[Fault]:
        faults = []
        for rule in filter(None, (part.strip() for part in spec.split(","))):
            match = _RULE.match(rule)
            if not match or match["kind"] not in KINDS:
                raise ValueError(f"bad fault {rule!r}: expected <step>[#<item>]=<kind>[x<times>], kinds: {list(KINDS)}")
            item = int(match["item"]) if match["item"] else None
            if catalog is not None:
                _check_against(rule, match["step"], match["kind"], item, catalog)
            times = int(match["times"]) if match["times"] else None
            faults.append(Fault(match["step"], item, match["kind"], times))
        return faults

    def take(self, step: str, item: int | None, kinds: tuple[str, ...], *, job_id: str) -> str | None:
        """Consume one of this job's occurrences of a fault of one of `kinds` for this step (and item); its kind,
        or None."""
        with self._lock:
            for index, fault in enumerate(self.faults):
                if fault.kind not in kinds or fault.step != step or (fault.item is not None and fault.item != item):
                    continue
                if fault.times is not None:
                    fired = self._fired_of(job_id)
                    if fired[index] >= fault.times:
                        continue
                    fired[index] += 1
                return fault.kind
        return None

    def _fired_of(self, job_id: str) -> list[int]:
        """The job's counts (the lock held): created on its first fault, the least recently faulted job's
        forgotten beyond `MAX_COUNTED_JOBS`."""
        fired = self._fired.get(job_id)
        if fired is None:
            fired = self._fired[job_id] = [0] * len(self.faults)
            while len(self._fired) > MAX_COUNTED_JOBS:
                self._fired.popitem(last=False)
        else:
            self._fired.move_to_end(job_id)
        return fired

    def check(self, step: str, item: int | None, *, job_id: str) -> None:
        """Raise the configured failure class for this step (and item), if one remains for the job."""
        kind = self.take(step, item, tuple(BY_KIND), job_id=job_id)
        if kind is not None:
            error: type[LonghaulError] = BY_KIND[kind]
            raise error(f"injected {kind} fault", step=step, item=item)

    def slow_point(self, step: str, item: int | None, *, job_id: str) -> None:
        """Before the step's work, within its attempt: a `slow` fault delays it by `SLOW_SECONDS`."""
        if self.take(step, item, (SLOW,), job_id=job_id):
            time.sleep(SLOW_SECONDS)

    def crash_point(self, step: str, item: int | None, *, job_id: str) -> None:
        """After the step's side effects, before its checkpoint."""
        if self.take(step, item, (CRASH,), job_id=job_id):
            raise CrashFault(f"injected crash of {step} after its side effects")

    def tool_hang_point(self, step: str, turn: int | None, *, job_id: str) -> None:
        """Where a tool call starts, in its own thread: a `tool-hang` fault holds it `TOOL_HANG_SECONDS`."""
        if self.take(step, turn, (TOOL_HANG,), job_id=job_id):
            threading.Event().wait(TOOL_HANG_SECONDS)

    def crash_before_outcome(self, step: str, turn: int | None, *, job_id: str) -> None:
        """After a tool's side effect, before the outbox records its outcome."""
        if self.take(step, turn, (CRASH_BEFORE_OUTCOME,), job_id=job_id):
            raise CrashFault(f"injected crash of {step} after a tool's side effect, before its outcome was recorded")


def _check_against(rule: str, step: str, kind: str, item: int | None, catalog: StepCatalog) -> None:
    if step in FAULT_STEPS:  # an erasure's store boundary (`longhaul.core.erasure`): it can only crash there
        if kind != CRASH or item is not None:
            raise ValueError(f"bad fault {rule!r}: an erasure's store boundary takes {CRASH} only, without an item")
        return
    known = sorted(catalog.all_steps)
    if step not in known:
        raise ValueError(f"bad fault {rule!r}: unknown step {step!r}; steps: {known}")
    model_steps = sorted(catalog.all_model_steps)
    if kind in MODEL_KINDS and step not in model_steps:
        raise ValueError(f"bad fault {rule!r}: model-output faults apply to model steps: {model_steps}")
    agents = sorted(catalog.all_agent_steps)
    if kind in (CRASH_BEFORE_OUTCOME, TOOL_HANG) and step not in agents:
        raise ValueError(f"bad fault {rule!r}: {kind} applies to agent steps: {agents}")
    if item is not None and step not in catalog.all_fan_out_steps and step not in agents:
        raise ValueError(f"bad fault {rule!r}: only fan-out steps have items (and agent steps turns)")


def corrupt(response: ModelResponse, kind: str, max_tokens: int) -> ModelResponse:
    """A model's answer as a model-output fault spoils it."""
    text = response.text
    if kind == MALFORMED:  # prose around it, a fence, a trailing comma, the closing brace missing: repairable
        body = text.rstrip()
        body = body[:-1].rstrip() + "," if body.endswith("}") else body
        return response.model_copy(update={"text": f"Here is the JSON you asked for:\n```json\n{body}\n```"})
    if kind == SCHEMA_INVALID:  # valid JSON, but no object of any step's schema
        return response.model_copy(update={"text": json.dumps([{"unexpected": "shape", "items": 3}])})
    if kind == TRUNCATED:  # what a provider returns at its token limit
        usage = response.usage.model_copy(update={"output_tokens": max_tokens})
        return response.model_copy(
            update={"text": text[: max(1, len(text) // 2)], "stop_reason": "max_tokens", "usage": usage}
        )
    raise ValueError(f"not a model-output fault: {kind}")


_active = FaultInjector()


def install(injector: FaultInjector) -> None:
    global _active
    _active = injector


def active() -> FaultInjector:
    return _active
