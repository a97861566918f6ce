"""boto3 clients, created once per process and principal (boto3 clients are thread-safe; sessions are not shared).

On AWS a process is one function's sandbox and the SDK finds its role's credentials itself. The local runtime runs
every function in one process and gives each invocation its own role's credentials (`invocation_credentials`), so
a client is kept per (service, endpoint, credentials): a call is signed as the function making it.

The model client gets its own timeouts: one model call, with the SDK's retries and their backoff, must end inside
the Lambda timeout of the step that makes it, with time left for the rest of the step.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from longhaul.core.metering import instrument
from longhaul.core.settings import invocation_credentials

Credentials = tuple[str, str, str] | None

_lock = threading.Lock()
# A pool above botocore's 10 connections: the local runtime shares one client between concurrent invocations (a
# full pool discards connections, and each new one costs a handshake and a server thread); on AWS it is never full.
MAX_POOL_CONNECTIONS = 64
_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=MAX_POOL_CONNECTIONS,
)

# botocore's standard retry mode sleeps at most min(2 ** (i - 1), 20) s before retry i (1-based), and up to 5 s more
# when the service answers with `x-amz-retry-after` (botocore.retries.standard.ExponentialBackoff).
SDK_MAX_BACKOFF = 20
SDK_RETRY_AFTER_EXTRA = 5

# The Lambda timeout of the steps that call the model (`extract_evidence`, `draft_answer`).
MODEL_STEP_TIMEOUT = 120
# What the rest of such a step needs: reading its passages, writing its output and checkpoint.
MODEL_STEP_HEADROOM = 15
MODEL_CONNECT_TIMEOUT = 5
# One attempt: a model call that failed transiently fails the step, and the state machine retries the step with
# jittered backoff (the house policy). SDK retries inside would split the budget and so shorten the read timeout
# that a long generation needs (Converse answers only when the whole generation is done).
MODEL_MAX_ATTEMPTS = 1


def retry_backoff_bound(attempts: int) -> float:
    """The longest total sleep of botocore's standard retry mode between `attempts` attempts."""
    return float(sum(min(2 ** (i - 1), SDK_MAX_BACKOFF) + SDK_RETRY_AFTER_EXTRA for i in range(1, attempts)))


def worst_case_seconds(*, connect_timeout: float, read_timeout: float, attempts: int) -> float:
    """How long one call may take at most: every attempt waits out both timeouts, every retry its longest backoff."""
    return (connect_timeout + read_timeout) * attempts + retry_backoff_bound(attempts)


def read_timeout_within(budget: float, *, connect_timeout: float, attempts: int) -> int:
    """The longest whole-second read timeout whose worst case stays within `budget` seconds."""
    read = int((budget - retry_backoff_bound(attempts)) / attempts - connect_timeout)
    if read <= 0:
        raise ValueError(f"a budget of {budget}s leaves no read timeout for {attempts} attempts")
    return read


MODEL_READ_TIMEOUT = read_timeout_within(
    MODEL_STEP_TIMEOUT - MODEL_STEP_HEADROOM, connect_timeout=MODEL_CONNECT_TIMEOUT, attempts=MODEL_MAX_ATTEMPTS
)
MODEL_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": MODEL_MAX_ATTEMPTS},
    connect_timeout=MODEL_CONNECT_TIMEOUT,
    read_timeout=MODEL_READ_TIMEOUT,
)
_SERVICE_CONFIGS = {"bedrock-runtime": MODEL_CONFIG}


def config_for(service: str) -> Config:
    return _SERVICE_CONFIGS.get(service, _CONFIG)


@cache
def _shared_session() -> boto3.session.Session:
    """One session for every client: its loader keeps each service's model once (a session per role re-read and
    re-parsed every model's JSON, about a second of CPU for each function's first invocation locally)."""
    return boto3.session.Session()


def _signed_as(credentials: Credentials) -> dict[str, Any]:
    if credentials is None:
        return {}
    key, secret, token = credentials
    return {"aws_access_key_id": key, "aws_secret_access_key": secret, "aws_session_token": token or None}


def client(service: str, endpoint_url: str | None = None) -> Any:
    """The platform's client of `service`, signed as the current function (metered: `longhaul.core.metering`)."""
    return _client(service, endpoint_url, invocation_credentials())


def lazy_client(service: str, endpoint_url: str | None = None) -> Any:
    """`client(service, endpoint_url)`, built on its first use (see `LazyClient`)."""
    return LazyClient(service, endpoint_url, invocation_credentials())


class LazyClient:
    """A client built when it is first used, signed as the function that asked for it. A function's services name
    every client their adapters may call (ECS, SES, Secrets Manager…) while most invocations call two or three, and
    building a client reads its service's model: 10–30 ms of a first invocation's CPU each."""

    __slots__ = ("_client", "_of")

    def __init__(self, service: str, endpoint_url: str | None, credentials: Credentials) -> None:
        self._of = (service, endpoint_url, credentials)
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        client = self._client
        if client is None:
            client = self._client = _client(*self._of)  # one per (service, endpoint, credentials), however many ask
        return getattr(client, name)

    def __repr__(self) -> str:
        return f"LazyClient({self._of[0]!r}, built={self._client is not None})"


def dynamodb_table(name: str) -> Any:
    return _dynamodb_table(name, invocation_credentials())


@cache
def _client(service: str, endpoint_url: str | None, credentials: Credentials) -> Any:
    with _lock:
        return instrument(
            _shared_session().client(
                service, endpoint_url=endpoint_url, config=config_for(service), **_signed_as(credentials)
            )
        )


@cache
def _dynamodb_table(name: str, credentials: Credentials) -> Any:
    with _lock:
        table = _shared_session().resource("dynamodb", config=_CONFIG, **_signed_as(credentials)).Table(name)
        instrument(table.meta.client)
        return table


def clear_clients() -> None:
    """Forget the clients built so far (tests that switch AWS mocks)."""
    _client.cache_clear()
    _dynamodb_table.cache_clear()
    _shared_session.cache_clear()
