"""Adapters built once per process from the settings (the composition root of the functions)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from longhaul import aws
from longhaul.adapters.dead_letters import QueueDeadLetters
from longhaul.adapters.stepfunctions import StepFunctionsEngine
from longhaul.artifacts import ArtifactStore
from longhaul.llm.port import ModelGateway
from longhaul.ports import DeadLetters, WorkflowEngine
from longhaul.settings import Settings, get_settings
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore


@dataclass(frozen=True)
class Services:
    settings: Settings
    jobs: JobStore
    checkpoints: CheckpointStore
    artifacts: ArtifactStore
    engine: WorkflowEngine
    dead_letters: DeadLetters

    def now(self) -> datetime:
        return self.jobs.clock.now()

    def gateway(self) -> ModelGateway:
        return _gateway(self.settings.model_provider, self.settings.model_id)


@lru_cache(maxsize=8)
def _gateway(provider: str, model_id: str) -> ModelGateway:
    from longhaul.llm import gateway_for  # the model adapters are for the model steps only

    client = aws.client("bedrock-runtime") if provider == "bedrock" else None
    return gateway_for(provider, model_id, bedrock_client=client)


_built: dict[int, Services] = {}  # by id of the (cached, immutable) settings; a Services keeps its settings alive
_lock = threading.Lock()


def _services(settings: Settings) -> Services:
    with _lock:
        if id(settings) not in _built:
            _built[id(settings)] = _build(settings)
        return _built[id(settings)]


def clear() -> None:
    """Forget the built adapters (tests that switch AWS mocks)."""
    with _lock:
        _built.clear()
    _gateway.cache_clear()


def _build(settings: Settings) -> Services:
    s3 = aws.client("s3")
    presign = aws.client("s3", settings.s3_public_endpoint) if settings.s3_public_endpoint else s3
    table = aws.dynamodb_table(settings.table_name)
    return Services(
        settings=settings,
        jobs=JobStore(table),
        checkpoints=CheckpointStore(table),
        artifacts=ArtifactStore(s3, settings.bucket_name, presign_client=presign),
        engine=StepFunctionsEngine(aws.client("stepfunctions"), settings.workflows),
        dead_letters=QueueDeadLetters(table, aws.client("sqs"), settings.dead_letter_queues),
    )


def services() -> Services:
    return _services(get_settings())
