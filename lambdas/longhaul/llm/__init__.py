"""Model gateways: the port and its offline and Bedrock adapters."""

from __future__ import annotations

from typing import Any

from longhaul.llm.bedrock import BedrockConverseModel
from longhaul.llm.offline import OfflineExtractiveModel
from longhaul.llm.port import ModelGateway, ModelRequest, ModelResponse, Usage

__all__ = [
    "BedrockConverseModel",
    "ModelGateway",
    "ModelRequest",
    "ModelResponse",
    "OfflineExtractiveModel",
    "Usage",
    "gateway_for",
]


def gateway_for(provider: str, model_id: str, *, bedrock_client: Any | None = None) -> ModelGateway:
    """The gateway for a provider: `offline` (deterministic, local) or `bedrock` (Converse API)."""
    if provider == "offline":
        return OfflineExtractiveModel(model_id)
    if provider == "bedrock":
        return BedrockConverseModel(model_id, client=bedrock_client)
    raise ValueError(f"unknown model provider {provider!r}; expected 'offline' or 'bedrock'")
