"""Amazon Bedrock adapter over the Converse API; AWS errors become Longhaul's typed errors."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from longhaul.errors import (
    InternalError,
    InvalidInputError,
    LonghaulError,
    PolicyRefusalError,
    RateLimitedError,
    TransientError,
    UpstreamUnavailableError,
)
from longhaul.llm.port import ModelRequest, ModelResponse, Usage

_ERRORS: dict[str, type[LonghaulError]] = {
    "ThrottlingException": RateLimitedError,
    "TooManyRequestsException": RateLimitedError,
    "ServiceQuotaExceededException": RateLimitedError,
    "ServiceUnavailableException": UpstreamUnavailableError,
    "ModelNotReadyException": UpstreamUnavailableError,
    "InternalServerException": UpstreamUnavailableError,
    "ModelTimeoutException": UpstreamUnavailableError,
    "ModelErrorException": UpstreamUnavailableError,
    "ValidationException": InvalidInputError,
    "AccessDeniedException": InvalidInputError,
    "ResourceNotFoundException": InvalidInputError,
}
_REFUSALS = frozenset({"guardrail_intervened", "content_filtered"})


def error_for(error: ClientError, model_id: str) -> LonghaulError:
    """The typed error for a Bedrock `ClientError` (unknown 5xx/429 are retryable, other codes internal)."""
    code = str(error.response.get("Error", {}).get("Code", "Unknown"))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    message = f"bedrock {model_id}: {code}: {error.response.get('Error', {}).get('Message', '')}"
    cls = _ERRORS.get(code)
    if cls is None:
        cls = RateLimitedError if status == 429 else UpstreamUnavailableError if status >= 500 else InternalError
    return cls(message)


class BedrockConverseModel:
    """Calls `bedrock-runtime` `converse` with temperature 0; the client is created on first use."""

    def __init__(self, model_id: str, client: Any | None = None) -> None:
        self.model_id = model_id
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3.client("bedrock-runtime")
        return self._client

    def generate(self, request: ModelRequest) -> ModelResponse:
        try:
            response = self.client.converse(
                modelId=self.model_id,
                system=[{"text": request.system}],
                messages=[{"role": "user", "content": [{"text": request.prompt}]}],
                inferenceConfig={"maxTokens": request.max_tokens, "temperature": 0},
            )
        except ClientError as error:
            raise error_for(error, self.model_id) from error
        except BotoCoreError as error:
            raise TransientError(f"bedrock {self.model_id}: {error}") from error
        return self._response(response)

    def _response(self, response: dict[str, Any]) -> ModelResponse:
        stop_reason = str(response.get("stopReason", "unknown"))
        if stop_reason in _REFUSALS:
            raise PolicyRefusalError(f"bedrock {self.model_id} refused the request ({stop_reason})")
        content = response.get("output", {}).get("message", {}).get("content", [])
        usage = response.get("usage", {})
        return ModelResponse(
            text="".join(block["text"] for block in content if "text" in block),
            usage=Usage(input_tokens=usage.get("inputTokens", 0), output_tokens=usage.get("outputTokens", 0)),
            model_id=self.model_id,
            stop_reason=stop_reason,
        )
