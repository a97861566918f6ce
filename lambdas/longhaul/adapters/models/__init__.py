"""Model gateways: the port and its adapters (offline, Bedrock, OpenAI-compatible, recorded fixtures).

The adapters are imported on first use (PEP 562 `__getattr__` for the re-exports): the offline model pulls in the
retrieval tokeniser (bm25s, numpy), which functions that never call a model must not load at cold start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from longhaul.core.llm import ModelGateway, ModelRequest, ModelResponse, Usage
from longhaul.core.routes import Route
from longhaul.core.settings import environ

if TYPE_CHECKING:
    from longhaul.adapters.models.bedrock import BedrockConverseModel
    from longhaul.adapters.models.offline import OfflineExtractiveModel

__all__ = [
    "BedrockConverseModel",
    "ModelGateway",
    "ModelRequest",
    "ModelResponse",
    "OfflineExtractiveModel",
    "Usage",
    "adapter_for",
    "gateway_for",
]


def __getattr__(name: str) -> Any:
    if name == "BedrockConverseModel":
        from longhaul.adapters.models.bedrock import BedrockConverseModel

        return BedrockConverseModel
    if name == "OfflineExtractiveModel":
        from longhaul.adapters.models.offline import OfflineExtractiveModel

        return OfflineExtractiveModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gateway_for(provider: str, model_id: str, *, bedrock_client: Any | None = None) -> ModelGateway:
    """The gateway for a provider: `offline` (deterministic, local) or `bedrock` (Converse API)."""
    if provider == "offline":
        from longhaul.adapters.models.offline import OfflineExtractiveModel

        return OfflineExtractiveModel(model_id)
    if provider == "bedrock":
        from longhaul.adapters.models.bedrock import BedrockConverseModel

        return BedrockConverseModel(model_id, client=bedrock_client)
    raise ValueError(f"unknown model provider {provider!r}; expected 'offline' or 'bedrock'")


_secrets: dict[str, str] = {}


def _api_key(route: Route) -> Callable[[], str | None]:
    """The route's key, read when a call needs it: an environment variable locally, a secret on AWS (once)."""

    def read() -> str | None:
        if route.api_key_env:
            return environ().get(route.api_key_env)
        if route.api_key_secret:
            if route.api_key_secret not in _secrets:
                from longhaul.adapters import aws

                secret = aws.client("secretsmanager").get_secret_value(SecretId=route.api_key_secret)
                _secrets[route.api_key_secret] = str(secret["SecretString"]).strip()
            return _secrets[route.api_key_secret]
        return None

    return read


def adapter_for(route: Route) -> ModelGateway:
    """The adapter of a route, recording its calls when the route says `record_to`."""
    from longhaul.adapters.models.recording import Fixtures, RecordingModel, ReplayModel

    adapter: ModelGateway
    if route.provider == "openai":
        from longhaul.adapters.models.openai_compat import OpenAICompatibleModel

        assert route.base_url is not None  # the route's validator requires it
        adapter = OpenAICompatibleModel(
            route.model_id, route.base_url, api_key=_api_key(route), timeout_seconds=route.timeout_seconds
        )
    elif route.provider == "replay":
        assert route.fixtures is not None
        adapter = ReplayModel(route.model_id, Fixtures(route.fixtures))
    else:
        from longhaul.adapters import aws

        client = aws.client("bedrock-runtime") if route.provider == "bedrock" else None
        adapter = gateway_for(route.provider, route.model_id, bedrock_client=client)
    return RecordingModel(adapter, Fixtures(route.record_to)) if route.record_to else adapter
