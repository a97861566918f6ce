"""Adapters built once per process from the settings (the composition root of the functions)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from longhaul import aws
from longhaul.artifacts import ArtifactStore
from longhaul.llm import gateway_for
from longhaul.llm.port import ModelGateway
from longhaul.settings import Settings, get_settings
from longhaul.store import JobStore


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: JobStore
    artifacts: ArtifactStore
    stepfunctions: Any
    sqs: Any

    def gateway(self) -> ModelGateway:
        return _gateway(self.settings.model_provider, self.settings.model_id)


@lru_cache(maxsize=8)
def _gateway(provider: str, model_id: str) -> ModelGateway:
    client = aws.client("bedrock-runtime") if provider == "bedrock" else None
    return gateway_for(provider, model_id, bedrock_client=client)


@lru_cache(maxsize=8)
def _services(table: str, bucket: str, public_endpoint: str | None) -> tuple[JobStore, ArtifactStore, Any]:
    s3 = aws.client("s3")
    presign = aws.client("s3", public_endpoint) if public_endpoint else s3
    return (
        JobStore(aws.dynamodb_table(table)),
        ArtifactStore(s3, bucket, presign_client=presign),
        aws.client("stepfunctions"),
    )


def services() -> Services:
    settings = get_settings()
    store, artifacts, sfn = _services(settings.table_name, settings.bucket_name, settings.s3_public_endpoint)
    return Services(settings=settings, store=store, artifacts=artifacts, stepfunctions=sfn, sqs=aws.client("sqs"))
