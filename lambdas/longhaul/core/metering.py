"""Metering: what one step invocation used — billed compute time and the AWS requests it made, by service.

A botocore hook on the platform's clients (`instrument`, applied by `longhaul.adapters.aws`) counts each API call
into the meter of the step running in the current context (`metered()`), so attribution follows the context variable:
two steps running at once in one process (threads of the local runtime) never count into each other's meter.
A call made outside any step (the API, the sweep, webhooks) is counted nowhere: it is no job's cost.

DynamoDB is billed in request units, not requests; the units are estimated from the kind of request, assuming
items of at most 4 KB read and 1 KB written (a strongly consistent read is one read unit, an eventually consistent
one half, a transactional item two; a write one write unit, a transactional one two). S3 requests are counted in
its two price classes (A: PUT, COPY, POST, LIST; B: GET, HEAD and the rest; DELETE is free).
"""

import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from pydantic import ConfigDict

from longhaul.core.model import Model

PREFIX = "metered_"  # the job item's counters: `metered_<field>`, each one atomic ADD per step invocation
S3_CLASS_A = frozenset(
    {
        "PutObject",
        "CopyObject",
        "PostObject",
        "ListObjects",
        "ListObjectsV2",
        "ListObjectVersions",
        "ListBuckets",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
        "ListMultipartUploads",
        "ListParts",
    }
)
S3_FREE = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})
DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan"})
DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
FARGATE_MINIMUM_MS = 60_000  # Fargate bills a task at least one minute


class Metered(Model):
    """What step invocations used, as whole numbers (so DynamoDB's ADD sums them exactly)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    lambda_invocations: int = 0
    lambda_mb_ms: int = 0  # billed milliseconds x the function's configured memory (MB)
    fargate_tasks: int = 0
    fargate_ms: int = 0  # billed task milliseconds (at least a minute a task)
    fargate_cpu_ms: int = 0  # billed milliseconds x the task's CPU units (1024 a vCPU)
    fargate_mb_ms: int = 0  # billed milliseconds x the task's memory (MB)
    dynamodb_requests: int = 0
    dynamodb_read_half_units: int = 0  # halves: an eventually consistent read is half a read request unit
    dynamodb_write_units: int = 0
    s3_requests: int = 0
    s3_class_a: int = 0
    s3_class_b: int = 0
    sqs_requests: int = 0

    def __add__(self, other: "Metered") -> "Metered":
        return Metered(**{name: getattr(self, name) + getattr(other, name) for name in Metered.model_fields})

    @property
    def lambda_gb_seconds(self) -> float:
        return self.lambda_mb_ms / 1024 / 1000

    @property
    def fargate_seconds(self) -> float:
        return self.fargate_ms / 1000

    @property
    def dynamodb_read_units(self) -> float:
        return self.dynamodb_read_half_units / 2

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> "Metered":
        """The counters of a stored job item (`metered_<field>`)."""
        return cls(**{k.removeprefix(PREFIX): int(v) for k, v in item.items() if k.startswith(PREFIX)})

    def counters(self) -> dict[str, int]:
        """The non-zero counters as job item attributes."""
        return {f"{PREFIX}{name}": value for name, value in self.model_dump().items() if value}


class Compute(NamedTuple):
    """Where the current step runs: a Lambda function of `memory_mb`, or a Fargate task of `cpu` units and memory."""

    kind: str  # "lambda" | "fargate"
    memory_mb: int
    cpu: int = 0


class Meter:
    """The requests of one step invocation (a lock: a step may call AWS from threads it started in its context)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def count(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        counts = request_counts(service, operation, params)
        with self._lock:
            for name, value in counts.items():
                self._counts[name] = self._counts.get(name, 0) + value

    def requests(self) -> Metered:
        with self._lock:
            return Metered(**self._counts)


_meter: ContextVar[Meter | None] = ContextVar("longhaul_meter", default=None)
_compute: ContextVar[Compute | None] = ContextVar("longhaul_compute", default=None)


@contextmanager
def metered() -> Iterator[Meter]:
    """Count the AWS requests made in this context (this thread, this step) into a new meter."""
    meter = Meter()
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


@contextmanager
def running_on(compute: Compute) -> Iterator[None]:
    """Declare where the steps of this context run (the container worker: a Fargate task of its size)."""
    token = _compute.set(compute)
    try:
        yield
    finally:
        _compute.reset(token)


#: Set by Lambda: the function's memory (MB), which prices its time.
MEMORY_SIZE_ENV = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"


def current_compute(environment: Mapping[str, str]) -> Compute | None:
    """The declared compute, else a Lambda function of the memory its sandbox announces, else unknown (None)."""
    declared = _compute.get()
    if declared is not None:
        return declared
    memory = environment.get(MEMORY_SIZE_ENV)
    return Compute("lambda", int(memory)) if memory and memory.isdigit() else None


def compute_usage(compute: Compute | None, elapsed_seconds: float) -> Metered:
    """What running `elapsed_seconds` is billed: Lambda to the millisecond (rounded up), Fargate a minute at least."""
    if compute is None:
        return Metered()
    billed_ms = max(1, math.ceil(elapsed_seconds * 1000))
    if compute.kind == "fargate":
        billed_ms = max(billed_ms, FARGATE_MINIMUM_MS)
        return Metered(
            fargate_tasks=1,
            fargate_ms=billed_ms,
            fargate_cpu_ms=billed_ms * compute.cpu,
            fargate_mb_ms=billed_ms * compute.memory_mb,
        )
    return Metered(lambda_invocations=1, lambda_mb_ms=billed_ms * compute.memory_mb)


def request_counts(service: str, operation: str, params: Mapping[str, Any]) -> dict[str, int]:
    """The counters one API call adds (see the module's notes on units)."""
    if service == "dynamodb":
        return {"dynamodb_requests": 1, **_dynamodb_units(operation, params)}
    if service == "s3":
        if operation in S3_FREE:
            return {"s3_requests": 1}
        return {"s3_requests": 1, "s3_class_a" if operation in S3_CLASS_A else "s3_class_b": 1}
    if service == "sqs":
        return {"sqs_requests": 1}
    return {}


def _dynamodb_units(operation: str, params: Mapping[str, Any]) -> dict[str, int]:
    if operation in DYNAMODB_READS:
        return {"dynamodb_read_half_units": 2 if params.get("ConsistentRead") else 1}
    if operation in DYNAMODB_WRITES:
        return {"dynamodb_write_units": 1}
    if operation == "TransactWriteItems":
        return {"dynamodb_write_units": 2 * len(params.get("TransactItems") or [])}
    if operation == "TransactGetItems":
        return {"dynamodb_read_half_units": 4 * len(params.get("TransactItems") or [])}
    if operation == "BatchWriteItem":
        return {"dynamodb_write_units": sum(len(r) for r in (params.get("RequestItems") or {}).values())}
    if operation == "BatchGetItem":
        tables = (params.get("RequestItems") or {}).values()
        return {
            "dynamodb_read_half_units": sum(
                len(t.get("Keys") or []) * (2 if t.get("ConsistentRead") else 1) for t in tables
            )
        }
    return {}


def _on_call(params: Mapping[str, Any], model: Any, context: Mapping[str, Any] | None = None, **_: Any) -> None:
    meter = _meter.get()
    if meter is None or (context or {}).get("is_presign_request"):
        return  # a call outside any step, or a presigned URL being made (no request is sent)
    meter.count(model.service_model.service_name, model.name, params)


def instrument(client: Any) -> Any:
    """Count `client`'s API calls into the current step's meter (once per call, before its parameters are built)."""
    client.meta.events.register("before-parameter-build", _on_call, unique_id="longhaul-metering")
    return client
