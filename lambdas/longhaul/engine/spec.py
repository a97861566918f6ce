"""What a workflow is: one `WorkflowSpec` — name, input model, ordered steps, result model, domain module, the
typed tools its agent steps may call — and the registry of the installed workflows.

Everything that used to be repeated per workflow derives from the spec: the step list the runner uses (taken from
the event's own workflow), its fan-out steps, which steps call a model (their grants), the request union of the API,
the handler dispatch per (workflow, step), the state machine's chain (`state_machines.builder` walks the steps),
DLQs and dashboard rows.

Light on purpose: the API imports every spec (for the request union), so a spec names by path what only its steps
use — its domain module, its tools, its result and its agents' output models — and the step handler imports them only
when one of its steps runs.

The registry is discovered, not listed: every package under `longhaul.workflows` with a `spec` module defining
`SPEC` is a workflow (`registry()`), so adding a workflow adds one folder. The engine finds the workflows by that
convention at run time; it never imports a workflow's code by name.
"""

import importlib
import importlib.util
import pkgutil
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel

from longhaul.core import limits
from longhaul.core.model import Model

if TYPE_CHECKING:
    from longhaul.documents.intake import Intake, PreparedInput
    from longhaul.engine.context import StepContext

StepWork = Callable[["StepContext"], dict[str, Any]]
Prepare = Callable[["Intake", Any], "PreparedInput"]
# A model given as itself, or by where it is (`"module:Name"`), imported on first use: a spec's models that only its
# steps use (its result, its agents' outputs) need not be imported by the API, which imports every spec.
ModelRef = type[BaseModel] | str


def imported(path: str) -> Any:
    """What `"module:name"` names, its module imported now (a step's function, a tool, a model, a registry)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def model_of(reference: ModelRef, what: str) -> type[BaseModel]:
    """The model `reference` names (see `ModelRef`); `what` names it in the error when it is not a model."""
    found = imported(reference) if isinstance(reference, str) else reference
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise TypeError(f"{what}: {reference!r} is not a pydantic model")
    return found


class StepKind(StrEnum):
    STEP = "step"  # one Lambda invocation over the whole state
    FAN_OUT = "fan-out"  # a Map: one invocation per item of an earlier step's output list
    REVIEW = "review"  # a person decides on the draft; the execution waits on a task token (no compute held)
    # A Map of container tasks (ECS Fargate) resumed by task token: one task per item of an earlier step's output
    # list, for heavy work that does not belong in a Lambda (OCR). An empty list skips the step.
    CONTAINER = "container"
    # A resumable agent loop: one Lambda invocation per turn (a Task, then a Choice whether to take another), each
    # turn asking the model, running the tools it proposes and checkpointing the conversation (see `engine.agent`).
    AGENT = "agent"
    # Waits (a task token, no compute held) for a signal sent to the job through the API, whose JSON body the step's
    # model validates; the step's output is a reference to that body (see `engine.signals`).
    SIGNAL = "signal"
    # Starts another workflow's job for the same tenant (through the admission path) and waits for it on a task token
    # (no compute held); the child's end resumes it (see `longhaul.api.children`).
    CHILD = "child"


ITEM_KINDS = frozenset({StepKind.FAN_OUT, StepKind.CONTAINER})


ReviewMode = Literal["always", "never", "auto"]
SideEffect = Literal["none", "reversible", "irreversible"]
OnLimit = Literal["fail", "review"]
# The platform's body of every agent step (one turn of the loop), named by path like the review's.
AGENT_WORK = "longhaul.engine.agent:turn"
# Capabilities a tool may use; the stack grants each only to the functions whose tools use it.
EMAIL = "email"
# Deleting a tenant's memory items (the only item deletes a step or a lane makes; granted on the memory partitions).
FORGET = "forget"
CAPABILITIES = frozenset({EMAIL, FORGET})
# An agent step's Lambda timeout when its spec names none (the house policy's, `state_machines/policy.py`).
DEFAULT_AGENT_TIMEOUT_SECONDS = 60
FinalAction = Literal["expire", "approve"]
# The platform's body of every review step (decides whether a review is needed, opens it); see `longhaul.review`.
REVIEW_WORK = "longhaul.review.lane:open_review"
# The saga's lane (`longhaul.engine.saga`): its name in events, dead letters and its queue.
COMPENSATION_STEP = "compensation"


OnSignalTimeout = Literal["proceed", "fail"]
OnSegmentTimeout = Literal["fail", "review"]
# The platform's body of every signal step (consume a signal that came, or open the wait); see `engine.signals`.
SIGNAL_WORK = "longhaul.engine.signals:arrive"
# The platform's bodies of a child step: its wait (start the child, keep the token) and the step (the child's outcome).
CHILD_WAIT = "longhaul.api.children:open_wait"
CHILD_WORK = "longhaul.api.children:finish"
# A child's wait ends at the latest after the longest deadline a job may have, and a little more (its sweep ends it).
CHILD_WAIT_SECONDS = limits.MAX_DEADLINE_SECONDS + 3600

Comparison = Literal["eq", "ne", "gt", "ge", "lt", "le", "is_true", "is_false", "present"]
COMPARISONS: tuple[str, ...] = ("eq", "ne", "gt", "ge", "lt", "le", "is_true", "is_false", "present")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Predicate(NamedTuple):
    """A step's `when=`: a small declarative test of earlier steps' outputs, which the builder turns into a Choice
    state (`state_machines.builder`) and the runner can evaluate alike (`holds`). A leaf compares the value at
    `path` (`<step>.<field>[.<field>…]`, read at `$.steps.<path>`) with `value`; `all`/`any`/`not` combine leaves.
    A value that is missing makes a leaf false (never an error). Serialisable (`as_json`), so a spec's branches can
    be shown and compared. (A NamedTuple, as the API's import makes few dataclasses.)"""

    op: Literal["leaf", "all", "any", "not"]
    path: str | None = None
    test: str | None = None
    value: bool | int | float | str | None = None
    operands: tuple["Predicate", ...] = ()

    def __and__(self, other: "Predicate") -> "Predicate":
        return Predicate("all", operands=(self, other))

    def __or__(self, other: "Predicate") -> "Predicate":
        return Predicate("any", operands=(self, other))

    def __invert__(self) -> "Predicate":
        return Predicate("not", operands=(self,))

    @property
    def steps(self) -> frozenset[str]:
        """The steps whose outputs it reads."""
        if self.op == "leaf":
            assert self.path is not None
            return frozenset({self.path.split(".", 1)[0]})
        return frozenset(s for o in self.operands for s in o.steps)

    def as_json(self) -> dict[str, Any]:
        if self.op == "leaf":
            found: dict[str, Any] = {"path": self.path, "test": self.test}
            return found if self.test in ("is_true", "is_false", "present") else {**found, "value": self.value}
        return {self.op: [o.as_json() for o in self.operands]}

    def holds(self, steps: Mapping[str, Any]) -> bool:
        """Whether it holds over the state's step outputs (`$.steps`), as the Choice state decides."""
        if self.op == "all":
            return all(o.holds(steps) for o in self.operands)
        if self.op == "any":
            return any(o.holds(steps) for o in self.operands)
        if self.op == "not":
            return not self.operands[0].holds(steps)
        assert self.path is not None
        found: Any = steps
        for part in self.path.split("."):
            if not isinstance(found, Mapping) or part not in found:
                return False
            found = found[part]
        return _compare(self.test or "", found, self.value)


def _compare(test: str, found: Any, value: Any) -> bool:
    number = isinstance(found, int | float) and not isinstance(found, bool)
    if test == "present":
        return True
    if test in ("is_true", "is_false"):
        return isinstance(found, bool) and found is (test == "is_true")
    if test in ("eq", "ne"):
        same = type(found) is type(value) or (number and isinstance(value, int | float))
        return (same and found == value) is (test == "eq") if same else test == "ne"
    if not number:
        return False
    compared: bool = {"gt": found > value, "ge": found >= value, "lt": found < value, "le": found <= value}[test]
    return compared


class OutputRef(NamedTuple):
    """Where a predicate reads: an earlier step's output (`output("check")`), a field in it (`.path("a.b")`)."""

    step: str
    fields: tuple[str, ...] = ()

    def path(self, dotted: str) -> "OutputRef":
        parts = tuple(dotted.split("."))
        if not all(_FIELD.match(p) for p in parts):
            raise ValueError(f"output({self.step!r}).path({dotted!r}): fields are names separated by dots")
        return OutputRef(self.step, self.fields + parts)

    def _leaf(self, test: str, value: bool | int | float | str | None = None) -> Predicate:
        if not self.fields:
            raise ValueError(f"output({self.step!r}): name the field a predicate reads (`.path(...)`)")
        return Predicate("leaf", path=".".join((self.step, *self.fields)), test=test, value=value)

    def eq(self, value: bool | int | float | str) -> Predicate:
        return self._leaf("eq", value)

    def ne(self, value: bool | int | float | str) -> Predicate:
        return self._leaf("ne", value)

    def gt(self, value: int | float) -> Predicate:
        return self._leaf("gt", value)

    def ge(self, value: int | float) -> Predicate:
        return self._leaf("ge", value)

    def lt(self, value: int | float) -> Predicate:
        return self._leaf("lt", value)

    def le(self, value: int | float) -> Predicate:
        return self._leaf("le", value)

    def is_true(self) -> Predicate:
        return self._leaf("is_true")

    def is_false(self) -> Predicate:
        return self._leaf("is_false")

    def present(self) -> Predicate:
        return self._leaf("present")


def output(step: str) -> OutputRef:
    """An earlier step's output, for a predicate: `output("check_invoices").path("discrepancies").gt(0)`."""
    if not _FIELD.match(step):
        raise ValueError(f"output({step!r}): not a step name")
    return OutputRef(step)


class ChildPolicy(NamedTuple):
    """A child step: the workflow whose job it starts (for the job's tenant), and `input`, a function of the domain
    module `(ctx) -> dict` building that job's input from this job's input and earlier outputs; the dict is validated
    by the child workflow's input model when the child is submitted (a problem fails the step `invalid-input`).
    `timeout_seconds` bounds the wait (the child's own deadline ends it first)."""

    workflow: str
    input: str
    timeout_seconds: int = CHILD_WAIT_SECONDS


class SignalPolicy(NamedTuple):
    """A signal step: the model its body is validated by, how long it waits (`timeout_seconds`) and what then:
    `proceed` (its output says no signal came) or `fail` (the job fails, error kind `timeout`). `wanted`, a function
    of the domain module `(ctx) -> int | None`, decides per job whether to wait and for how long (None: the step
    returns at once without waiting; a signal that came already is used all the same); without it every job waits
    `timeout_seconds`."""

    model: ModelRef
    timeout_seconds: int
    on_timeout: OnSignalTimeout = "proceed"
    wanted: str | None = None

    @property
    def body_type(self) -> type[BaseModel]:
        return model_of(self.model, "a signal's model")


class SegmentSpec(NamedTuple):
    """A bound on a group of consecutive steps together (e.g. OCR and indexing within 20 minutes): past it the job
    fails (error kind `timeout`, `detail.segment`) or, with `on_timeout="review"`, goes to the workflow's later review
    step. `timeout_setting` names an environment variable whose value, when set, replaces `timeout_seconds` where
    the state machine is built."""

    name: str
    steps: tuple[str, ...]
    timeout_seconds: int
    on_timeout: OnSegmentTimeout = "fail"
    timeout_setting: str | None = None

    def bound(self, environ: Mapping[str, str] | None = None) -> int:
        """Its seconds: the setting's value when it is set (a positive integer), else `timeout_seconds`."""
        if self.timeout_setting and environ is not None and environ.get(self.timeout_setting):
            value = int(environ[self.timeout_setting])
            if value < 1:
                raise ValueError(f"{self.timeout_setting} must be a positive number of seconds")
            return value
        return self.timeout_seconds


def segment(
    name: str,
    *,
    steps: tuple[str, ...],
    timeout_seconds: int,
    on_timeout: OnSegmentTimeout = "fail",
    timeout_setting: str | None = None,
) -> SegmentSpec:
    if not steps:
        raise ValueError(f"segment {name!r}: it bounds at least one step")
    if timeout_seconds < 1:
        raise ValueError(f"segment {name!r}: timeout_seconds must be positive")
    return SegmentSpec(name, tuple(steps), timeout_seconds, on_timeout, timeout_setting)


class ReviewPolicy(NamedTuple):
    """How a workflow's review behaves: who reviews, when it is needed, and the escalation ladder on its deadline
    (a reminder at one third, reassignment to `secondary_group` at two thirds, `final_action` at the deadline).

    The workflow's domain module provides `review_reasons(ctx) -> list[str]` (why `auto` asks for a review; empty:
    no review) and `review_material(ctx) -> BaseModel` (the draft and its evidence, shown to the reviewer); its
    publish step applies accepted `edits` (validated by `edits_model`) like model output.
    """

    assignee_group: str
    secondary_group: str
    edits_model: type[BaseModel]
    mode: ReviewMode = "never"
    deadline_seconds: int = limits.DEFAULT_REVIEW_DEADLINE_SECONDS
    final_action: FinalAction = "expire"


class Undo(Model):
    """What a compensation tool is given: the effect to undo, as the outbox recorded it."""

    operation_id: str
    tool: str
    input: dict[str, Any]
    output: dict[str, Any] | None = None
    outcome_known: bool = True  # False: the effect's attempt died before its outcome was recorded (it may not be)


@dataclass(frozen=True)
class Tool:
    """A typed tool: what the model is told (`description`, the input model's JSON schema), what it returns, and
    whether calling it changes the world (`side_effect`). A tool with a side effect runs through the job's outbox
    (`engine.tools`): once per operation id, however often its turn is retried. An irreversible tool names the
    tool that compensates it (`compensation`, taking `Undo`), which the saga runs in reverse order when the job
    fails or is cancelled; a reversible one may; a compensation (itself taking `Undo`) has none. `run` is
    `module:function` (a function of `(ToolContext, input)`), imported when the tool is first called; `uses` are the
    platform capabilities it needs (granted from the spec). `timeout_seconds` bounds one call: a call still running
    then is abandoned and fails with kind `timeout` (the model is told; the turn goes on)."""

    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    run: str
    side_effect: SideEffect = "none"
    compensation: str | None = None
    uses: frozenset[str] = frozenset()
    timeout_seconds: float = limits.DEFAULT_TOOL_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.timeout_seconds <= limits.MAX_TOOL_TIMEOUT_SECONDS:
            raise ValueError(f"tool {self.name!r}: timeout_seconds must be in (0, {limits.MAX_TOOL_TIMEOUT_SECONDS}]")
        if self.side_effect == "irreversible" and self.compensation is None and self.input_model is not Undo:
            raise ValueError(f"tool {self.name!r}: an irreversible tool names the tool that compensates it")
        if self.side_effect == "none" and self.compensation is not None:
            raise ValueError(f"tool {self.name!r}: only a tool with a side effect has a compensation")
        if not set(self.uses) <= CAPABILITIES:
            raise ValueError(f"tool {self.name!r}: unknown capabilities {sorted(set(self.uses) - CAPABILITIES)}")

    def function(self) -> Callable[..., BaseModel]:
        found: Callable[..., BaseModel] = imported(self.run)
        return found


class ToolRegistry(Mapping[str, Tool]):
    """A workflow's tools by name; a compensation must be a registered tool taking `Undo`."""

    def __init__(self, *tools: Tool) -> None:
        self._tools = {t.name: t for t in tools}
        if len(self._tools) != len(tools):
            raise ValueError(f"tool names repeat: {[t.name for t in tools]}")
        for tool in tools:
            if tool.compensation is None:
                continue
            undo = self._tools.get(tool.compensation)
            if undo is None:
                raise ValueError(f"tool {tool.name!r}: its compensation {tool.compensation!r} is not registered")
            if undo.input_model is not Undo:
                raise ValueError(f"tool {undo.name!r} compensates {tool.name!r}: it takes `Undo`")

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def compensations(self) -> frozenset[str]:
        """Tools that undo another (run by the saga, never offered to an agent)."""
        return frozenset(t.compensation for t in self._tools.values() if t.compensation)


class AgentPolicy(NamedTuple):
    """An agent step: the tools it may call (of its workflow's registry), the typed output it finishes with, its
    brief (`brief`: a function of the domain module, `(ctx) -> AgentBrief`: the task and what it starts from), its
    offline stand-in (`offline`: `module:function`, the scripted policy the offline model plays), optionally a check
    of its output (`check`: a domain function `(ctx, output) -> list[str]`, problems the model is told of), and its
    limits: turns and tool calls (a job may tighten them within its tenant's ceilings; the job's deadline and budget
    bound it too). Reaching a limit fails the step `agent-limit`, or with `on_limit="review"` ends it for the
    workflow's (later) review step to decide."""

    tools: tuple[str, ...]
    output_model: ModelRef  # the model, or where it is (`ModelRef`)
    brief: str
    offline: str
    check: str | None = None
    max_turns: int = 20
    max_tool_calls: int = 100
    on_limit: OnLimit = "fail"
    prompt_version: str = "agent-1"

    @property
    def output_type(self) -> type[BaseModel]:
        """The model its final answer is validated by (imported here when the policy names it by path)."""
        return model_of(self.output_model, "an agent's output model")


@dataclass(frozen=True)
class StepSpec:
    name: str
    kind: StepKind = StepKind.STEP
    over: str | None = None  # fan-out: "<earlier step>.<output field>" holding the list of item references
    item_unit: str = "item"  # what one fan-out item is, for people ("invoice", "passage group")
    timeout_seconds: int | None = None  # Lambda (or container task) timeout; None = the house policy's default
    memory_mb: int | None = None
    calls_model: bool = False
    review: ReviewPolicy | None = None  # a review step's policy
    container: str | None = None  # a container step: the worker it runs (`stacks/workers.py` builds its task)
    heartbeat_seconds: int | None = None  # a container step: the worker's heartbeat bound; None = the policy's
    agent: AgentPolicy | None = None  # an agent step's policy
    reads_results: bool = False  # reads other jobs' published results (its function may read `results/`)
    # A fan-out over a grouped list (`longhaul.engine.items`): one invocation per group of items, each item still
    # its own checkpoint, fault index, failure and dead letter. Not for a step that calls a model.
    grouped: bool = False
    # Its output is the job's provisional result: the step returns `StepContext.provisional(result)` in its output
    # (the result shaped as the workflow's, marked), readable before the job completes (`?provisional=true`).
    provisional: bool = False
    signal: SignalPolicy | None = None  # a signal step's policy
    # The fields of the workflow's input model the step reads (its body, its hooks): a fix of the job's input
    # invalidates the checkpoints of the steps that read a changed field. None: the whole input (the safe default).
    reads: tuple[str, ...] | None = None
    # Runs only when the predicate holds over earlier outputs (a Choice state before it); else it is recorded as
    # skipped (`step_skipped`) and its output is `{"skipped": true}`.
    when: Predicate | None = None
    child: ChildPolicy | None = None  # a child step's policy

    def __post_init__(self) -> None:
        if (self.kind == StepKind.CHILD) != (self.child is not None):
            raise ValueError(f"step {self.name!r}: a child step has a child policy, and only a child step does")
        if self.when is not None and self.kind not in (StepKind.STEP, StepKind.CHILD):
            raise ValueError(f"step {self.name!r}: only a plain step or a child step may say `when=`")
        if self.provisional and self.kind != StepKind.STEP:
            raise ValueError(f"step {self.name!r}: only a plain step (no items, no review) gives a provisional result")
        if (self.kind == StepKind.SIGNAL) != (self.signal is not None):
            raise ValueError(f"step {self.name!r}: a signal step has a signal policy, and only a signal step does")
        if self.signal is not None and self.signal.timeout_seconds < 1:
            raise ValueError(f"step {self.name!r}: a signal's timeout_seconds must be positive")
        if self.grouped and (self.kind != StepKind.FAN_OUT or self.calls_model):
            raise ValueError(f"step {self.name!r}: only a fan-out that calls no model runs its items in groups")
        if (self.kind == StepKind.AGENT) != (self.agent is not None):
            raise ValueError(f"step {self.name!r}: an agent step has an agent policy, and only an agent step does")
        if (self.kind in ITEM_KINDS) != (self.over is not None):
            raise ValueError(f"step {self.name!r}: a fan-out names what it fans out `over`, and only a fan-out does")
        if (self.kind == StepKind.REVIEW) != (self.review is not None):
            raise ValueError(f"step {self.name!r}: a review step has a review policy, and only a review step does")
        if (self.kind == StepKind.CONTAINER) != (self.container is not None):
            raise ValueError(f"step {self.name!r}: a container step names its `container`, and only one does")


def step(name: str, **options: Any) -> StepSpec:
    return StepSpec(name, **options)


def fan_out(name: str, *, over: str, **options: Any) -> StepSpec:
    return StepSpec(name, kind=StepKind.FAN_OUT, over=over, **options)


def review(name: str, *, policy: ReviewPolicy, **options: Any) -> StepSpec:
    return StepSpec(name, kind=StepKind.REVIEW, review=policy, **options)


def agent(name: str, *, policy: AgentPolicy, **options: Any) -> StepSpec:
    """An agent step: a loop of turns, each one model call and the tools it proposes (see `AgentPolicy`)."""
    return StepSpec(name, kind=StepKind.AGENT, agent=policy, calls_model=True, **options)


def signal(
    name: str,
    *,
    model: ModelRef,
    timeout_seconds: int,
    on_timeout: OnSignalTimeout = "proceed",
    wanted: str | None = None,
    **options: Any,
) -> StepSpec:
    """A signal step: waits for `POST /v1/jobs/{job_id}/signals/{name}` (its body validated by `model`), at most
    `timeout_seconds`; then `on_timeout` (see `SignalPolicy`)."""
    policy = SignalPolicy(model, timeout_seconds, on_timeout, wanted)
    return StepSpec(name, kind=StepKind.SIGNAL, signal=policy, **options)


def child(
    name: str, *, workflow: str, input: str, timeout_seconds: int = CHILD_WAIT_SECONDS, **options: Any
) -> StepSpec:
    """A child step: starts a job of `workflow` for the same tenant with the input the domain function `input` builds
    and waits for it (see `ChildPolicy`); its output names the child and its result."""
    return StepSpec(name, kind=StepKind.CHILD, child=ChildPolicy(workflow, input, timeout_seconds), **options)


def container(name: str, *, over: str, worker: str, **options: Any) -> StepSpec:
    """A container step: one task of `worker` per item of `over`, each resumed by its task token."""
    return StepSpec(name, kind=StepKind.CONTAINER, over=over, container=worker, **options)


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    description: str
    input_model: type[BaseModel]
    result_model: ModelRef  # the model, or where it is (`ModelRef`): the API's import needs only the input
    steps: tuple[StepSpec, ...]
    domain: str  # module with one function per step (same names) and `prepare`, imported on first use
    deadline_default_seconds: int = limits.DEFAULT_DEADLINE_SECONDS
    # What its agent steps may call: the registry, or where it is (`"module:NAME"`), imported on first use as the
    # domain module is (the API, which calls no tool, never imports the tools and their models).
    tools: ToolRegistry | str = field(default_factory=ToolRegistry)
    segments: tuple[SegmentSpec, ...] = ()  # bounds on groups of consecutive steps (see `SegmentSpec`)
    _by_name: Mapping[str, StepSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [s.name for s in self.steps]
        if sum(1 for s in self.steps if s.kind == StepKind.REVIEW) > 1:
            raise ValueError(f"workflow {self.name!r}: at most one review step")
        if len(set(names)) != len(names):
            raise ValueError(f"workflow {self.name!r}: step names repeat: {names}")
        for s in self.steps:
            if s.over is not None and s.over.split(".", 1)[0] not in names[: names.index(s.name)]:
                raise ValueError(f"workflow {self.name!r}: {s.name} fans out over {s.over!r}, not an earlier step")
            if s.agent is not None:
                later = [self._step_kind(n) for n in names[names.index(s.name) + 1 :]]
                if s.agent.on_limit == "review" and StepKind.REVIEW not in later:
                    raise ValueError(
                        f"workflow {self.name!r}: agent {s.name} hands over to review, but no review follows"
                    )
        object.__setattr__(self, "_by_name", {s.name: s for s in self.steps})
        self._check_branches(names)
        self._check_segments(names)
        self._check_reads()
        if isinstance(self.tools, ToolRegistry):
            self._check_tools(self.tools)

    def _check_segments(self, names: list[str]) -> None:
        """Each segment bounds consecutive existing steps, none of them in another segment or a review; `review`
        needs a review step after it."""
        seen: set[str] = set()
        if len({g.name for g in self.segments}) != len(self.segments):
            raise ValueError(f"workflow {self.name!r}: segment names repeat")
        for g in self.segments:
            unknown = [n for n in g.steps if n not in names]
            if unknown:
                raise ValueError(f"workflow {self.name!r}: segment {g.name} names unknown steps {unknown}")
            start = names.index(g.steps[0])
            if list(g.steps) != names[start : start + len(g.steps)]:
                raise ValueError(f"workflow {self.name!r}: segment {g.name}'s steps are not consecutive: {g.steps}")
            overlap = sorted(seen & set(g.steps))
            if overlap:
                raise ValueError(f"workflow {self.name!r}: segment {g.name} overlaps another on {overlap}")
            seen |= set(g.steps)
            if any(self._by_name[n].kind == StepKind.REVIEW for n in g.steps):
                raise ValueError(f"workflow {self.name!r}: segment {g.name} may not hold the review step")
            if g.on_timeout == "review":
                later = [self._by_name[n].kind for n in names[start + len(g.steps) :]]
                if StepKind.REVIEW not in later:
                    raise ValueError(
                        f"workflow {self.name!r}: segment {g.name} hands over to review, but no review follows"
                    )

    def _check_branches(self, names: list[str]) -> None:
        """A `when=` reads earlier steps only; a step that may be skipped, or a child step, is not the one whose
        output is the result (`result_step`); no step in a segment branches or waits for a child."""
        for s in self.steps:
            if s.when is not None:
                later = sorted(s.when.steps - set(names[: names.index(s.name)]))
                if later:
                    raise ValueError(f"workflow {self.name!r}: step {s.name} branches on {later}, not earlier steps")
            if (s.when is not None or s.kind == StepKind.CHILD) and self.segment_of(s.name) is not None:
                raise ValueError(f"workflow {self.name!r}: step {s.name} branches or waits for a child in a segment")
        publishing = [s for s in self.steps if s.when is None and s.kind != StepKind.CHILD]
        if not publishing:
            raise ValueError(f"workflow {self.name!r}: a step that always runs and is not a child publishes the result")

    @property
    def result_step(self) -> str:
        """The step whose output carries the result (`result_key`): the last one that always runs and is not a child
        (a child step or a skippable step may follow it; the job completes after the last step all the same)."""
        return next(s.name for s in reversed(self.steps) if s.when is None and s.kind != StepKind.CHILD)

    @property
    def child_steps(self) -> tuple[StepSpec, ...]:
        return tuple(s for s in self.steps if s.kind == StepKind.CHILD)

    def _check_reads(self) -> None:
        """Every field a step declares it reads is a field of the input model."""
        fields = set(self.input_model.model_fields)
        for s in self.steps:
            unknown = sorted(set(s.reads or ()) - fields)
            if unknown:
                raise ValueError(f"workflow {self.name!r}: step {s.name} reads {unknown}, not fields of its input")

    def steps_reading(self, changed: Iterable[str]) -> tuple[str, ...]:
        """The steps, in order, that read one of the `changed` input fields (a step that declares nothing reads all)."""
        wanted = set(changed)
        if not wanted:
            return ()
        return tuple(s.name for s in self.steps if s.reads is None or wanted & set(s.reads))

    def segment_of(self, step: str) -> SegmentSpec | None:
        return next((g for g in self.segments if step in g.steps), None)

    @property
    def signal_steps(self) -> tuple[StepSpec, ...]:
        return tuple(s for s in self.steps if s.kind == StepKind.SIGNAL)

    def _check_tools(self, tools: ToolRegistry) -> None:
        """Every agent step calls registered tools only, and no compensation (the saga's alone)."""
        for s in self.agent_steps:
            assert s.agent is not None
            unknown = [t for t in s.agent.tools if t not in tools]
            if unknown:
                raise ValueError(f"workflow {self.name!r}: agent {s.name} may call unregistered tools {unknown}")
            undoing = [t for t in s.agent.tools if t in tools.compensations]
            if undoing:
                raise ValueError(f"workflow {self.name!r}: agent {s.name} may not call compensations {undoing}")
            bound = s.timeout_seconds or DEFAULT_AGENT_TIMEOUT_SECONDS
            slow = [t for t in s.agent.tools if t in tools and tools[t].timeout_seconds >= bound]
            if slow:
                raise ValueError(
                    f"workflow {self.name!r}: agent {s.name}'s tools {slow} have a timeout_seconds not below the "
                    f"step's own timeout ({bound} s)"
                )

    @cached_property  # kept in the instance's __dict__: not a field, so a frozen spec may keep it
    def tool_registry(self) -> ToolRegistry:
        """The tools its agent steps may call (imported and checked against them here the first time, when the spec
        names them by path)."""
        if not isinstance(self.tools, str):
            return self.tools
        tools = imported(self.tools)
        if not isinstance(tools, ToolRegistry):
            raise TypeError(f"workflow {self.name!r}: {self.tools!r} is not a ToolRegistry")
        self._check_tools(tools)
        return tools

    def _step_kind(self, name: str) -> StepKind:
        return next(s.kind for s in self.steps if s.name == name)

    @property
    def result_type(self) -> type[BaseModel]:
        """The model of the result its last step publishes (imported here when the spec names it by path)."""
        return model_of(self.result_model, f"workflow {self.name!r}: result model")

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    @property
    def fan_out_steps(self) -> frozenset[str]:
        """Steps that run per item (fan-outs and container steps): replays rerun only their unfinished items."""
        return frozenset(s.name for s in self.steps if s.kind in ITEM_KINDS)

    @property
    def container_steps(self) -> tuple[StepSpec, ...]:
        return tuple(s for s in self.steps if s.kind == StepKind.CONTAINER)

    @property
    def model_steps(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps if s.calls_model)

    @property
    def agent_steps(self) -> tuple[StepSpec, ...]:
        return tuple(s for s in self.steps if s.kind == StepKind.AGENT)

    def tools_of(self, name: str) -> tuple[Tool, ...]:
        """The tools an agent step may call."""
        policy = self.step(name).agent
        return tuple(self.tool_registry[t] for t in policy.tools) if policy else ()

    @property
    def compensated(self) -> bool:
        """Whether an agent of this workflow may make a side effect with a compensation: its state machine then has
        a compensation lane."""
        return any(t.compensation for s in self.agent_steps for t in self.tools_of(s.name))

    def steps_using(self, capability: str) -> tuple[str, ...]:
        """The agent steps whose tools use a capability (their functions are granted it)."""
        return tuple(s.name for s in self.agent_steps if any(capability in t.uses for t in self.tools_of(s.name)))

    def compensations_use(self, capability: str) -> bool:
        """Whether a compensation this workflow's saga may run uses a capability (its lane's function needs it)."""
        tools = self.tool_registry
        return any(capability in tools[name].uses for name in tools.compensations)

    @property
    def review_step(self) -> StepSpec | None:
        """The workflow's review step (at most one)."""
        return next((s for s in self.steps if s.kind == StepKind.REVIEW), None)

    @property
    def last_step(self) -> str:
        return self.steps[-1].name

    def step(self, name: str) -> StepSpec:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"workflow {self.name!r} has no step {name!r}; steps: {list(self.step_names)}") from None

    def work(self, name: str) -> StepWork:
        """The domain function of a step (the domain module is imported here, never by the API); a review or an agent
        step's is the platform's."""
        platform = {
            StepKind.REVIEW: REVIEW_WORK,
            StepKind.AGENT: AGENT_WORK,
            StepKind.SIGNAL: SIGNAL_WORK,
            StepKind.CHILD: CHILD_WORK,
        }.get(self.step(name).kind)
        if platform is not None:
            opened: StepWork = imported(platform)
            return opened
        work: StepWork = getattr(importlib.import_module(self.domain), name)
        return work

    def hook(self, name: str) -> Callable[..., Any]:
        """A function of the domain module by name (e.g. the review hooks `review_reasons`, `review_material`)."""
        found: Callable[..., Any] = getattr(importlib.import_module(self.domain), name)
        return found

    def prepare(self) -> Prepare:
        """The workflow's submission logic: validate and store its input (see `longhaul.documents.intake`)."""
        prepare: Prepare = importlib.import_module(self.domain).prepare
        return prepare


class Registry(Mapping[str, WorkflowSpec]):
    """The deployed workflow types by name."""

    def __init__(self, *specs: WorkflowSpec) -> None:
        self._specs = {s.name: s for s in specs}
        for spec in specs:
            for s in spec.child_steps:
                assert s.child is not None
                if s.child.workflow not in self._specs or s.child.workflow == spec.name:
                    raise ValueError(f"workflow {spec.name!r}: child step {s.name} starts unknown {s.child.workflow!r}")

    @classmethod
    def of(cls, *packages: str) -> "Registry":
        """The specs of `longhaul.workflows.<package>.spec` (light modules: models and step lists only)."""
        return cls(*(importlib.import_module(f"{WORKFLOWS_PACKAGE}.{p}.spec").SPEC for p in packages))

    @classmethod
    def discover(cls, package: str | None = None) -> "Registry":
        """Every workflow package under `package` (default `longhaul.workflows`): a subpackage with a `spec` module,
        in the order of their names. The package's own `__init__` is not needed to find them."""
        package = package or WORKFLOWS_PACKAGE
        found = importlib.util.find_spec(package)
        locations = list(found.submodule_search_locations or []) if found else []
        names = sorted(m.name for m in pkgutil.iter_modules(locations) if m.ispkg)
        specs = [n for n in names if importlib.util.find_spec(f"{package}.{n}.spec") is not None]
        return cls(*(importlib.import_module(f"{package}.{n}.spec").SPEC for n in specs))

    def __getitem__(self, name: str) -> WorkflowSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def all_steps(self) -> frozenset[str]:
        return frozenset(step for spec in self._specs.values() for step in spec.step_names)

    @property
    def containers(self) -> frozenset[str]:
        """The workers any container step runs (one task definition each)."""
        return frozenset(s.container for spec in self._specs.values() for s in spec.container_steps if s.container)

    @property
    def all_fan_out_steps(self) -> frozenset[str]:
        return frozenset(step for spec in self._specs.values() for step in spec.fan_out_steps)

    @property
    def all_model_steps(self) -> frozenset[str]:
        return frozenset(step for spec in self._specs.values() for step in spec.model_steps)

    @property
    def all_agent_steps(self) -> frozenset[str]:
        return frozenset(s.name for spec in self._specs.values() for s in spec.agent_steps)


WORKFLOWS_PACKAGE = "longhaul.workflows"
_registry: Registry | None = None
_registry_lock = threading.RLock()


def registry() -> Registry:
    """The installed workflows (`Registry.discover()`), found once per process."""
    global _registry
    with _registry_lock:
        if _registry is None:
            # Importing a workflow's spec imports `longhaul.workflows`, whose `__init__` asks for the registry too:
            # the inner call finds it first, and this one keeps that one.
            found = Registry.discover()
            _registry = _registry or found
        return _registry
