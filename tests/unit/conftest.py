"""Shared fixtures for the domain and API tests: moto in-process (no network), a fake clock, an API caller.

`aws` starts `mock_aws` with dummy credentials; `table`, `bucket` and `state_machine_arn` create the
resources the way the storage/workflow constructs describe them (the table from the synthesized template).
`services` wires the use cases to the stores on moto and to in-memory fakes of the engine and dead letters.
Process-wide caches (boto3 clients, services, settings) are cleared around each test so each test talks to
its own mock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from moto import mock_aws

from longhaul import services as wiring
from longhaul.adapters import aws as aws_clients
from longhaul.core import settings as settings_module
from longhaul.core.auth import api_key_item
from longhaul.core.settings import Settings, function_environment
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore
from longhaul.storage.tenants import TenantStore
from tests.unit.aws_env import REGION, offline_credentials
from tests.unit.fakes import FakeDeadLetters, FakeEngine

TABLE_NAME = "longhaul-test"
BUCKET_NAME = "longhaul-test-artifacts"
TENANT_A = "tenant-a"
TENANT_B = "tenant-b"
KEY_A = "key-tenant-a-0123456789"
KEY_B = "key-tenant-b-0123456789"
KEY_OPS = "key-operator-0123456789"


class FakeClock:
    """A `longhaul.core.clock.Clock` that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


class _SearchPaths(list[str]):
    """boto3 appends its data path to the loader on every new Session; keep each path once."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


_SHARED_LOADER: botocore.loaders.Loader | None = None


def _shared_loader(data_path: str | None = None) -> botocore.loaders.Loader:
    """One botocore data loader for the whole test run.

    `longhaul.adapters.aws` builds a fresh boto3 Session per client, and each one parses botocore's JSON models again
    (~0.1 s each); sharing the (read-only, instance-cached) loader keeps the suite fast without changing
    what the product code does.
    """
    global _SHARED_LOADER
    if _SHARED_LOADER is None:
        _SHARED_LOADER = botocore.loaders.create_loader(data_path)
        _SHARED_LOADER._search_paths = _SearchPaths(_SHARED_LOADER._search_paths)
    return _SHARED_LOADER


def _clear_caches() -> None:
    aws_clients.clear_clients()
    wiring.clear()
    settings_module._parse.cache_clear()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    offline_credentials(monkeypatch)
    monkeypatch.setattr(botocore.session, "create_loader", _shared_loader)
    _clear_caches()
    with mock_aws():
        yield
    _clear_caches()


@pytest.fixture(scope="session")
def table_definition() -> dict[str, Any]:
    """CreateTable arguments taken from the storage construct's synthesized template, so tests cannot drift."""
    import aws_cdk as cdk
    from aws_cdk import RemovalPolicy

    from stacks.storage import Storage

    app = cdk.App()
    stack = cdk.Stack(app, "StorageOnly")
    Storage(stack, "Storage", removal_policy=RemovalPolicy.DESTROY)
    template = app.synth().get_stack_by_name("StorageOnly").template
    (properties,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    return {
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "KeySchema": properties["KeySchema"],
        "GlobalSecondaryIndexes": [
            {k: v for k, v in index.items() if k in ("IndexName", "KeySchema", "Projection")}
            for index in properties.get("GlobalSecondaryIndexes", [])
        ],
    }


@pytest.fixture
def table(aws: None, table_definition: dict[str, Any]) -> Any:
    dynamodb = boto3.resource("dynamodb", region_name=REGION)
    created = dynamodb.create_table(TableName=TABLE_NAME, BillingMode="PAY_PER_REQUEST", **table_definition)
    created.wait_until_exists()
    return created


@pytest.fixture
def bucket(aws: None) -> str:
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET_NAME)
    return BUCKET_NAME


@pytest.fixture
def s3(aws: None) -> Any:
    return boto3.client("s3", region_name=REGION)


@pytest.fixture
def sfn(aws: None) -> Any:
    return boto3.client("stepfunctions", region_name=REGION)


@pytest.fixture
def state_machine_arn(sfn: Any) -> str:
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    return sfn.create_state_machine(
        name="document-analysis",
        definition=json.dumps(definition),
        roleArn="arn:aws:iam::123456789012:role/longhaul-state-machine",
    )["stateMachineArn"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(table: Any, clock: FakeClock) -> JobStore:
    return JobStore(table, clock=clock)


@pytest.fixture
def checkpoints(table: Any, clock: FakeClock) -> CheckpointStore:
    return CheckpointStore(table, clock=clock)


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def dead_letters() -> FakeDeadLetters:
    return FakeDeadLetters()


@pytest.fixture
def services(
    store: JobStore,
    checkpoints: CheckpointStore,
    s3: Any,
    bucket: str,
    engine: FakeEngine,
    dead_letters: FakeDeadLetters,
) -> wiring.Services:
    """The use cases' services: the stores on moto (sharing the fake clock), the engine and dead letters faked."""
    settings = Settings.model_validate(
        {
            "LONGHAUL_TABLE": TABLE_NAME,
            "LONGHAUL_BUCKET": bucket,
            "LONGHAUL_WORKFLOWS": json.dumps({"document-analysis": "arn:aws:states:::stateMachine:document-analysis"}),
        }
    )
    return wiring.Services(
        settings=settings,
        jobs=store,
        checkpoints=checkpoints,
        artifacts=ArtifactStore(s3, bucket),
        engine=engine,
        dead_letters=dead_letters,
    )


@pytest.fixture
def settings_env(table: Any, bucket: str, state_machine_arn: str) -> dict[str, str]:
    return {
        "LONGHAUL_TABLE": TABLE_NAME,
        "LONGHAUL_BUCKET": bucket,
        "LONGHAUL_WORKFLOWS": json.dumps({"document-analysis": state_machine_arn}),
    }


@pytest.fixture
def api_keys(table: Any) -> dict[str, str]:
    """Two tenants, one key each: {tenant: key}. Each tenant is registered, as making a key for it does."""
    for tenant, key in ((TENANT_A, KEY_A), (TENANT_B, KEY_B)):
        TenantStore(table).register(tenant)
        table.put_item(Item=api_key_item(key, tenant))
    return {TENANT_A: KEY_A, TENANT_B: KEY_B}


@pytest.fixture
def operator_key(table: Any) -> str:
    """An operator's key (tenant `ops`): the operator routes' caller."""
    table.put_item(Item=api_key_item(KEY_OPS, "ops", "operator"))
    return KEY_OPS


@pytest.fixture
def nothing_stored(table: Any, s3: Any, bucket: str, sfn: Any, state_machine_arn: str) -> Callable[[], None]:
    """Call to assert that no job, no artifact and no execution exist: what a rejected request must leave."""
    from tests.unit.api_helpers import stored_nothing  # imported here: api_helpers imports this module

    return stored_nothing(table, s3, bucket, sfn, state_machine_arn)


@dataclass
class LambdaContext:
    function_name: str = "longhaul-api"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:longhaul-api"
    aws_request_id: str = "req-0001"


@dataclass
class ApiResponse:
    status: int
    headers: dict[str, str]
    raw_body: str

    @property
    def body(self) -> Any:
        return json.loads(self.raw_body) if self.raw_body else None

    @property
    def content_type(self) -> str:
        return self.header("Content-Type") or ""

    def header(self, name: str) -> str | None:
        return {k.lower(): v for k, v in self.headers.items()}.get(name.lower())


ROUTES = (
    ("/v1/jobs/", "/v1/jobs/{job_id}/events", "/events"),
    ("/v1/jobs/", "/v1/jobs/{job_id}/stream", "/stream"),
    ("/v1/jobs/", "/v1/jobs/{job_id}/result", "/result"),
    ("/v1/jobs/", "/v1/jobs/{job_id}", ""),
)


def _resource_and_params(path: str) -> tuple[str, dict[str, str] | None]:
    for prefix, resource, suffix in ROUTES:
        if path.startswith(prefix) and path.endswith(suffix):
            job_id = path[len(prefix) : len(path) - len(suffix)] if suffix else path[len(prefix) :]
            if job_id and "/" not in job_id:
                return resource, {"job_id": job_id}
    return path, None


def rest_event(
    method: str,
    path: str,
    *,
    body: str | dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    stage: str = "prod",
) -> dict[str, Any]:
    """A REST API (proxy integration) event as API Gateway would deliver it."""
    resource, path_parameters = _resource_and_params(path)
    text = json.dumps(body) if isinstance(body, dict) else body
    all_headers = {"Host": "api.example.test", "X-Forwarded-Proto": "https"}
    if text is not None:
        all_headers["Content-Type"] = "application/json"
    all_headers.update(headers or {})
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": path_parameters,
        "stageVariables": None,
        "requestContext": {
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": "req-0001",
            "resourcePath": resource,
            "httpMethod": method,
            "identity": {"sourceIp": "192.0.2.10"},
            "accountId": "123456789012",
            "apiId": "abcdef1234",
        },
        "body": text,
        "isBase64Encoded": False,
    }


CallApi = Callable[..., ApiResponse]


@pytest.fixture
def call_api(settings_env: dict[str, str]) -> CallApi:
    """Invoke `handlers.api.handler` with a REST event inside the function's environment.

    `key` (a raw API key) becomes `Authorization: Bearer <key>`.
    """
    from handlers import api

    def call(
        method: str,
        path: str,
        *,
        key: str | None = None,
        body: str | dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> ApiResponse:
        all_headers = dict(headers or {})
        if key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        event = rest_event(method, path, body=body, headers=all_headers, query=query)
        with function_environment(settings_env):
            raw = api.handler(event, LambdaContext())
        merged = dict(raw.get("headers") or {})
        for name, values in (raw.get("multiValueHeaders") or {}).items():
            merged.setdefault(name, values[-1] if values else "")
        return ApiResponse(status=raw["statusCode"], headers=merged, raw_body=raw.get("body") or "")

    return call
