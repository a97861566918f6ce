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

from longhaul.core.model import Model


class Env:
    """Names of the environment variables, shared by the CDK app and the functions."""

    TABLE = "LONGHAUL_TABLE"
    BUCKET = "LONGHAUL_BUCKET"
    WORKFLOWS = "LONGHAUL_WORKFLOWS"
    MODEL_PROVIDER = "LONGHAUL_MODEL_PROVIDER"
    MODEL_ID = "LONGHAUL_MODEL_ID"
    MAX_BODY_BYTES = "LONGHAUL_MAX_BODY_BYTES"
    S3_PUBLIC_ENDPOINT = "LONGHAUL_S3_PUBLIC_ENDPOINT"
    STAGE = "LONGHAUL_STAGE"
    # What produced an output: the code asset's hash (the build's version), recorded on checkpoints and model calls.
    CODE_VERSION = "LONGHAUL_CODE_VERSION"
    DEAD_LETTER_QUEUES = "LONGHAUL_DEAD_LETTER_QUEUES"
    STUCK_AFTER_MINUTES = "LONGHAUL_STUCK_AFTER_MINUTES"
    MODEL_ROUTES = "LONGHAUL_MODEL_ROUTES"
    STEP_ROUTES = "LONGHAUL_STEP_ROUTES"
    MODEL_PRICES = "LONGHAUL_MODEL_PRICES"
    BREAKER_FAILURES = "LONGHAUL_BREAKER_FAILURES"
    BREAKER_WINDOW_SECONDS = "LONGHAUL_BREAKER_WINDOW_SECONDS"
    BREAKER_COOLDOWN_SECONDS = "LONGHAUL_BREAKER_COOLDOWN_SECONDS"
    TENANT_POLICIES = "LONGHAUL_TENANT_POLICIES"
    CALLBACK_ALLOWLIST = "LONGHAUL_CALLBACK_ALLOWLIST"
    WEBHOOK_DELIVERY = "LONGHAUL_WEBHOOK_DELIVERY"
    WEBHOOK_SECRETS_PREFIX = "LONGHAUL_WEBHOOK_SECRETS_PREFIX"
    # Container steps (ECS): the cluster whose tasks a cancellation stops; what a worker task is started with.
    CONTAINER_CLUSTER = "LONGHAUL_CONTAINER_CLUSTER"
    TASK_TOKEN = "LONGHAUL_TASK_TOKEN"
    STEP_EVENT = "LONGHAUL_STEP_EVENT"
    STEP_ATTEMPT = "LONGHAUL_STEP_ATTEMPT"
    HEARTBEAT_SECONDS = "LONGHAUL_HEARTBEAT_SECONDS"
    # Admission: the intake queue of each SLA class, the platform's jobs in flight, the dispatcher to wake.
    INTAKE_QUEUES = "LONGHAUL_INTAKE_QUEUES"
    MAX_JOBS_IN_FLIGHT = "LONGHAUL_MAX_JOBS_IN_FLIGHT"
    ADMISSION_DISPATCHER = "LONGHAUL_ADMISSION_DISPATCHER"
    TASK_CPU = "LONGHAUL_TASK_CPU"  # a container worker's task size (CPU units, memory MB): what its time costs
    TASK_MEMORY_MB = "LONGHAUL_TASK_MEMORY_MB"
    INJECT_FAULT = "LONGHAUL_INJECT_FAULT"  # local runtime only: the fault one worker task plays
    JWT = "LONGHAUL_JWT"  # the API authorizer's OIDC issuer (`longhaul.adapters.tokens.JwtConfig`), when configured
    # The verified SES identity that agents' e-mail tools send from (set on the functions whose tools send e-mail).
    EMAIL_SENDER = "LONGHAUL_EMAIL_SENDER"


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
    # {"route": {"provider", "model_id", "base_url"?, "api_key_env"?, "api_key_secret"?, "fallback"?, "stronger"?}};
    # empty: one route `default` of `model_provider`/`model_id`.
    model_routes: dict[str, dict[str, Any]] = Field(default_factory=dict, alias=Env.MODEL_ROUTES)
    step_routes: dict[str, str] = Field(default_factory=dict, alias=Env.STEP_ROUTES)  # {"step": "route"}
    model_prices: dict[str, dict[str, str]] = Field(default_factory=dict, alias=Env.MODEL_PRICES)
    breaker_failures: int = Field(default=5, alias=Env.BREAKER_FAILURES, gt=0)
    breaker_window_seconds: int = Field(default=60, alias=Env.BREAKER_WINDOW_SECONDS, gt=0)
    breaker_cooldown_seconds: int = Field(default=30, alias=Env.BREAKER_COOLDOWN_SECONDS, gt=0)
    # Origins (`http://127.0.0.1:9000`) whose callbacks skip the address checks and may use plain http.
    callback_allowlist: frozenset[str] = Field(default=frozenset(), alias=Env.CALLBACK_ALLOWLIST)
    webhook_delivery: str | None = Field(default=None, alias=Env.WEBHOOK_DELIVERY)  # state machine ARN
    webhook_secrets_prefix: str = Field(default="longhaul/webhooks/", alias=Env.WEBHOOK_SECRETS_PREFIX)

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
    jwt: dict[str, Any] = Field(default_factory=dict, alias=Env.JWT)  # empty: API keys only
    email_sender: str | None = Field(default=None, alias=Env.EMAIL_SENDER)

    @field_validator(
        "workflows",
        "dead_letter_queues",
        "intake_queues",
        "model_routes",
        "step_routes",
        "model_prices",
        "jwt",
        mode="before",
    )
    @classmethod
    def _parse_json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value


_environment: ContextVar[Mapping[str, str] | None] = ContextVar("longhaul_environment", default=None)


def environ() -> Mapping[str, str]:
    """The current function's environment: the local runtime's per-invocation one, else `os.environ`."""
    return _environment.get() or os.environ


def invocation_credentials() -> tuple[str, str, str] | None:
    """The credentials the local runtime gives the current invocation (its function role's), else None: on AWS the
    SDK's own chain finds the sandbox's."""
    env = _environment.get()
    if not env or not env.get("AWS_ACCESS_KEY_ID"):
        return None
    return env["AWS_ACCESS_KEY_ID"], env.get("AWS_SECRET_ACCESS_KEY", ""), env.get("AWS_SESSION_TOKEN", "")


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
