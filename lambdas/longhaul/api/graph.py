"""A job's workflow as a graph: the states of the state machine definition its execution runs, each with this job's
state, and the progress of each fan-out. What the console draws (`GET /v1/jobs/{id}/graph`).

The nodes are the definition's own top-level states and those of its Parallel states' branches (a segment: its steps and
its timer), the Parallel a node of its own whose edges lead to its branches' first states (and their last states' to the
Parallel's next); a Map is one node (its item processor runs per item and is summed up by the fan-out's progress). The
edges are its transitions (`Next`, a Choice's rules and `Default`, and each `Catch`). A state's status comes from the
latest execution's history (`*StateEntered`/`*StateExited` events, in order): entered and left is `done` — or `failed`
when it was left through one of its `Catch`es (`stopped` when the catch goes straight to a `Fail` state, which the house
policy does only for a stopped job) —, entered and not left is `running` (`waiting` for a task-token Task while the job
waits for review or is paused) until the execution ends, then `failed` (`stopped` for a cancelled or expired job). A
state never entered is `pending` while the job may still get there, else `skipped`. A fan-out's Map is also `failed`
when an item failed. States reached only through a `Catch` are the failure path (`failure_path`). The console folds each
step's states into one node (its steps first); this module gives every state, so the folding stays a matter of drawing.
"""

import json
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from longhaul.core.contracts import TERMINAL_STATUSES, JobStatus
from longhaul.core.model import Model
from longhaul.core.ports import ExecutionStatus, HistoryEvent
from longhaul.core.problems import ApiProblem
from longhaul.core.records import Job, StepRecord
from longhaul.engine.items import item_count
from longhaul.engine.spec import COMPENSATION_STEP, WorkflowSpec
from longhaul.services import Services
from longhaul.workflows import REGISTRY

NodeStatus = Literal["done", "running", "waiting", "failed", "stopped", "skipped", "pending"]
EdgeKind = Literal["next", "choice", "default", "catch"]
STOPPED_JOB = frozenset({JobStatus.CANCEL_REQUESTED, JobStatus.CANCELLED, JobStatus.EXPIRED})
# A job whose execution waits on a task token with no compute held: for a review, or paused at a step boundary.
WAITING_JOB = frozenset(s for s in JobStatus if s.value in ("waiting_for_review", "paused"))


class GraphNode(Model):
    name: str = Field(description="The state's name in the definition.")
    type: str = Field(description="The ASL state type: Task, Map, Choice, Pass, Wait, Succeed, Fail, Parallel.")
    step: str | None = Field(
        default=None,
        description="The workflow step the state belongs to (`compensation`: the saga's compensation lane; a "
        "segment's own states, its timer and its end: the segment's name), if any.",
    )
    status: NodeStatus = Field(description="This job's state of it (see the module's rules).")
    entered: int = Field(default=0, description="How often the latest execution entered it.")
    failure_path: bool = Field(default=False, description="Reached only through a Catch.")
    waits_for_token: bool = Field(default=False, description="A Task that waits for a task token (a review).")
    child_job_id: str | None = Field(
        default=None, description="A child step's states: the job it started (`GET /v1/jobs/{child_job_id}`)."
    )


class GraphEdge(Model):
    source: str
    target: str
    kind: EdgeKind
    taken: bool = Field(default=False, description="The latest execution went this way.")


class FanOutProgress(Model):
    """A fan-out step's items: how many committed, failed, and how many there are (null until known)."""

    step: str
    unit: str
    completed: int = 0
    failed: int = 0
    total: int | None = None


class WorkflowGraph(Model):
    job_id: str
    workflow: str
    job_status: JobStatus
    execution: str = Field(description="The execution the states are of: the job's latest attempt.")
    execution_status: ExecutionStatus
    start_at: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    fan_outs: list[FanOutProgress] = Field(default_factory=list)


# ---------------------------------------------------------------------- the definition


class _ChoiceRule(Model):
    model_config = ConfigDict(extra="ignore")
    Next: str


class _Catcher(Model):
    model_config = ConfigDict(extra="ignore")
    Next: str


class _State(Model):
    model_config = ConfigDict(extra="ignore")
    Type: str
    Next: str | None = None
    Default: str | None = None
    Choices: list[_ChoiceRule] = Field(default_factory=list)
    Catch: list[_Catcher] = Field(default_factory=list)
    Resource: str | None = None
    End: bool = False
    Branches: list[dict[str, Any]] = Field(default_factory=list)  # a Parallel's: each read as a `_Definition`


class _Definition(Model):
    model_config = ConfigDict(extra="ignore")
    StartAt: str
    States: dict[str, _State]


class EngineNotAnswering(ApiProblem):
    status, slug, title = 503, "engine-unavailable", "The workflow engine did not answer; retry later"


class DefinitionUnreadable(ValueError):
    """The definition is not ASL this module can read."""


def parse_definition(text: str) -> _Definition:
    try:
        return _Definition.model_validate(json.loads(text))
    except (ValueError, ValidationError) as error:
        raise DefinitionUnreadable(f"not a state machine definition: {error}") from None


def level_states(definition: _Definition) -> dict[str, _State]:
    """The states of the workflow's own level: its top-level states and, in place after each Parallel, its branches'
    (not a Map's item processor). State names are unique in a definition, branches included."""
    found: dict[str, _State] = {}

    def add(states: dict[str, _State]) -> None:
        for name, state in states.items():
            found[name] = state
            for branch in state.Branches:
                add(_branch(branch).States)

    add(definition.States)
    return found


def _branch(raw: dict[str, Any]) -> _Definition:
    try:
        return _Definition.model_validate(raw)
    except ValidationError as error:
        raise DefinitionUnreadable(f"not a Parallel branch: {error}") from None


def edges_of(definition: _Definition) -> list[GraphEdge]:
    """Every transition between the workflow level's states (a Parallel leads to each branch's first state), each
    once per (source, target, kind)."""
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    states = level_states(definition)

    def add(source: str, target: str | None, kind: EdgeKind) -> None:
        if target is not None and target in states:
            edges.setdefault((source, target, kind), GraphEdge(source=source, target=target, kind=kind))

    for name, state in states.items():
        for raw in state.Branches:  # a Parallel leads to each branch's first state, and its last ones to its Next
            branch = _branch(raw)
            add(name, branch.StartAt, "next")
            for last, inner in branch.States.items():
                if inner.End:
                    add(last, state.Next, "next")
        if not state.Branches:
            add(name, state.Next, "next")
        for rule in state.Choices:
            add(name, rule.Next, "choice")
        add(name, state.Default, "default")
        for catcher in state.Catch:
            add(name, catcher.Next, "catch")
    return list(edges.values())


def _reachable(start: str, edges: Iterable[GraphEdge]) -> set[str]:
    following: dict[str, list[str]] = {}
    for edge in edges:
        following.setdefault(edge.source, []).append(edge.target)
    seen, todo = {start}, [start]
    while todo:
        for target in following.get(todo.pop(), []):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def step_of(state: str, steps: Sequence[str]) -> str | None:
    """The step a state is named after: the step itself, or `<step>: …`, `<step> (…)`, `<step> items: …`."""
    matches = [s for s in steps if state == s or state.startswith((f"{s} ", f"{s}:"))]
    return max(matches, key=len) if matches else None


# ---------------------------------------------------------------------- the job's states


def derive(
    definition: _Definition,
    events: Sequence[HistoryEvent],
    *,
    steps: Sequence[str],
    execution_status: ExecutionStatus,
    job_status: JobStatus,
    failed_fan_outs: frozenset[str] = frozenset(),
    segments: Sequence[str] = (),
    waits: bool = False,
) -> tuple[list[GraphNode], list[GraphEdge]]:
    """Each state of the workflow's level with this job's status, and the transitions the execution took (the
    module's rules)."""
    # A workflow with sagas runs its compensation lane in the same definition; a segment has states of its own.
    lanes = (*steps, COMPENSATION_STEP, *segments)
    states = level_states(definition)
    edges = edges_of(definition)
    main = _reachable(definition.StartAt, [e for e in edges if e.kind != "catch"])
    normal = {(e.source, e.target) for e in edges if e.kind != "catch"}
    caught = {(e.source, e.target) for e in edges if e.kind == "catch"}

    entered: dict[str, int] = {}
    inside: dict[str, bool] = {}  # entered and not left yet
    left_to: dict[str, str] = {}  # where the state was last left for
    order: list[str] = []  # top-level states in the order they were entered
    for event in events:
        name = event.state
        if name is None or name not in states:  # another event, or a state inside a Map's item processor
            continue
        if event.type.endswith("StateEntered"):
            if order and inside.get(order[-1]) is False and order[-1] != name:
                left_to[order[-1]] = name
            entered[name] = entered.get(name, 0) + 1
            inside[name] = True
            order.append(name)
        elif event.type.endswith("StateExited"):
            inside[name] = False
    taken = set(pairwise(order))
    ended = execution_status not in (ExecutionStatus.RUNNING, ExecutionStatus.NOT_STARTED)
    # A finished job's execution may still run its last states for a moment: what it has not entered yet is skipped
    # only once it has ended (or when it never started).
    finished = ended or (execution_status == ExecutionStatus.NOT_STARTED and job_status in TERMINAL_STATUSES)
    stopped_job = job_status in STOPPED_JOB

    def status(name: str, state: _State) -> NodeStatus:
        if not entered.get(name):
            return "skipped" if finished else "pending"
        if state.Type == "Succeed":
            return "done"
        if state.Type == "Fail":
            return "stopped" if stopped_job else "failed"
        if inside.get(name):
            if not ended:
                token = ".waitForTaskToken" in (state.Resource or "")
                return "waiting" if token and (waits or job_status in WAITING_JOB) else "running"
            return "stopped" if stopped_job else "failed"
        target = left_to.get(name)
        if target is not None and (name, target) in caught and (name, target) not in normal:
            return "stopped" if states[target].Type == "Fail" else "failed"
        if state.Type == "Map" and step_of(name, steps) in failed_fan_outs:
            return "failed"
        return "done"

    nodes = [
        GraphNode(
            name=name,
            type=state.Type,
            step=step_of(name, lanes),
            status=status(name, state),
            entered=entered.get(name, 0),
            failure_path=name not in main,
            waits_for_token=".waitForTaskToken" in (state.Resource or ""),
        )
        for name, state in states.items()
    ]
    for edge in edges:
        edge.taken = (edge.source, edge.target) in taken
    return nodes, edges


def fan_out_progress(spec: WorkflowSpec, records: Sequence[StepRecord]) -> list[FanOutProgress]:
    """Each fan-out step's items from the job's step records: committed, failed, and the count of its item list."""
    progress = []
    for step in spec.steps:
        if step.over is None:
            continue
        producer, field = step.over.split(".", 1)
        listed = next(
            (r.output for r in records if r.step == producer and r.item is None and r.succeeded and r.output), None
        )
        items = [r for r in records if r.step == step.name and r.item is not None]
        progress.append(
            FanOutProgress(
                step=step.name,
                unit=step.item_unit,
                completed=sum(1 for r in items if r.succeeded),
                failed=sum(1 for r in items if r.status == "failed"),
                total=item_count(listed.get(field)) if listed else None,
            )
        )
    return progress


def job_graph(services: Services, job: Job) -> WorkflowGraph:
    """The job's workflow graph (raises `EngineUnavailable` when the engine does not answer)."""
    spec = REGISTRY[job.workflow]
    definition = parse_definition(services.engine.definition(job.workflow, job.execution_name))
    execution = services.engine.describe(job.workflow, job.execution_name).status
    started = execution != ExecutionStatus.NOT_STARTED
    # The parent's own history: a Distributed Map's child executions run its items, which the fan-out counts sum up.
    history = services.engine.history(job.workflow, job.execution_name, children=False) if started else None
    events = history.events if history else []
    fan_outs = fan_out_progress(spec, services.checkpoints.steps(job.job_id))
    nodes, edges = derive(
        definition,
        events,
        steps=spec.step_names,
        execution_status=execution,
        job_status=job.status,
        failed_fan_outs=frozenset(f.step for f in fan_outs if f.failed),
        segments=tuple(g.name for g in spec.segments),
        waits=job.wait_state is not None and job.wait_state.reason == "child",
    )
    for node in nodes:  # a child step's states link to the job it started
        child = job.children.get(node.step or "")
        node.child_job_id = child["job_id"] if child else None
    return WorkflowGraph(
        job_id=job.job_id,
        workflow=job.workflow,
        job_status=job.status,
        execution=job.execution_name,
        execution_status=execution,
        start_at=definition.StartAt,
        nodes=nodes,
        edges=edges,
        fan_outs=fan_outs,
    )
