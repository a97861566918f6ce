"""What a workflow is: one `WorkflowSpec` — name, input model, ordered steps, result model, domain module — and the
registry of the installed workflows.

Everything that used to be repeated per workflow derives from the spec: the step list the runner uses (taken from
the event's own workflow), its fan-out steps, which steps call a model (their grants), the request union of the API,
the handler dispatch per (workflow, step), the state machine's chain (`state_machines.builder` walks the steps),
DLQs and dashboard rows.

Light on purpose: the API imports every spec (for the request union), so a spec names its domain module by path
and the step handler imports it only when one of its steps runs.

The registry is discovered, not listed: every package under `longhaul.workflows` with a `spec` module defining
`SPEC` is a workflow (`registry()`), so adding a workflow adds one folder. The engine finds the workflows by that
convention at run time; it never imports a workflow's code by name.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from longhaul.core import limits

if TYPE_CHECKING:
    from longhaul.documents.intake import Intake, PreparedInput
    from longhaul.engine.context import StepContext

StepWork = Callable[["StepContext"], dict[str, Any]]
Prepare = Callable[["Intake", Any], "PreparedInput"]


class StepKind(StrEnum):
    STEP = "step"  # one Lambda invocation over the whole state
    FAN_OUT = "fan-out"  # a Map: one invocation per item of an earlier step's output list
    REVIEW = "review"  # a person decides on the draft; the execution waits on a task token (no compute held)
    # A Map of container tasks (ECS Fargate) resumed by task token: one task per item of an earlier step's output
    # list, for heavy work that does not belong in a Lambda (OCR). An empty list skips the step.
    CONTAINER = "container"


ITEM_KINDS = frozenset({StepKind.FAN_OUT, StepKind.CONTAINER})


ReviewMode = Literal["always", "never", "auto"]
FinalAction = Literal["expire", "approve"]
# The platform's body of every review step (decides whether a review is needed, opens it); see `longhaul.review`.
REVIEW_WORK = "longhaul.review.lane:open_review"


@dataclass(frozen=True)
class ReviewPolicy:
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

    def __post_init__(self) -> None:
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


def container(name: str, *, over: str, worker: str, **options: Any) -> StepSpec:
    """A container step: one task of `worker` per item of `over`, each resumed by its task token."""
    return StepSpec(name, kind=StepKind.CONTAINER, over=over, container=worker, **options)


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    description: str
    input_model: type[BaseModel]
    result_model: type[BaseModel]
    steps: tuple[StepSpec, ...]
    domain: str  # module with one function per step (same names) and `prepare`, imported on first use
    deadline_default_seconds: int = limits.DEFAULT_DEADLINE_SECONDS
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
        object.__setattr__(self, "_by_name", {s.name: s for s in self.steps})

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
        """The domain function of a step (the domain module is imported here, never by the API); a review step's is
        the platform's."""
        if self.step(name).kind == StepKind.REVIEW:
            module, _, function = REVIEW_WORK.partition(":")
            opened: StepWork = getattr(importlib.import_module(module), function)
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

    @classmethod
    def of(cls, *packages: str) -> Registry:
        """The specs of `longhaul.workflows.<package>.spec` (light modules: models and step lists only)."""
        return cls(*(importlib.import_module(f"{WORKFLOWS_PACKAGE}.{p}.spec").SPEC for p in packages))

    @classmethod
    def discover(cls, package: str | None = None) -> Registry:
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
