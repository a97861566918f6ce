"""Configuration is a model: environment variables are parsed once into `Settings`.

The CDK constructs set the same variables from the `Env` constants, so a missing variable fails at start-up
with its name. The local runtime runs many functions in one process and must never mutate `os.environ`
per invocation; it gives each invocation its function's environment through `function_environment`.
"""

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from longhaul.core import limits
from longhaul.core.model import Model


class Env:
    """Names of the environment variables, shared by the CDK app and the functions. Each has a `#:` comment: the
    manual's settings reference renders it (with the `Settings` field's type and default)."""

    #: The DynamoDB table of jobs, events, checkpoints, reviews, keys and budgets.
    TABLE = "LONGHAUL_TABLE"
    #: The S3 bucket of inputs, uploads, checkpoints' payloads, results and kept prompts.
    BUCKET = "LONGHAUL_BUCKET"
    #: JSON `{"workflow": ARN}`: the state machine (its `live` alias) each workflow's jobs start through.
    WORKFLOWS = "LONGHAUL_WORKFLOWS"
    #: The model provider of the default route: `offline` (deterministic, no model) or `bedrock`.
    MODEL_PROVIDER = "LONGHAUL_MODEL_PROVIDER"
    #: The model of the default route (a Bedrock model or inference profile id, or the offline model's name).
    MODEL_ID = "LONGHAUL_MODEL_ID"
    #: The largest request body the API accepts (bytes); larger ones are a 413.
    MAX_BODY_BYTES = "LONGHAUL_MAX_BODY_BYTES"
    #: The S3 endpoint presigned upload URLs name (the local platform's in-memory S3); unset on AWS.
    S3_PUBLIC_ENDPOINT = "LONGHAUL_S3_PUBLIC_ENDPOINT"
    #: The deployment stage (part of the stack's name, shown by `GET /v1/health`).
    STAGE = "LONGHAUL_STAGE"
    #: What produced an output: the code asset's hash (the build's version), recorded on checkpoints and model calls.
    CODE_VERSION = "LONGHAUL_CODE_VERSION"
    #: JSON `{"workflow": {"step": queue URL}}`: each fan-out step's dead-letter queue.
    DEAD_LETTER_QUEUES = "LONGHAUL_DEAD_LETTER_QUEUES"
    #: Document analysis: the bound on OCR and indexing together (`plan_ocr`, `ocr_pages`, `build_index`: one
    #: segment), in seconds; read when the state machines are synthesized (default 1200).
    OCR_INDEX_SEGMENT_SECONDS = "LONGHAUL_OCR_INDEX_SEGMENT_SECONDS"
    #: How long a running job may go without an event before the sweep reports it stuck (minutes).
    STUCK_AFTER_MINUTES = "LONGHAUL_STUCK_AFTER_MINUTES"
    #: The review-wait alarm's limit (minutes): it fires when the median (p50) time a workflow's reviews waited for a
    #: decision, over an hour, is above it. Read by the stack (`-c longhaul:review_wait_alarm_minutes=…`).
    REVIEW_WAIT_ALARM_MINUTES = "LONGHAUL_REVIEW_WAIT_ALARM_MINUTES"
    #: JSON `{"route": {"provider", "model_id", "base_url"?, "api_key_env"?, "api_key_secret"?, "fallback"?,
    #: "stronger"?, "service_tier"?: {"class": "priority" | "default" | "flex"}, "requests_per_minute"?,
    #: "tokens_per_minute"?}}`: the model routes by name; empty: one route `default` of the provider and model above.
    MODEL_ROUTES = "LONGHAUL_MODEL_ROUTES"
    #: JSON `{"step": "route"}`: the route each model step calls.
    STEP_ROUTES = "LONGHAUL_STEP_ROUTES"
    #: JSON `{"interactive": "route", "standard": …, "batch": …}`: the route of a model step by the job's SLA class,
    #: when neither the job nor the step names one (`-c longhaul:class_routes` on AWS).
    CLASS_ROUTES = "LONGHAUL_CLASS_ROUTES"
    #: Shared route limits: how long a call waits inside its step for room under its route's
    #: `requests_per_minute`/`tokens_per_minute` before the step fails `rate-limited` (the Task retries it later).
    ROUTE_LIMIT_WAIT_SECONDS = "LONGHAUL_ROUTE_LIMIT_WAIT_SECONDS"
    #: How long an MCP `tools/call` of a workflow waits for its job before answering the job's id and status (the
    #: result if it finished); a call's `wait_seconds` overrides it (0-20 s).
    MCP_WAIT_SECONDS = "LONGHAUL_MCP_WAIT_SECONDS"
    #: JSON `{"model id": {"input": "3.00", "output": "15.00"}}` (USD per million tokens): overrides rows of the
    #: built-in price table.
    MODEL_PRICES = "LONGHAUL_MODEL_PRICES"
    #: Failures within the window that open a route's circuit breaker.
    BREAKER_FAILURES = "LONGHAUL_BREAKER_FAILURES"
    #: The window the breaker counts failures in (seconds).
    BREAKER_WINDOW_SECONDS = "LONGHAUL_BREAKER_WINDOW_SECONDS"
    #: How long an open breaker skips its route before trying it again (seconds).
    BREAKER_COOLDOWN_SECONDS = "LONGHAUL_BREAKER_COOLDOWN_SECONDS"
    #: Local platform: JSON `{"tenant": {…policy fields}}` seeded into the tenants' budget policies at start.
    TENANT_POLICIES = "LONGHAUL_TENANT_POLICIES"
    #: Origins (`http://127.0.0.1:9000`, comma-separated) whose callbacks skip the address checks and may use http.
    CALLBACK_ALLOWLIST = "LONGHAUL_CALLBACK_ALLOWLIST"
    #: The webhook delivery state machine's ARN (unset: webhooks are not delivered).
    WEBHOOK_DELIVERY = "LONGHAUL_WEBHOOK_DELIVERY"
    #: The stack's EventBridge bus (its name): every job status change, review request and decision is put on it
    #: (unset: no events are put).
    EVENT_BUS = "LONGHAUL_EVENT_BUS"
    #: The largest result (bytes) `GET /v1/jobs/{id}/result` answers in its body; a larger one is answered by
    #: reference to its download (303 to a presigned URL). Below a Lambda response's 6 MB and API Gateway's 10 MB.
    RESULT_INLINE_MAX_BYTES = "LONGHAUL_RESULT_INLINE_MAX_BYTES"
    #: The longest a result's download URL may live (seconds), whatever a tenant's policy says (at most 7 days).
    MAX_DOWNLOAD_TTL_SECONDS = "LONGHAUL_MAX_DOWNLOAD_TTL_SECONDS"
    #: The operators' tap of the bus (an SQS queue URL): `GET /v1/ops/events` reads the events a rule sends to it.
    EVENTS_TAP = "LONGHAUL_EVENTS_TAP"
    #: Schedules and triggers: the role EventBridge Scheduler assumes to invoke the function that starts their jobs
    #: (unset: schedules and batch windows cannot be created).
    SCHEDULER_ROLE = "LONGHAUL_SCHEDULER_ROLE"
    #: Schedules and triggers: the prefix of their schedule groups and rules (the stack's name), which the API
    #: function's grants are scoped to.
    TRIGGER_PREFIX = "LONGHAUL_TRIGGER_PREFIX"
    #: The Secrets Manager prefix under which each tenant's webhook signing secret is kept.
    WEBHOOK_SECRETS_PREFIX = "LONGHAUL_WEBHOOK_SECRETS_PREFIX"
    #: Container steps (ECS): the cluster whose tasks a cancellation stops.
    CONTAINER_CLUSTER = "LONGHAUL_CONTAINER_CLUSTER"
    #: A container worker task's Step Functions task token (set per task by the state machine).
    TASK_TOKEN = "LONGHAUL_TASK_TOKEN"
    #: A container worker task's step event (JSON, set per task by the state machine).
    STEP_EVENT = "LONGHAUL_STEP_EVENT"
    #: A container worker task's attempt number (set per task by the state machine).
    STEP_ATTEMPT = "LONGHAUL_STEP_ATTEMPT"
    #: How often a container worker sends its heartbeat (seconds; default 30).
    HEARTBEAT_SECONDS = "LONGHAUL_HEARTBEAT_SECONDS"
    #: Admission: JSON `{"interactive": queue URL, "standard": …, "batch": …}`, the intake queue of each SLA class;
    #: empty: no admission control (every job starts at once).
    INTAKE_QUEUES = "LONGHAUL_INTAKE_QUEUES"
    #: Admission: the platform's jobs in flight at most (beyond each tenant's own limit).
    MAX_JOBS_IN_FLIGHT = "LONGHAUL_MAX_JOBS_IN_FLIGHT"
    #: Admission: the dispatcher function to wake when a slot frees.
    ADMISSION_DISPATCHER = "LONGHAUL_ADMISSION_DISPATCHER"
    #: A container worker's task CPU units (default 2048): what its time costs.
    TASK_CPU = "LONGHAUL_TASK_CPU"
    #: A container worker's task memory in MB (default 4096): what its time costs.
    TASK_MEMORY_MB = "LONGHAUL_TASK_MEMORY_MB"
    #: Local platform only: the fault one worker task plays (see `LONGHAUL_FAULTS`).
    INJECT_FAULT = "LONGHAUL_INJECT_FAULT"
    #: The OIDC issuer whose JWTs the API's authorizer accepts beside API keys (the token's `iss`): the stack's Cognito
    #: user pool, or `-c longhaul:oidc_issuer=…`; locally the front door's own issuer. Empty: API keys only.
    OIDC_ISSUER = "LONGHAUL_OIDC_ISSUER"
    #: The audience a JWT must name in its `aud` (Cognito: the app client's id; `-c longhaul:oidc_audience=…`).
    OIDC_AUDIENCE = "LONGHAUL_OIDC_AUDIENCE"
    #: Where the issuer's signing keys are (a JWKS document); empty: `<issuer>/.well-known/jwks.json`.
    OIDC_JWKS_URL = "LONGHAUL_OIDC_JWKS_URL"
    #: The JWT claim that names the caller's tenant (Cognito: the user's custom attribute `tenant`).
    OIDC_TENANT_CLAIM = "LONGHAUL_OIDC_TENANT_CLAIM"
    #: The JWT claim that names the caller's role: `tenant` (when absent), `reviewer` or `operator`.
    OIDC_ROLE_CLAIM = "LONGHAUL_OIDC_ROLE_CLAIM"
    #: The JWT claim that names a reviewer's groups (a list, or names separated by commas or spaces; Cognito: the
    #: user's groups). A reviewer whose token has none reviews every group of its tenant.
    OIDC_GROUPS_CLAIM = "LONGHAUL_OIDC_GROUPS_CLAIM"
    #: The verified SES identity that agents' e-mail tools send from.
    EMAIL_SENDER = "LONGHAUL_EMAIL_SENDER"
    #: The stack's alarm SNS topic (ARN): an operator's escalation of a job is published to it (unset: not published).
    ALARM_TOPIC = "LONGHAUL_ALARM_TOPIC"
    #: The analytics export: the Glue database whose tables it registers each new partition in (unset: none is).
    ANALYTICS_DATABASE = "LONGHAUL_ANALYTICS_DATABASE"
    #: Where the web console links to the manual: the address of the built manual (`make docs-site`'s `site/`,
    #: wherever it is published), or a path on the API's own origin; empty: the console shows no links to it. The
    #: local platform serves the built manual at `/manual/` and links there.
    MANUAL_URL = "LONGHAUL_MANUAL_URL"
    #: The batch lane: the service role Bedrock's batch inference jobs run with (it reads and writes the artifacts
    #: bucket's `work/` prefix); unset: every model call is made on demand.
    BATCH_ROLE = "LONGHAUL_BATCH_ROLE"
    #: The batch lane: a step with fewer records calls on demand (Bedrock's quota "Minimum number of records per batch
    #: inference job", per model; default 100).
    BATCH_MIN_RECORDS = "LONGHAUL_BATCH_MIN_RECORDS"
    #: The batch lane: the most records one batch holds (Bedrock's "Records per input file per batch inference job";
    #: default 50,000); a step with more calls on demand.
    BATCH_MAX_RECORDS = "LONGHAUL_BATCH_MAX_RECORDS"
    #: The batch lane: batch jobs of one model in progress at most (Bedrock's "Sum of in-progress and submitted batch
    #: inference jobs using a base model"; default 20); a step that would exceed it calls on demand.
    BATCH_JOBS_IN_PROGRESS = "LONGHAUL_BATCH_JOBS_IN_PROGRESS"
    #: The batch lane: a step whose job's deadline is nearer than this (seconds; default 3600) calls on demand.
    BATCH_MIN_WINDOW_SECONDS = "LONGHAUL_BATCH_MIN_WINDOW_SECONDS"
    #: The batch lane: a batch still running this long (seconds; default 900) before its job's deadline is stopped and
    #: the rest of its records called on demand.
    BATCH_RESERVE_SECONDS = "LONGHAUL_BATCH_RESERVE_SECONDS"
    #: Retention: days a review's record is kept after it opened (DynamoDB TTL set as it is written); a job's erasure
    #: removes its reviews sooner. 0: kept as long as its job.
    REVIEW_RETENTION_DAYS = "LONGHAUL_REVIEW_RETENTION_DAYS"
    #: Retention: days a tenant's memory (episodes and facts) is kept after it was recorded (DynamoDB TTL set as it
    #: is written); a job's erasure removes the memory derived from it sooner. 0: kept until deleted.
    MEMORY_RETENTION_DAYS = "LONGHAUL_MEMORY_RETENTION_DAYS"
    #: Retention: days an audit trail entry is kept (DynamoDB TTL set as it is appended; the trail then starts after
    #: seq 1, which `longhaul ops audit verify` reports). 0: kept forever.
    AUDIT_RETENTION_DAYS = "LONGHAUL_AUDIT_RETENTION_DAYS"
    #: Agents' tools: the role a tool call assumes (STS, 900 s) with a session policy scoped to its job (its tenant's
    #: and job's objects and items, the effects its step's tools may make); unset: tools run with the function's role.
    TOOL_ROLE = "LONGHAUL_TOOL_ROLE"


class Settings(Model):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    table_name: str = Field(alias=Env.TABLE, min_length=1)
    bucket_name: str = Field(alias=Env.BUCKET, min_length=1)
    # {"workflow": the ARN its jobs start through: the state machine's `live` alias (or the machine itself)}
    workflows: dict[str, str] = Field(default_factory=dict, alias=Env.WORKFLOWS)
    model_provider: Literal["offline", "bedrock"] = Field(default="offline", alias=Env.MODEL_PROVIDER)
    model_id: str = Field(default="longhaul-offline-extractive-1", alias=Env.MODEL_ID)
    max_body_bytes: int = Field(default=1_048_576, alias=Env.MAX_BODY_BYTES, gt=0)
    s3_public_endpoint: str | None = Field(default=None, alias=Env.S3_PUBLIC_ENDPOINT)
    stage: str = Field(default="dev", alias=Env.STAGE)
    code_version: str = Field(default="unversioned", alias=Env.CODE_VERSION, min_length=1)
    # {"workflow": {"step": queue URL}}
    dead_letter_queues: dict[str, dict[str, str]] = Field(default_factory=dict, alias=Env.DEAD_LETTER_QUEUES)
    stuck_after_minutes: int = Field(default=15, alias=Env.STUCK_AFTER_MINUTES, gt=0)
    review_retention_days: int = Field(default=90, alias=Env.REVIEW_RETENTION_DAYS, ge=0, le=limits.RETENTION_DAYS_MAX)
    memory_retention_days: int = Field(default=365, alias=Env.MEMORY_RETENTION_DAYS, ge=0, le=limits.RETENTION_DAYS_MAX)
    audit_retention_days: int = Field(default=2555, alias=Env.AUDIT_RETENTION_DAYS, ge=0, le=limits.RETENTION_DAYS_MAX)
    review_wait_alarm_minutes: int = Field(default=240, alias=Env.REVIEW_WAIT_ALARM_MINUTES, gt=0)
    ocr_index_segment_seconds: int = Field(
        default=limits.OCR_INDEX_SEGMENT_SECONDS, alias=Env.OCR_INDEX_SEGMENT_SECONDS, gt=0
    )
    # {"route": {"provider", "model_id", "base_url"?, "api_key_env"?, "api_key_secret"?, "fallback"?, "stronger"?}};
    # empty: one route `default` of `model_provider`/`model_id`.
    model_routes: dict[str, dict[str, Any]] = Field(default_factory=dict, alias=Env.MODEL_ROUTES)
    step_routes: dict[str, str] = Field(default_factory=dict, alias=Env.STEP_ROUTES)  # {"step": "route"}
    class_routes: dict[str, str] = Field(default_factory=dict, alias=Env.CLASS_ROUTES)  # {"sla class": "route"}
    route_limit_wait_seconds: float = Field(default=20, ge=0, le=600, alias=Env.ROUTE_LIMIT_WAIT_SECONDS)
    mcp_wait_seconds: float = Field(default=5, ge=0, le=20, alias=Env.MCP_WAIT_SECONDS)
    model_prices: dict[str, dict[str, str]] = Field(default_factory=dict, alias=Env.MODEL_PRICES)
    breaker_failures: int = Field(default=5, alias=Env.BREAKER_FAILURES, gt=0)
    breaker_window_seconds: int = Field(default=60, alias=Env.BREAKER_WINDOW_SECONDS, gt=0)
    breaker_cooldown_seconds: int = Field(default=30, alias=Env.BREAKER_COOLDOWN_SECONDS, gt=0)
    # Origins (`http://127.0.0.1:9000`) whose callbacks skip the address checks and may use plain http.
    callback_allowlist: frozenset[str] = Field(default=frozenset(), alias=Env.CALLBACK_ALLOWLIST)
    webhook_delivery: str | None = Field(default=None, alias=Env.WEBHOOK_DELIVERY)  # state machine ARN
    webhook_secrets_prefix: str = Field(default="longhaul/webhooks/", alias=Env.WEBHOOK_SECRETS_PREFIX)
    event_bus: str | None = Field(default=None, alias=Env.EVENT_BUS)  # the bus's name
    events_tap: str | None = Field(default=None, alias=Env.EVENTS_TAP)  # queue URL (the operators' function only)
    result_inline_max_bytes: int = Field(
        default=limits.RESULT_INLINE_MAX_BYTES,
        alias=Env.RESULT_INLINE_MAX_BYTES,
        gt=0,
        le=limits.RESULT_INLINE_MAX_BYTES,
    )
    max_download_ttl_seconds: int = Field(
        default=12 * 3600, alias=Env.MAX_DOWNLOAD_TTL_SECONDS, gt=0, le=limits.MAX_DOWNLOAD_TTL_SECONDS
    )
    scheduler_role: str | None = Field(default=None, alias=Env.SCHEDULER_ROLE)  # role ARN
    trigger_prefix: str = Field(default="longhaul", alias=Env.TRIGGER_PREFIX, min_length=1, max_length=32)

    @field_validator("callback_allowlist", mode="before")
    @classmethod
    def _parse_allowlist(cls, value: object) -> object:
        from longhaul.core.addresses import parse_allowlist

        return parse_allowlist(value) if isinstance(value, str) else value

    container_cluster: str | None = Field(default=None, alias=Env.CONTAINER_CLUSTER)
    # {"interactive": queue URL, "standard": …, "batch": …}; empty: no admission control (every job starts at once).
    intake_queues: dict[str, str] = Field(default_factory=dict, alias=Env.INTAKE_QUEUES)
    max_jobs_in_flight: int = Field(default=1000, alias=Env.MAX_JOBS_IN_FLIGHT, gt=0)
    admission_dispatcher: str | None = Field(default=None, alias=Env.ADMISSION_DISPATCHER)  # function name
    oidc_issuer: str = Field(default="", alias=Env.OIDC_ISSUER)  # empty: API keys only
    oidc_audience: str = Field(default="", alias=Env.OIDC_AUDIENCE)
    oidc_jwks_url: str = Field(default="", alias=Env.OIDC_JWKS_URL)
    # The claim names of a Cognito user pool's ID token (custom attributes `tenant`, `role`; the user's groups).
    oidc_tenant_claim: str = Field(default="custom:tenant", alias=Env.OIDC_TENANT_CLAIM, min_length=1)
    oidc_role_claim: str = Field(default="custom:role", alias=Env.OIDC_ROLE_CLAIM, min_length=1)
    oidc_groups_claim: str = Field(default="cognito:groups", alias=Env.OIDC_GROUPS_CLAIM, min_length=1)
    email_sender: str | None = Field(default=None, alias=Env.EMAIL_SENDER)
    alarm_topic: str | None = Field(default=None, alias=Env.ALARM_TOPIC)
    analytics_database: str | None = Field(default=None, alias=Env.ANALYTICS_DATABASE)
    manual_url: str = Field(default="", alias=Env.MANUAL_URL)
    batch_role: str | None = Field(default=None, alias=Env.BATCH_ROLE)  # None: no batch lane
    batch_min_records: int = Field(default=100, alias=Env.BATCH_MIN_RECORDS, gt=0)
    batch_max_records: int = Field(default=50_000, alias=Env.BATCH_MAX_RECORDS, gt=0)
    batch_jobs_in_progress: int = Field(default=20, alias=Env.BATCH_JOBS_IN_PROGRESS, gt=0)
    batch_min_window_seconds: int = Field(default=3600, alias=Env.BATCH_MIN_WINDOW_SECONDS, ge=0)
    batch_reserve_seconds: int = Field(default=900, alias=Env.BATCH_RESERVE_SECONDS, ge=0)
    tool_role: str | None = Field(default=None, alias=Env.TOOL_ROLE)  # None: tools use the function's credentials

    @field_validator(
        "workflows",
        "dead_letter_queues",
        "intake_queues",
        "model_routes",
        "step_routes",
        "class_routes",
        "model_prices",
        mode="before",
    )
    @classmethod
    def _parse_json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value


#: Local platform: the credentials of the function role an invocation runs with (on AWS the SDK's own chain finds
#: the sandbox's); with `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`.
ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
#: Local platform: the secret key of the function role an invocation runs with.
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
#: Local platform: the session token of the function role an invocation runs with.
SESSION_TOKEN_ENV = "AWS_SESSION_TOKEN"

_environment: ContextVar[Mapping[str, str] | None] = ContextVar("longhaul_environment", default=None)


def environ() -> Mapping[str, str]:
    """The current function's environment: the local runtime's per-invocation one, else `os.environ`."""
    return _environment.get() or os.environ


def invocation_credentials() -> tuple[str, str, str] | None:
    """The credentials the local runtime gives the current invocation (its function role's), else None: on AWS the
    SDK's own chain finds the sandbox's."""
    env = _environment.get()
    if not env or not env.get(ACCESS_KEY_ENV):
        return None
    return env[ACCESS_KEY_ENV], env.get(SECRET_KEY_ENV, ""), env.get(SESSION_TOKEN_ENV, "")


@contextmanager
def function_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Run a block with `variables` as the function environment (thread- and context-local)."""
    token = _environment.set(dict(variables))
    try:
        yield
    finally:
        _environment.reset(token)


@lru_cache(maxsize=64)
def _parse(items: frozenset[tuple[str, str]]) -> Settings:
    return Settings.model_validate(dict(items))


def get_settings() -> Settings:
    env = environ()
    return _parse(frozenset((k, v) for k, v in env.items() if k.startswith("LONGHAUL_")))
