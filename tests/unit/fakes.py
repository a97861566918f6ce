"""In-memory fakes of the ports (`longhaul.core.ports`): the workflow engine and the dead letters.

Use cases (replay, the sweep, the runner) are tested against these, so a test says what the engine was asked to do
and what it answered without running an interpreter. They keep the contracts of the ports: starting an execution
that exists counts as started, stopping a missing or ended one is fine, an unknown execution is `NOT_STARTED`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from longhaul.core.contracts import DeadLetter
from longhaul.core.ports import EngineUnavailable, Execution, ExecutionHistory, ExecutionStatus, RedriveRefused, Waiting

ENDED = frozenset(
    {ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT, ExecutionStatus.ABORTED}
)


@dataclass(frozen=True)
class Started:
    workflow: str
    execution: str
    state: dict[str, Any]
    version: str | None = None  # the version it was asked to start on (None: the workflow's alias)


@dataclass(frozen=True)
class Stopped:
    workflow: str
    execution: str
    error: str
    cause: str


@dataclass
class FakeEngine:
    """A `WorkflowEngine` that records its calls. Set `unavailable` to make start/stop raise `EngineUnavailable`,
    `refuse_redrive` to a reason to make redrive raise `RedriveRefused`, and statuses with `set_status`. Versions:
    an execution started without one runs `current[workflow]` (if set); `versions` are those that exist."""

    unavailable: bool = False
    current: dict[str, str] = field(default_factory=dict)
    versions: set[str] = field(default_factory=set)
    refuse_redrive: str | None = None
    executions: dict[tuple[str, str], Execution] = field(default_factory=dict)
    started: list[Started] = field(default_factory=list)
    stopped: list[Stopped] = field(default_factory=list)
    redriven: list[tuple[str, str]] = field(default_factory=list)
    histories: dict[tuple[str, str], ExecutionHistory] = field(default_factory=dict)
    history_reads: list[tuple[str, str]] = field(default_factory=list)
    definitions: dict[str, str] = field(default_factory=dict)  # workflow -> its definition (ASL JSON)

    def set_status(self, workflow: str, execution: str, status: ExecutionStatus, *, error: str | None = None) -> None:
        version = self.executions[(workflow, execution)].version if (workflow, execution) in self.executions else None
        self.executions[(workflow, execution)] = Execution(status, error, version)

    def status(self, workflow: str, execution: str) -> ExecutionStatus:
        return self.describe(workflow, execution).status

    def start(self, workflow: str, execution: str, state: Mapping[str, Any], *, version: str | None = None) -> None:
        if self.unavailable:
            raise EngineUnavailable("StartExecution: ThrottlingException")
        if (workflow, execution) in self.executions:
            return  # one execution per name: a second start counts as started
        self.started.append(Started(workflow, execution, dict(state), version))
        runs = version or self.current.get(workflow)
        self.executions[(workflow, execution)] = Execution(ExecutionStatus.RUNNING, version=runs)

    def version_of(self, execution_arn: str) -> str | None:
        name = execution_arn.rsplit(":", 1)[-1]
        return next((e.version for (_, n), e in self.executions.items() if n == name), None)

    def has_version(self, workflow: str, version: str) -> bool:
        return version in self.versions or version in self.current.values()

    def stop(self, workflow: str, execution: str, *, error: str, cause: str = "") -> None:
        if self.unavailable:
            raise EngineUnavailable("StopExecution: ThrottlingException")
        self.stopped.append(Stopped(workflow, execution, error, cause))
        current = self.executions.get((workflow, execution))
        if current is not None and current.status == ExecutionStatus.RUNNING:
            self.executions[(workflow, execution)] = Execution(ExecutionStatus.ABORTED, error, current.version)

    def describe(self, workflow: str, execution: str) -> Execution:
        return self.executions.get((workflow, execution), Execution(ExecutionStatus.NOT_STARTED))

    def redrive(self, workflow: str, execution: str) -> None:
        if self.refuse_redrive is not None:
            raise RedriveRefused(self.refuse_redrive)
        current = self.executions.get((workflow, execution))
        if current is None or current.status not in ENDED - {ExecutionStatus.SUCCEEDED}:
            raise RedriveRefused(f"execution {execution} is not redrivable")
        self.redriven.append((workflow, execution))
        self.executions[(workflow, execution)] = Execution(ExecutionStatus.RUNNING, version=current.version)

    def history(self, workflow: str, execution: str, *, children: bool = True) -> ExecutionHistory:
        if self.unavailable:
            raise EngineUnavailable("GetExecutionHistory: ThrottlingException")
        self.history_reads.append((workflow, execution))
        return self.histories.get((workflow, execution), ExecutionHistory())

    def definition(self, workflow: str, execution: str) -> str:
        if self.unavailable or workflow not in self.definitions:
            raise EngineUnavailable("DescribeStateMachine: ThrottlingException")
        return self.definitions[workflow]


@dataclass
class FakeDeadLetters:
    """`DeadLetters` in a list: one letter per (job, step, item), as the table keeps them; `find` is newest first."""

    letters: list[DeadLetter] = field(default_factory=list)
    purged: list[str] = field(default_factory=list)

    def record(self, letter: DeadLetter) -> None:
        self.letters = [
            d for d in self.letters if (d.job_id, d.step, d.item) != (letter.job_id, letter.step, letter.item)
        ]
        self.letters.append(letter)

    def find(
        self, *, step: str | None = None, workflow: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        wanted = {"step": step, "workflow": workflow, "tenant_id": tenant}
        matching = [d for d in self.letters if all(v is None or getattr(d, k) == v for k, v in wanted.items())]
        return sorted(matching, key=lambda d: d.failed_at, reverse=True)[:limit]

    def of_job(self, job_id: str) -> list[DeadLetter]:
        return [d for d in self.letters if d.job_id == job_id]

    def purge(self, job_id: str) -> int:
        removed = self.of_job(job_id)
        self.letters = [d for d in self.letters if d.job_id != job_id]
        self.purged.append(job_id)
        return len(removed)


@dataclass
class FakeTokens:
    """`TaskTokens`: remembers which tokens are waiting; resuming one that is not (spent, timed out) answers False."""

    waiting: set[str] = field(default_factory=set)
    succeeded: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def succeed(self, token: str, output: Mapping[str, Any]) -> bool:
        if token not in self.waiting:
            return False
        self.waiting.discard(token)
        self.succeeded.append((token, dict(output)))
        return True

    def fail(self, token: str, *, error: str, cause: str = "") -> bool:
        if token not in self.waiting:
            return False
        self.waiting.discard(token)
        self.failed.append((token, error))
        return True


@dataclass
class FakeDispatch:
    """`WebhookDispatch`: records the runs it was asked to start (a name starts once)."""

    started: dict[str, tuple[str, str]] = field(default_factory=dict)

    def start(self, webhook_id: str, job_id: str, *, name: str | None = None) -> None:
        self.started.setdefault(name or webhook_id, (webhook_id, job_id))


@dataclass
class FakeIntake:
    """`IntakeQueues` in memory: one list per SLA class; a received message is hidden until deleted or put back."""

    queues: dict[str, list[Waiting]] = field(default_factory=dict)
    hidden: list[Waiting] = field(default_factory=list)
    sent: list[Waiting] = field(default_factory=list)
    _receipts: int = 0

    def send(self, waiting: Waiting) -> None:
        self.sent.append(waiting)
        self.queues.setdefault(waiting.sla_class, []).append(waiting)

    def receive(self, sla_class: str, limit: int) -> list[Waiting]:
        queue = self.queues.get(sla_class, [])
        taken, self.queues[sla_class] = queue[:limit], queue[limit:]
        received = []
        for item in taken:
            self._receipts += 1
            received.append(item._replace(receipt=f"r{self._receipts}"))
        self.hidden += received
        return received

    def delete(self, received: list[Waiting]) -> None:
        gone = {w.receipt for w in received}
        self.hidden = [w for w in self.hidden if w.receipt not in gone]

    def put_back(self, received: list[Waiting]) -> None:
        self.delete(received)
        for item in received:
            self.queues.setdefault(item.sla_class, []).append(item)

    def waiting_ids(self) -> list[str]:
        return [w.job_id for q in self.queues.values() for w in q]


@dataclass
class FakeWake:
    woken: int = 0

    def wake(self) -> None:
        self.woken += 1
