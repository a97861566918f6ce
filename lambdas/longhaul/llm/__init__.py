"""Model gateways: the port and its offline and Bedrock adapters.

The adapters are imported on first use (PEP 562 `__getattr__` for the re-exports): the offline model pulls in the
retrieval tokeniser (bm25s, numpy), which functions that never call a model must not load at cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from longhaul.llm.port import ModelGateway, ModelRequest, ModelResponse, Usage

if TYPE_CHECKING:
    from longhaul.llm.bedrock import BedrockConverseModel
    from longhaul.llm.offline import OfflineExtractiveModel

__all__ = [
    "BedrockConverseModel",
    "ModelGateway",
    "ModelRequest",
    "ModelResponse",
    "OfflineExtractiveModel",
    "Usage",
    "gateway_for",
]


def __getattr__(name: str) -> Any:
    if name == "BedrockConverseModel":
        from longhaul.llm.bedrock import BedrockConverseModel

        return BedrockConverseModel
    if name == "OfflineExtractiveModel":
        from longhaul.llm.offline import OfflineExtractiveModel

        return OfflineExtractiveModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gateway_for(provider: str, model_id: str, *, bedrock_client: Any | None = None) -> ModelGateway:
    """The gateway for a provider: `offline` (deterministic, local) or `bedrock` (Converse API)."""
    if provider == "offline":
        from longhaul.llm.offline import OfflineExtractiveModel

        return OfflineExtractiveModel(model_id)
    if provider == "bedrock":
        from longhaul.llm.bedrock import BedrockConverseModel

        return BedrockConverseModel(model_id, client=bedrock_client)
    raise ValueError(f"unknown model provider {provider!r}; expected 'offline' or 'bedrock'")
