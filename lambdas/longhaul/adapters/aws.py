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


# A tool's AWS calls (`tool_session`): each attempt bounded, two attempts at most, so a call left running by a tool
# that timed out (`longhaul.engine.tools`) ends on the SDK's own bounds: (3 + 10) * 2 s plus one backoff at most.
TOOL_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 2},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=MAX_POOL_CONNECTIONS,
)


def region() -> str:
    """The region of the platform's session (the process's `AWS_REGION`/`AWS_DEFAULT_REGION`)."""
    return str(_shared_session().region_name or "us-east-1")


def tool_session(access_key_id: str, secret_access_key: str, session_token: str) -> boto3.session.Session:
    """A boto3 session signing with a tool call's credentials (its job's assumed role). It shares the platform
    session's loader, so its clients do not read and parse the service models again."""
    import botocore.session

    shared = _shared_session()
    core = botocore.session.Session()
    core.register_component("data_loader", shared._session.get_component("data_loader"))
    core.set_credentials(access_key_id, secret_access_key, session_token)
    return boto3.session.Session(botocore_session=core, region_name=shared.region_name)


class SessionClients:
    """The clients of one tool session, each built on first use (metered, with the tool calls' bounds)."""

    def __init__(self, session: boto3.session.Session) -> None:
        self.session = session
        self._built: dict[tuple[str, str | None], Any] = {}
        self._lock = threading.Lock()

    def client(self, service: str, endpoint_url: str | None = None) -> Any:
        return _Deferred(lambda: self._client(service, endpoint_url))

    def _client(self, service: str, endpoint_url: str | None) -> Any:
        with self._lock:
            if (service, endpoint_url) not in self._built:
                self._built[(service, endpoint_url)] = instrument(
                    self.session.client(service, endpoint_url=endpoint_url, config=TOOL_CONFIG)
                )
            return self._built[(service, endpoint_url)]

    def table(self, name: str) -> Any:
        with self._lock:
            table = self.session.resource("dynamodb", config=TOOL_CONFIG).Table(name)
        instrument(table.meta.client)
        return table


class _Deferred:
    """A client built when first used (see `LazyClient`)."""

    __slots__ = ("_build", "_client")

    def __init__(self, build: Any) -> None:
        self._build = build
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._build()
        return getattr(self._client, name)


def clear_clients() -> None:
    """Forget the clients built so far (tests that switch AWS mocks)."""
    _client.cache_clear()
    _dynamodb_table.cache_clear()
    _shared_session.cache_clear()
