"""The composition root: which adapter serves each port and store, built once per process from the settings.
`Services` is what every use case and step receives; tests build one from fakes.

May import: documents, adapters, storage, core."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from longhaul.adapters import aws
from longhaul.adapters.alerts import SnsAlerts
from longhaul.adapters.dead_letters import QueueDeadLetters
from longhaul.adapters.ecs import EcsContainerTasks
from longhaul.adapters.email import SesMailer
from longhaul.adapters.eventbridge import EventBridgePublisher, SqsEventsTap
from longhaul.adapters.intake import LambdaWake, SqsIntakeQueues
from longhaul.adapters.secrets import SecretsManagerWebhookSecrets
from longhaul.adapters.stepfunctions import StepFunctionsDispatch, StepFunctionsEngine, StepFunctionsTokens
from longhaul.core.clock import Clock
from longhaul.core.observability import logger
from longhaul.core.ports import (
    AdmissionWake,
    Alerts,
    BatchJobs,
    ContainerTasks,
    DeadLetters,
    EventsTap,
    IntakeQueues,
    Mailer,
    MetricsReader,
    NoContainerTasks,
    TaskTokens,
    ToolCredentials,
    ToolCredentialSource,
    ToolScope,
    TraceReader,
    TriggerWiring,
    WebhookDispatch,
    WebhookSecrets,
    WorkflowEngine,
)
from longhaul.core.records import Job, OutboxRecord, SagaRecord
from longhaul.core.settings import Settings, environ, get_settings, invocation_credentials
from longhaul.storage.admission import AdmissionStore
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.budgets import BudgetStore
from longhaul.storage.bus import BusOutbox
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.history import HistoryStore, RecentHistory
from longhaul.storage.jobs import JobStore
from longhaul.storage.outbox import OutboxStore
from longhaul.storage.reviews import ReviewStore
from longhaul.storage.usage import UsageStore

if TYPE_CHECKING:  # what only some functions use: imported where it is built, on first use
    from longhaul.core.llm import ModelGateway
    from longhaul.core.routes import Route, Routing
    from longhaul.storage.analytics import AnalyticsStore
    from longhaul.storage.audit import AuditStore
    from longhaul.storage.breakers import BreakerStore
    from longhaul.storage.effects import EffectStore
    from longhaul.storage.memory import MemoryStore
    from longhaul.storage.route_limits import RouteLimiter
    from longhaul.storage.streams import StreamStore
    from longhaul.storage.tenants import TenantStore
    from longhaul.storage.triggers import TriggerStore


@dataclass(frozen=True)
class Services:
    settings: Settings
    jobs: JobStore
    checkpoints: CheckpointStore
    artifacts: ArtifactStore
    engine: WorkflowEngine
    dead_letters: DeadLetters
    tokens: TaskTokens | None = None
    dispatch: WebhookDispatch | None = None
    webhook_secrets: WebhookSecrets | None = None
    container_tasks: ContainerTasks = field(default_factory=NoContainerTasks)
    intake: IntakeQueues | None = None  # None: no admission control, every job starts at once
    wake: AdmissionWake | None = None
    mailer: Mailer | None = None  # None: no e-mail sender configured (a tool that sends e-mail refuses)
    batch_jobs: BatchJobs | None = None  # Bedrock's batch inference jobs (the batch lane)
    alerts: Alerts | None = None  # the alarm topic (None: not configured; an escalation is only recorded)
    # Where a tool call's job-scoped credentials come from (None: no tool role, tools run with these services).
    tool_credentials: ToolCredentialSource | None = None
    # The access key these services sign with when they are a tool call's (`for_tool`); None: the function's own.
    signed_as: str | None = None
    bus: BusOutbox | None = None  # the EventBridge bus's outbox (None: no bus configured, no event is put)
    events_tap: EventsTap | None = None  # the operators' tap of the bus (the operators' function only)

    def now(self) -> datetime:
        return self.jobs.clock.now()

    @property
    def reviews(self) -> ReviewStore:
        return ReviewStore(self.jobs.table, clock=self.jobs.clock, retention_days=self.settings.review_retention_days)

    @property
    def outbox(self) -> OutboxStore:
        return OutboxStore(self.jobs.table, clock=self.jobs.clock)

    @property
    def effects(self) -> EffectStore:
        from longhaul.storage.effects import EffectStore

        return EffectStore(self.jobs.table, clock=self.jobs.clock)

    @property
    def tenants(self) -> TenantStore:
        from longhaul.storage.tenants import TenantStore

        return TenantStore(self.jobs.table, clock=self.jobs.clock)

    @property
    def triggers(self) -> TriggerStore:
        """The tenants' schedules and triggers, and the S3 inboxes' batch windows."""
        from longhaul.storage.triggers import TriggerStore

        return TriggerStore(self.jobs.table, clock=self.jobs.clock)

    @cached_property
    def trigger_wiring(self) -> TriggerWiring:
        """EventBridge Scheduler and EventBridge rules, where schedules and triggers live on AWS."""
        from longhaul.adapters.triggers import AwsTriggerWiring

        s = self.settings
        return AwsTriggerWiring(
            aws.lazy_client("scheduler"),
            aws.lazy_client("events"),
            prefix=s.trigger_prefix,
            role_arn=s.scheduler_role or "",
        )

    @property
    def memory(self) -> MemoryStore:
        from longhaul.storage.memory import MemoryStore

        return MemoryStore(self.jobs.table, clock=self.jobs.clock, retention_days=self.settings.memory_retention_days)

    def gateway(self) -> ModelGateway:
        """The adapter of the `default` route (steps call models through `StepContext.model()`)."""
        from longhaul.core.routes import DEFAULT_ROUTE

        return _adapter(self.routing[DEFAULT_ROUTE])

    def adapter(self, route: str) -> ModelGateway:
        """A route's adapter; the default route's is `gateway()`, so replacing that one replaces the default model."""
        from longhaul.core.routes import DEFAULT_ROUTE

        return self.gateway() if route == DEFAULT_ROUTE else _adapter(self.routing[route])

    # The stores below share the table and the clock of the job store; built on first use (and the modules of those
    # only some functions use, imported then).
    @cached_property
    def streams(self) -> StreamStore:
        """The jobs' live output (coalesced model text, short-lived): apart from the event log."""
        from longhaul.storage.streams import StreamStore

        return StreamStore(self.jobs.table, clock=self.jobs.clock)

    @cached_property
    def audit(self) -> AuditStore:
        """The audit trail (its hash chain of operators', administrators' and reviewers' actions)."""
        from longhaul.storage.audit import AuditStore

        return AuditStore(self.jobs.table, clock=self.jobs.clock, retention_days=self.settings.audit_retention_days)

    @cached_property
    def budgets(self) -> BudgetStore:
        return BudgetStore(self.jobs.table, clock=self.jobs.clock)

    @cached_property
    def history(self) -> HistoryStore:
        return HistoryStore(self.jobs.table, clock=self.jobs.clock)

    @cached_property
    def recent_history(self) -> RecentHistory:
        """The workflows' histories as submissions read them: kept a few seconds in the function."""
        return RecentHistory(self.history)

    @cached_property
    def admission(self) -> AdmissionStore:
        return AdmissionStore(self.jobs.table, clock=self.jobs.clock)

    @cached_property
    def usage(self) -> UsageStore:
        return UsageStore(self.jobs.table)

    @cached_property
    def route_limits(self) -> RouteLimiter:
        """The shared per-route limits (`requests_per_minute`, `tokens_per_minute`), counted in the table."""
        from longhaul.storage.route_limits import RouteLimiter

        # Real waits, also locally: the slots are of the clock's time, which the local time scale does not speed up.
        return RouteLimiter(
            self.jobs.table, clock=self.jobs.clock, max_wait_seconds=self.settings.route_limit_wait_seconds
        )

    @cached_property
    def breakers(self) -> BreakerStore:
        from longhaul.storage.breakers import BreakerPolicy, BreakerStore

        s = self.settings
        policy = BreakerPolicy(
            failures=s.breaker_failures,
            window=timedelta(seconds=s.breaker_window_seconds),
            cooldown=timedelta(seconds=s.breaker_cooldown_seconds),
        )
        return BreakerStore(self.jobs.table, clock=self.jobs.clock, policy=policy)

    @cached_property
    def analytics(self) -> AnalyticsStore:
        """The analytics export's objects, the day files, its watermark (`longhaul.operations.analytics`)."""
        from longhaul.storage.analytics import AnalyticsStore

        database = self.settings.analytics_database
        glue = aws.client("glue") if database else None
        return AnalyticsStore(self.jobs.table, self.artifacts.s3, self.artifacts.bucket, glue=glue, database=database)

    @cached_property
    def metrics(self) -> MetricsReader:
        """The platform's CloudWatch metrics, read back (the operators' metrics route)."""
        from longhaul.adapters.metrics import CloudWatchMetrics

        return CloudWatchMetrics(aws.client("cloudwatch"))

    @cached_property
    def traces(self) -> TraceReader:
        """The jobs' spans read back: the local runtime's span store, else X-Ray."""
        from longhaul.adapters.traces import XRayTraces
        from longhaul.core import tracing

        local = tracing.installed_reader()
        return local if local is not None else XRayTraces(aws.client("xray"))

    @cached_property
    def routing(self) -> Routing:
        from longhaul.core.routes import Routing

        s = self.settings
        return Routing.configured(
            s.model_routes, s.step_routes, provider=s.model_provider, model_id=s.model_id, classes=s.class_routes
        )


@lru_cache(maxsize=16)
def _adapter(route: Route) -> ModelGateway:
    from longhaul.adapters.models import adapter_for  # the model adapters are for the model steps only

    return adapter_for(route)


# By id of the (cached, immutable) settings, which a Services keeps alive, and the credentials its clients sign with
# (locally, functions with the same settings run under different roles).
_built: dict[tuple[int, tuple[str, str, str] | None], Services] = {}
_lock = threading.Lock()


def _services(settings: Settings) -> Services:
    key = (id(settings), invocation_credentials())
    with _lock:
        if key not in _built:
            _built[key] = _build(settings)
        return _built[key]


def clear() -> None:
    """Forget the built adapters (tests that switch AWS mocks)."""
    with _lock:
        _built.clear()
        _for_tools.clear()
    _adapter.cache_clear()


def _relay(dispatch: WebhookDispatch | None) -> Callable[[OutboxRecord], None] | None:
    """Start a webhook's delivery as soon as its transaction committed (the sweep starts any this missed)."""
    if dispatch is None:
        return None

    def relay(webhook: OutboxRecord) -> None:
        dispatch.start(webhook.webhook_id, webhook.job_id)
        logger.info("webhook queued", extra={"webhook_id": webhook.webhook_id, "event": webhook.event})

    return relay


def _wake_on_release(wake: AdmissionWake | None) -> Callable[[Job], None] | None:
    """A freed slot wakes the dispatcher at once (its schedule hands out any slot this missed)."""
    return (lambda _job: wake.wake()) if wake is not None else None


def _wake_on_saga(wake: AdmissionWake | None) -> Callable[[SagaRecord], None] | None:
    """A saga written wakes the dispatcher, which starts its compensation execution (its schedule starts any missed)."""
    return (lambda _saga: wake.wake()) if wake is not None else None


def _tell_finished(built: Services) -> Callable[[Job], None]:
    """A finished child resumes its parent's wait; a completed job submits the job its `then` chains. The use case is
    the API's (`longhaul.api.children`, which submits through the admission path), imported by name on first use as a
    spec's step bodies are: this composition root sits below the API."""

    def finished(job: Job) -> None:
        import importlib

        importlib.import_module("longhaul.api.children").job_finished(built, job)

    return finished


# A tool call's services by the access key they sign with (kept while a job's credentials are, see `for_tool`).
_for_tools: OrderedDict[str, Services] = OrderedDict()
TOOL_SERVICES_KEPT = 64


def for_tool(services: Services, scope: ToolScope) -> Services:
    """The services a tool call of `scope` runs with: every client signed with the job's own credentials (the tool
    role assumed with a session policy scoped to the job, `adapters.tool_credentials`), the clock of `services`.
    Without a tool role (`LONGHAUL_TOOL_ROLE` unset: unit tests' fakes), `services` itself."""
    source = services.tool_credentials
    if source is None:
        return services
    credentials = source.credentials(scope)
    with _lock:
        found = _for_tools.get(credentials.access_key_id)
        if found is not None:
            _for_tools.move_to_end(credentials.access_key_id)
            return found
    built = _scoped(services, credentials)
    with _lock:
        _for_tools[credentials.access_key_id] = built
        while len(_for_tools) > TOOL_SERVICES_KEPT:
            _for_tools.popitem(last=False)
    return built


def _scoped(services: Services, credentials: ToolCredentials) -> Services:
    clients = aws.SessionClients(
        aws.tool_session(credentials.access_key_id, credentials.secret_access_key, credentials.session_token)
    )
    built = _build(
        services.settings, client=clients.client, table=clients.table, clock=services.jobs.clock, tool_call=True
    )
    return dataclasses.replace(built, signed_as=credentials.access_key_id)


def _tool_credentials(settings: Settings, client: Callable[..., object]) -> ToolCredentialSource | None:
    if not settings.tool_role:
        return None
    from longhaul.adapters.tool_credentials import AssumedToolRole

    return AssumedToolRole(
        client("sts"),
        settings.tool_role,
        bucket=settings.bucket_name,
        table_name=settings.table_name,
        region=environ().get("AWS_REGION") or aws.region(),
        email_sender=settings.email_sender,
    )


def _build(
    settings: Settings,
    *,
    client: Callable[..., Any] = aws.lazy_client,
    table: Callable[[str], Any] | None = None,
    clock: Clock | None = None,
    tool_call: bool = False,
) -> Services:
    """Every adapter, each client built when first used (`aws.lazy_client`): a request pays only for the services it
    calls. A tool call's services (`for_tool`) are built the same way from its own session's clients."""
    s3 = client("s3")
    presign = client("s3", settings.s3_public_endpoint) if settings.s3_public_endpoint else s3
    table = (table or aws.dynamodb_table)(settings.table_name)
    stepfunctions = client("stepfunctions")
    dispatch = StepFunctionsDispatch(stepfunctions, settings.webhook_delivery) if settings.webhook_delivery else None
    wake = LambdaWake(client("lambda"), settings.admission_dispatcher) if settings.admission_dispatcher else None
    tools = None if tool_call else _tool_credentials(settings, client)  # a tool's services assume no role
    bus = BusOutbox(table, EventBridgePublisher(client("events"), settings.event_bus)) if settings.event_bus else None
    built = Services(
        settings=settings,
        jobs=JobStore(
            table,
            clock=clock,
            on_outbox=_relay(dispatch),
            on_release=_wake_on_release(wake),
            on_saga=_wake_on_saga(wake),
            on_bus=bus.drain if bus is not None else None,
        ),
        checkpoints=CheckpointStore(table),
        artifacts=ArtifactStore(s3, settings.bucket_name, presign_client=presign),
        engine=StepFunctionsEngine(stepfunctions, settings.workflows),
        dead_letters=QueueDeadLetters(table, client("sqs"), settings.dead_letter_queues),
        tokens=StepFunctionsTokens(stepfunctions),
        dispatch=dispatch,
        webhook_secrets=SecretsManagerWebhookSecrets(client("secretsmanager"), settings.webhook_secrets_prefix),
        container_tasks=(
            EcsContainerTasks(client("ecs"), settings.container_cluster)
            if settings.container_cluster
            else NoContainerTasks()
        ),
        intake=SqsIntakeQueues(client("sqs"), settings.intake_queues) if settings.intake_queues else None,
        wake=wake,
        mailer=SesMailer(client("sesv2"), settings.email_sender) if settings.email_sender else None,
        batch_jobs=_batch_jobs(client("bedrock")) if settings.batch_role else None,
        alerts=SnsAlerts(client("sns"), settings.alarm_topic) if settings.alarm_topic else None,
        tool_credentials=tools,
        bus=bus,
        events_tap=SqsEventsTap(client("sqs"), settings.events_tap) if settings.events_tap else None,
    )
    built.jobs.on_finished = _tell_finished(built)
    return built


def _batch_jobs(client: object) -> BatchJobs:
    from longhaul.adapters.batch_jobs import BedrockBatchJobs

    return BedrockBatchJobs(client)


def services() -> Services:
    return _services(get_settings())
