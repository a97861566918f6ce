"""What a workflow is: one `WorkflowSpec` — name, input model, ordered steps, result model, domain module.

Everything that used to be repeated per workflow derives from the spec: the step list the runner uses (taken from
the event's own workflow), its fan-out steps, which steps call a model (their grants), the request union of the API,
the handler dispatch per (workflow, step), the state machine's expected step order, DLQs and dashboard rows.

Light on purpose: the API imports every spec (for the request union), so a spec names its domain module by path
and the step handler imports it only when one of its steps runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from longhaul import limits

if TYPE_CHECKING:
    from longhaul.runner import StepContext
    from longhaul.submission import Intake, PreparedInput

StepWork = Callable[["StepContext"], dict[str, Any]]
Prepare = Callable[["Intake", Any], "PreparedInput"]


class StepKind(StrEnum):
    STEP = "step"  # one Lambda invocation over the whole state
    FAN_OUT = "fan-out"  # a Map: one invocation per item of an earlier step's output list


@dataclass(frozen=True)
class StepSpec:
    name: str
    kind: StepKind = StepKind.STEP
    over: str | None = None  # fan-out: "<earlier step>.<output field>" holding the list of item references
    item_unit: str = "item"  # what one fan-out item is, for people ("invoice", "passage group")
    timeout_seconds: int | None = None  # Lambda timeout; None = the house policy's default
    memory_mb: int | None = None
    calls_model: bool = False

    def __post_init__(self) -> None:
        if (self.kind == StepKind.FAN_OUT) != (self.over is not None):
            raise ValueError(f"step {self.name!r}: a fan-out names what it fans out `over`, and only a fan-out does")


def step(name: str, **options: Any) -> StepSpec:
    return StepSpec(name, **options)


def fan_out(name: str, *, over: str, **options: Any) -> StepSpec:
    return StepSpec(name, kind=StepKind.FAN_OUT, over=over, **options)


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
        return frozenset(s.name for s in self.steps if s.kind == StepKind.FAN_OUT)

    @property
    def model_steps(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps if s.calls_model)

    @property
    def last_step(self) -> str:
        return self.steps[-1].name

    def step(self, name: str) -> StepSpec:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"workflow {self.name!r} has no step {name!r}; steps: {list(self.step_names)}") from None

    def work(self, name: str) -> StepWork:
        """The domain function of a step (the domain module is imported here, never by the API)."""
        self.step(name)
        work: StepWork = getattr(importlib.import_module(self.domain), name)
        return work

    def prepare(self) -> Prepare:
        """The workflow's submission logic: validate and store its input (see `longhaul.submission`)."""
        prepare: Prepare = importlib.import_module(self.domain).prepare
        return prepare


class Registry(Mapping[str, WorkflowSpec]):
    """The deployed workflow types by name."""

    def __init__(self, *specs: WorkflowSpec) -> None:
        self._specs = {s.name: s for s in specs}

    @classmethod
    def of(cls, *packages: str) -> Registry:
        """The specs of `longhaul.workflows.<package>.spec` (light modules: models and step lists only)."""
        return cls(*(importlib.import_module(f"longhaul.workflows.{p}.spec").SPEC for p in packages))

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
    def all_fan_out_steps(self) -> frozenset[str]:
        return frozenset(step for spec in self._specs.values() for step in spec.fan_out_steps)
