"""Whole workflows on the local runtime: the synthesized template deployed into the embedded moto."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from local import lambda_runtime
from local.deploy import wait_until
from local.keys import DEFAULT_WEBHOOK_SECRETS, parse_webhook_secrets
from local.moto_patches import iam
from local.platform import LocalPlatform
from longhaul.core import faults
from longhaul.workflows import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
TERMINAL = {"completed", "failed", "cancelled", "expired"}
TIME_SCALE = 0.1
# Extra model routes of the test platform (the default route stays the offline model): `unreachable` is an
# OpenAI-compatible endpoint where nothing listens (every call is an outage), failing over to `default`;
# `unreachable-alone` has no fallback. A job picks one with `"route"`. Their breakers open at the second outage and
# stay open for the session.
DEAD_ENDPOINT = "http://127.0.0.1:9/v1"
TEST_ROUTES = {
    "unreachable": {"provider": "openai", "model_id": "gpt-4o-mini", "base_url": DEAD_ENDPOINT, "fallback": "default",
                    "timeout_seconds": 2},
    "unreachable-alone": {"provider": "openai", "model_id": "gpt-4o", "base_url": DEAD_ENDPOINT, "timeout_seconds": 2},
}  # fmt: skip


@pytest.fixture(scope="session")
def platform() -> Iterator[LocalPlatform]:
    # Interpreter waits (retry backoff, Task timeouts) run at a tenth of their real length: time-skipping.
    running = LocalPlatform.current() or LocalPlatform.start(
        ROOT,
        time_scale=TIME_SCALE,
        env_overrides={
            "LONGHAUL_MODEL_ROUTES": json.dumps(TEST_ROUTES),
            "LONGHAUL_BREAKER_COOLDOWN_SECONDS": "600",
            "LONGHAUL_BREAKER_FAILURES": "2",
            # The batch lane: small jobs batch (Bedrock's minimum is 100 records), deadlines are time-scaled.
            "LONGHAUL_BATCH_MIN_RECORDS": "2",
            "LONGHAUL_BATCH_MIN_WINDOW_SECONDS": "60",
            "LONGHAUL_BATCH_RESERVE_SECONDS": "10",
        },
    )
    yield running
    lambda_runtime.interrupt_waits()  # let hung invocations end (and log) before the session reports
    wait_until(lambda: not lambda_runtime.hanging() or None, timeout=30, what="hung invocations to end")
    running.stop()


class _Lines(logging.Handler):
    """Every line the handlers' logger and the local runtime write, formatted as they write them."""

    def __init__(self, formatter: logging.Formatter | None) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        if formatter is not None:
            self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_log_line(platform: LocalPlatform) -> Iterator[None]:
    """Over the whole run: no API key, webhook secret or task token appears in any log line (redaction,
    `longhaul.core.observability.redact`). Task tokens are collected as the review lane stores them."""
    from longhaul.core.observability import logger as handlers_logger
    from longhaul.storage.reviews import ReviewStore

    tokens: list[str] = []
    set_token = ReviewStore.set_token

    def spy(self: ReviewStore, review_id: str, token: str) -> None:
        tokens.append(token)
        set_token(self, review_id, token)

    ReviewStore.set_token = spy  # type: ignore[method-assign]
    handlers = _Lines(handlers_logger.registered_formatter)
    runtime = _Lines(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    handlers_logger.addHandler(handlers)
    logging.getLogger("local").addHandler(runtime)
    try:
        yield
    finally:
        ReviewStore.set_token = set_token  # type: ignore[method-assign]
        handlers_logger.removeHandler(handlers)
        logging.getLogger("local").removeHandler(runtime)
    secrets = [k.key for k in platform.keys] + list(parse_webhook_secrets(DEFAULT_WEBHOOK_SECRETS).values())
    secrets += [t for t in tokens if len(t) >= 16]
    lines = handlers.lines + runtime.lines  # (a clean run of one scenario may write none)
    leaked = sorted({s[:12] + "…" for s in secrets for line in lines if s in line})
    assert leaked == [], f"secrets in log lines: {leaked}"


@pytest.fixture(autouse=True)
def least_privilege(request: pytest.FixtureRequest, platform: LocalPlatform) -> Iterator[None]:
    """Every scenario runs under IAM enforcement: no call of a function, a worker task or a state machine may have
    been refused (a scenario that removes a grant on purpose is marked `iam_denials_expected`)."""
    assert iam.is_enforcing(), "the local platform runs every call under its own role"
    iam.clear_denials()
    yield
    if request.node.get_closest_marker("iam_denials_expected") is None:
        assert iam.denials() == [], "calls the synthesized roles do not allow (principal, action, resource)"


@pytest.fixture(autouse=True)
def no_faults(platform: LocalPlatform) -> Iterator[None]:
    """Each scenario starts with no fault and no execution still running from an earlier one."""
    faults.install(faults.FaultInjector())
    yield
    faults.install(faults.FaultInjector())
    wait_quiet(platform, what="executions of earlier scenarios to finish")


def wait_quiet(platform: LocalPlatform, *, what: str) -> None:
    """Wait (120 s at most) until no execution of the platform's state machines runs."""
    sfn = platform.client("stepfunctions")

    def quiet() -> bool | None:
        running = [
            e
            for arn in platform.deployment.state_machines.values()
            for e in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]
        ]
        return True if not running else None

    wait_until(quiet, timeout=120, interval=0.2, what=what)


class Client:
    """A tenant's view of the API, as a client app would use it."""

    def __init__(self, platform: LocalPlatform, tenant: str) -> None:
        self.base = platform.api_url
        self.headers = platform.auth_header(tenant)

    def post(
        self, path: str, body: Any = None, *, data: str | bytes | None = None, **headers: str
    ) -> requests.Response:
        payload = data if data is not None else json.dumps(body)
        return requests.post(
            f"{self.base}{path}",
            data=payload,
            headers={**self.headers, "Content-Type": "application/json", **headers},
            timeout=30,
        )

    def get(self, path: str, **params: Any) -> requests.Response:
        return requests.get(f"{self.base}{path}", headers=self.headers, params=params, timeout=30)

    def submit(self, body: Any, **headers: str) -> str:
        response = self.post("/v1/jobs", body, **headers)
        assert response.status_code == 202, response.text
        return str(response.json()["job_id"])

    def wait(self, job_id: str, timeout: float = 120) -> dict[str, Any]:
        """Poll the job until it finishes (as a client would)."""

        def finished() -> dict[str, Any] | None:
            job: dict[str, Any] = self.get(f"/v1/jobs/{job_id}").json()
            return job if job["status"] in TERMINAL else None

        return wait_until(finished, timeout=timeout, interval=0.2, what=f"job {job_id} to finish")

    def events(self, job_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.get(f"/v1/jobs/{job_id}/events", **({"cursor": cursor} if cursor else {})).json()
            events.extend(page["events"])
            cursor = page["next_cursor"]
            if not cursor:
                return events


@pytest.fixture
def alpha(platform: LocalPlatform) -> Client:
    return Client(platform, "alpha")


@pytest.fixture
def beta(platform: LocalPlatform) -> Client:
    return Client(platform, "beta")


@pytest.fixture
def sample_request() -> dict[str, Any]:
    return json.loads((SAMPLES / "request.json").read_text())


@pytest.fixture
def inject() -> Callable[[str], None]:
    def install(spec: str) -> None:
        faults.install(faults.FaultInjector(spec, REGISTRY))

    return install
