"""Ports: the AWS services a use case needs, as small interfaces. Adapters live in `longhaul.adapters`; tests use
in-memory fakes, so each use case (submission, the runner, replay, the sweep) is tested at the lowest layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from longhaul.core.contracts import DeadLetter, MetricSeries, TraceSpan


class EngineUnavailable(Exception):
    """The workflow engine did not accept a call (throttled, unreachable, refused): the caller may try again."""


class RedriveRefused(Exception):
    """The engine will not redrive this execution; the message says why."""


class ExecutionStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    PENDING_REDRIVE = "PENDING_REDRIVE"
    NOT_STARTED = "NOT_STARTED"  # no execution of that name exists (yet)


class HistoryEvent(NamedTuple):
    """One event of an execution's history: its id, type and the id of the event it follows."""

    id: int
    type: str
    previous_id: int | None = None
    map_run_arn: str | None = None  # a `MapRunStarted` event: the Distributed Map run it started
    resource_type: str | None = None  # a scheduled Task: what it calls (`lambda`, `ecs`, `sqs`, ...)
    state: str | None = None  # a `*StateEntered`/`*StateExited` event: the state's name


@dataclass(frozen=True)
class ExecutionHistory:
    """An execution's whole history, and those of the child executions of its Distributed Map runs."""

    events: list[HistoryEvent] = field(default_factory=list)
    children: list[list[HistoryEvent]] = field(default_factory=list)
    complete: bool = True  # False: a child execution (or the list of them) was not reachable


class Execution(NamedTuple):
    status: ExecutionStatus
    error: str | None = None  # the error the execution ended with (e.g. a Fail state's error name)
    version: str | None = None  # the state machine version it runs (None: the engine has no versions)


class WorkflowEngine(Protocol):
    """Runs one execution per job attempt, named by the job (`<job id>` then `<job id>-r<n>` for replays)."""

    def start(self, workflow: str, execution: str, state: Mapping[str, Any], *, version: str | None = None) -> None:
        """Start it on `version` (a version of the workflow's state machine) or, without one, on the version the
        workflow's alias routes to now; an execution of that name that already exists counts as started.
        `EngineUnavailable`."""

    def has_version(self, workflow: str, version: str) -> bool:
        """Whether that version of the workflow's state machine still exists (operators prune old ones)."""

    def version_of(self, execution_arn: str) -> str | None:
        """The state machine version an execution runs, by the ARN its steps know it by (None: none, or no such
        execution). `EngineUnavailable`."""

    def stop(self, workflow: str, execution: str, *, error: str, cause: str = "") -> None:
        """Stop it if it runs; one that does not exist or has ended is fine. `EngineUnavailable`."""

    def describe(self, workflow: str, execution: str) -> Execution:
        """Its status (`NOT_STARTED` when there is none) and the version it runs."""

    def redrive(self, workflow: str, execution: str) -> None:
        """Redrive a failed execution from where it stopped. `RedriveRefused` with the engine's reason."""

    def history(self, workflow: str, execution: str, *, children: bool = True) -> ExecutionHistory:
        """Its events, all pages, with its Distributed Map children's unless `children` is false (empty when there is
        no such execution). `EngineUnavailable`."""

    def definition(self, workflow: str, execution: str) -> str:
        """The state machine definition (ASL JSON) the execution runs; the workflow's deployed one when there is no
        such execution yet. `EngineUnavailable`."""


class DeadLetters(Protocol):
    """Failed steps for operators: the state machine sends each one to its step's queue; this port indexes, lists
    and removes them."""

    def record(self, letter: DeadLetter) -> None: ...

    def find(
        self, *, step: str | None = None, workflow: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[DeadLetter]: ...

    def of_job(self, job_id: str) -> list[DeadLetter]: ...

    def purge(self, job_id: str) -> int:
        """Remove the job's letters from the index and its messages from the queues; the number of messages."""


class TaskTokens(Protocol):
    """Resumes an execution waiting on a task token (a review). A token that is no longer valid (its wait timed out,
    the execution ended) is not an error: the review lane reads the decision from the store anyway."""

    def succeed(self, token: str, output: Mapping[str, Any]) -> bool:
        """Resume the wait with `output`; False when the token was no longer valid."""

    def fail(self, token: str, *, error: str, cause: str = "") -> bool:
        """End the wait with `error` (an ASL error name); False when the token was no longer valid."""


class WebhookDispatch(Protocol):
    """Starts the delivery of one webhook of the outbox (at most one run per `name`)."""

    def start(self, webhook_id: str, job_id: str, *, name: str | None = None) -> None:
        """Start delivering; a run of that name (default: the webhook id) that exists already counts as started."""


class EventPublisher(Protocol):
    """Puts Longhaul's events on its EventBridge bus (`core.bus`), one at a time: a job's events keep their order."""

    def put(self, detail_type: str, detail: str) -> None:
        """Put one event (`detail`: its JSON text); raises when the bus did not accept it."""


class EventsTap(Protocol):
    """The operators' tap of the bus: a queue a rule sends every Longhaul event to."""

    def take(self, *, limit: int, wait_seconds: int) -> list[dict[str, Any]]:
        """Up to `limit` envelopes in the order the tap holds them, waiting up to `wait_seconds` for the first;
        those answered are removed from the tap."""


class WebhookSecrets(Protocol):
    def signing_secrets(self, tenant_id: str) -> list[str]:
        """The tenant's secrets that sign now: the current one first, then one in its rotation grace period."""


class ContainerTasks(Protocol):
    """The container tasks of container steps (ECS): a job that stops stops its running tasks too. (Stopping a
    state machine execution does not stop the tasks of its `.waitForTaskToken` steps.)"""

    def stop_job_tasks(self, job_id: str, *, reason: str) -> int:
        """Stop the job's running tasks; how many were told to stop. Best effort: `EngineUnavailable`."""


class NoContainerTasks:
    """A deployment without container workers."""

    def stop_job_tasks(self, job_id: str, *, reason: str) -> int:
        return 0


class Waiting(NamedTuple):
    """A job waiting for a slot, as its intake queue carries it (`receipt` identifies the message received,
    `receives` how often that message has been received, this time included)."""

    job_id: str
    tenant_id: str
    sla_class: str
    queued_at: datetime
    receipt: str = ""
    receives: int = 1


class IntakeQueues(Protocol):
    """One queue per SLA class of the jobs waiting for a slot (at least once: a job may come twice)."""

    def send(self, waiting: Waiting) -> None: ...

    def receive(self, sla_class: str, limit: int) -> list[Waiting]:
        """Up to `limit` waiting jobs of the class, hidden from other receivers until deleted or put back (or until
        their hiding time ends: a message neither deleted nor put back is received again later, and after a few
        such receives it goes to the queue's dead letters). Messages that carry no waiting job are left so."""

    def delete(self, received: list[Waiting]) -> None: ...

    def put_back(self, received: list[Waiting]) -> None:
        """Visible again at once, for the next round, as if new: waiting does not count against a message."""


class AdmissionWake(Protocol):
    def wake(self) -> None:
        """Ask the dispatcher for a round soon, without waiting for it."""


class Mailer(Protocol):
    """Sends e-mail from the platform's verified sender (SES). Errors are the typed ones: throttling is
    `TransientError`, a sender the account may not use is `PlatformConfigurationError`, a bad address
    `InvalidInputError`."""

    def send(self, *, to: str, subject: str, body: str, operation_id: str) -> str:
        """Send one plain-text message tagged with the operation it belongs to; the provider's message id."""


class ToolScope(NamedTuple):
    """What one tool call may reach: its job and tenant (their objects and items), the step that calls it and the
    capabilities of that step's tools (`email`, `forget`: the effects it may make)."""

    job_id: str
    tenant_id: str
    step: str
    capabilities: frozenset[str] = frozenset()


class ToolCredentials(NamedTuple):
    """Short-lived AWS credentials of one job's tool calls (an assumed role's), and when they expire."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    expiration: datetime


class ToolCredentialSource(Protocol):
    """Credentials for a tool call, scoped to its job (`ToolScope`): on AWS an STS role assumed with a session policy
    naming the job's prefixes and keys (`longhaul.adapters.tool_credentials`). Errors are the provider's."""

    def credentials(self, scope: ToolScope) -> ToolCredentials: ...


class Alerts(Protocol):
    """Tells the people on call (the stack's alarm topic): an operator's escalation of a job."""

    def publish(self, *, subject: str, message: str, attributes: dict[str, str]) -> None:
        """Publish one notification; errors are the provider's (the caller decides what a failure means)."""


class MetricsRead(NamedTuple):
    """The series of a window, at most the limit asked for; `truncated` when the namespace has more."""

    series: list[MetricSeries]
    truncated: bool = False


class MetricsReader(Protocol):
    """The platform's metrics read back (CloudWatch): a series per metric, a metric being its name and its whole
    dimension set, each aggregated over the window. The work is bounded by the number of metrics (the emitters'
    dimensions are bounded), never by the data points in the window."""

    def series(self, start: datetime, end: datetime, *, name: str | None = None, limit: int) -> MetricsRead:
        """Every series of the namespace (or only metric `name`) with data in [start, end], at most `limit`, in
        order of name and dimensions."""


class TraceReader(Protocol):
    """A job's spans read back by its trace id (32 hex): the local runtime's span store, or X-Ray on AWS."""

    def spans(self, trace_id: str) -> list[TraceSpan]: ...


class BatchJobs(Protocol):
    """Bedrock's batch inference (`bedrock` control plane)."""

    def submit(
        self, *, name: str, model_id: str, role_arn: str, input_uri: str, output_uri: str, client_token: str
    ) -> str:
        """Create the job (idempotent by `client_token`); its ARN."""

    def status(self, arn: str) -> str:
        """Its status (`Submitted`, `InProgress`, `Completed`, …)."""

    def stop(self, arn: str) -> None:
        """Stop it (a job already ended is not an error)."""


class WiringRefused(Exception):
    """AWS refused a schedule or rule for a reason of the request's (`field`: the body field it is about)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


class WiringUnavailable(Exception):
    """AWS did not create, change or delete a schedule or rule now (throttled, an outage): worth a retry."""


class TriggerWiring(Protocol):
    """Where schedules and triggers live on AWS: EventBridge Scheduler schedules (a group per tenant) and one-time
    timers, and EventBridge rules; each invokes `target` (the function that starts their jobs) with `payload`."""

    def put_schedule(
        self,
        tenant_id: str,
        name: str,
        *,
        expression: str,
        timezone: str,
        enabled: bool,
        target: str,
        payload: Mapping[str, Any],
    ) -> None: ...

    def delete_schedule(self, tenant_id: str, name: str) -> None: ...

    def put_timer(
        self, tenant_id: str, name: str, *, at: datetime, target: str, payload: Mapping[str, Any]
    ) -> None: ...

    def put_rule(
        self, name: str, *, bus: str, pattern: Mapping[str, Any], enabled: bool, target: str, payload: Mapping[str, Any]
    ) -> None: ...

    def delete_rule(self, name: str, *, bus: str) -> None: ...
