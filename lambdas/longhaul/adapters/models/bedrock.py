"""Amazon Bedrock adapter over the Converse API (ConverseStream to stream an answer as it is written); AWS errors
become Longhaul's typed errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from longhaul.adapters import aws
from longhaul.core.errors import (
    InternalError,
    LonghaulError,
    PlatformConfigurationError,
    PolicyRefusalError,
    RateLimitedError,
    TransientError,
    UpstreamUnavailableError,
)
from longhaul.core.llm import ModelRequest, ModelResponse, TextSink, Usage
from longhaul.core.observability import PLATFORM_MISCONFIGURED, emit, logger

_ERRORS: dict[str, type[LonghaulError]] = {
    "ThrottlingException": RateLimitedError,
    "TooManyRequestsException": RateLimitedError,
    "ServiceQuotaExceededException": RateLimitedError,
    "ServiceUnavailableException": UpstreamUnavailableError,
    "ModelNotReadyException": UpstreamUnavailableError,
    "InternalServerException": UpstreamUnavailableError,
    "ModelTimeoutException": UpstreamUnavailableError,
    "ModelErrorException": UpstreamUnavailableError,
    # The platform builds every request (model id, prompt size, parameters), so these are its configuration, not
    # the tenant's input: model access not enabled, a Marketplace subscription missing, a cross-region profile
    # invoked outside its regions, a model without on-demand throughput, an unknown model id.
    "ValidationException": PlatformConfigurationError,
    "AccessDeniedException": PlatformConfigurationError,
    "ResourceNotFoundException": PlatformConfigurationError,
}
_REFUSALS = frozenset({"guardrail_intervened", "content_filtered"})
# Structured output: the answer is the input of this one tool, whose input schema is the request's schema.
ANSWER_TOOL = "answer"
# Where a cached prefix ends (Converse `cachePoint`; the default type: Bedrock's 5-minute TTL).
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
# Geography prefixes of Bedrock's cross-region inference profiles (`us.anthropic.…`).
PROFILE_PREFIXES = ("us", "eu", "apac", "global", "us-gov", "ca", "jp", "au")
# A job's error is shown to its tenant: ARNs and account ids in AWS's message stay in the operators' logs.
_ARN = re.compile(r"arn:aws[\w-]*:[^\s,;]+")
_ACCOUNT = re.compile(r"\b\d{12}\b")


def split_inference_profile(model_id: str) -> tuple[str | None, str]:
    """(profile geography or None, base model id): `us.anthropic.x` → (`us`, `anthropic.x`)."""
    prefix, _, rest = model_id.partition(".")
    return (prefix, rest) if prefix in PROFILE_PREFIXES and rest else (None, model_id)


def redact(message: str) -> str:
    return _ACCOUNT.sub("<account>", _ARN.sub("<arn>", message))


def configuration_hint(model_id: str, region: str) -> str:
    """What an operator enables so that `model_id` can be invoked from `region` (short: it is shown in the job)."""
    profile, base_model = split_inference_profile(model_id)
    # Bedrock enables serverless models on their first use, which needs a principal allowed to subscribe in AWS
    # Marketplace (the step roles are not) and, for Anthropic, the account's use-case form.
    hints = [
        f"enable model access to {base_model} in {region}: invoke it once in the Bedrock playground as an "
        "administrator (Marketplace subscription, Anthropic use-case form)"
    ]
    if profile:
        hints.append(f"'{profile}' cross-region profile: deploy in a '{profile}' region or use your region's profile")
    else:
        hints.append("a model without on-demand throughput needs an inference profile id")
    return "; ".join(hints)


def error_for(error: ClientError, model_id: str, region: str = "this region") -> LonghaulError:
    """The typed error for a Bedrock `ClientError` (unknown 5xx/429 are retryable, other codes internal)."""
    code = str(error.response.get("Error", {}).get("Code", "Unknown"))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    detail = f"{code}: {redact(str(error.response.get('Error', {}).get('Message', '')))}"
    cls = _ERRORS.get(code)
    if cls is None:
        cls = RateLimitedError if status == 429 else UpstreamUnavailableError if status >= 500 else InternalError
    if cls is PlatformConfigurationError:
        # The hint first: the recorded message is bounded, AWS's own words may be cut.
        return cls(f"bedrock {model_id} is not usable in {region}: {configuration_hint(model_id, region)} ({detail})")
    return cls(f"bedrock {model_id}: {detail}")


class BedrockConverseModel:
    """Calls `bedrock-runtime` `converse` with temperature 0; the client is created on first use."""

    def __init__(self, model_id: str, client: Any | None = None) -> None:
        self.model_id = model_id
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = aws.client("bedrock-runtime")
        return self._client

    def generate(self, request: ModelRequest) -> ModelResponse:
        with self._errors():
            response = self.client.converse(**self._arguments(request))
        return self._response(response)

    def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """`converse_stream`: each text delta (or, for a structured answer, each piece of the tool input's JSON) goes
        to `on_text`; the response is assembled as `converse` answers it, so its text and usage are the same."""
        texts: list[str] = []
        tool_input: list[str] | None = None
        stop_reason, usage, tier = "unknown", {}, None
        with self._errors():
            answer = self.client.converse_stream(**self._arguments(request))
            for event in answer.get("stream", ()):  # an exception event raises `EventStreamError` (a ClientError)
                if "contentBlockStart" in event and "toolUse" in event["contentBlockStart"].get("start", {}):
                    tool_input = [] if tool_input is None else tool_input
                elif "contentBlockDelta" in event:
                    delta = event["contentBlockDelta"].get("delta", {})
                    if "text" in delta:
                        texts.append(delta["text"])
                        on_text(delta["text"])
                    elif "toolUse" in delta:
                        piece = str(delta["toolUse"].get("input", ""))
                        tool_input = [*(tool_input or []), piece]
                        on_text(piece)
                elif "messageStop" in event:
                    stop_reason = str(event["messageStop"].get("stopReason", "unknown"))
                elif "metadata" in event:
                    usage = event["metadata"].get("usage", {})
                    tier = event["metadata"].get("serviceTier")
        content: list[dict[str, Any]] = []
        if tool_input is not None:
            try:
                content.append({"toolUse": {"name": ANSWER_TOOL, "input": json.loads("".join(tool_input) or "{}")}})
            except ValueError:  # a tool input cut off (max tokens): the text as written, judged by the ladder
                content.append({"text": "".join(tool_input)})
        content.extend({"text": text} for text in texts if tool_input is None)
        if tool_input is not None and texts:
            content.insert(0, {"text": "".join(texts)})
        answered = {"stopReason": stop_reason, "output": {"message": {"content": content}}, "usage": usage}
        return self._response(answered | ({"serviceTier": tier} if tier else {}))

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        system: list[dict[str, Any]] = [{"text": request.system}]
        content: list[dict[str, Any]] = [{"text": request.prompt}]
        if request.cache_prefix_tokens is not None:
            # One cache point where the stable prefix ends (tools, system, then the prompt's stable part): after
            # the system prompt, or inside the message after the prompt's stable part.
            stable, rest = request.stable_prefix()
            if not stable:
                system.append(CACHE_POINT)
            else:
                content = [{"text": stable}, CACHE_POINT, *([{"text": rest}] if rest else [])]
        arguments: dict[str, Any] = {
            "modelId": self.model_id,
            "system": system,
            "messages": [{"role": "user", "content": content}],
            "inferenceConfig": {"maxTokens": request.max_tokens, "temperature": 0},
        }
        if request.service_tier and request.service_tier != "default":  # Standard is what Bedrock does without it
            arguments["serviceTier"] = {"type": request.service_tier}
        if request.response_schema is not None:
            # Structured output through tool use: the model must call the one tool, with the schema as its input.
            arguments["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": ANSWER_TOOL,
                            "description": f"Give the {request.task} answer, matching the schema exactly.",
                            "inputSchema": {"json": request.response_schema},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": ANSWER_TOOL}},
            }
        return arguments

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """AWS's errors (raised by the call, or by an exception event of a stream) as Longhaul's typed errors."""
        try:
            yield
        except ClientError as error:
            typed = error_for(error, self.model_id, str(self.client.meta.region_name))
            if isinstance(typed, PlatformConfigurationError):
                # Operators see AWS's own message in the logs; the alarm watches the metric.
                logger.error(
                    "bedrock is not configured for this model",
                    extra={"model_id": self.model_id, "aws_error": str(error)},
                )
                emit(PLATFORM_MISCONFIGURED, provider="bedrock")
            raise typed from error
        except BotoCoreError as error:
            raise TransientError(f"bedrock {self.model_id}: {error}") from error

    def _response(self, response: dict[str, Any]) -> ModelResponse:
        stop_reason = str(response.get("stopReason", "unknown"))
        if stop_reason in _REFUSALS:
            raise PolicyRefusalError(f"bedrock {self.model_id} refused the request ({stop_reason})")
        content = response.get("output", {}).get("message", {}).get("content", [])
        usage = response.get("usage", {})
        tool_inputs = [block["toolUse"].get("input") for block in content if "toolUse" in block]
        # A structured answer is the tool's input (as JSON text, validated by the step like any model output).
        text = json.dumps(tool_inputs[0]) if tool_inputs else "".join(b["text"] for b in content if "text" in b)
        return ModelResponse(
            text=text,
            usage=Usage(
                input_tokens=usage.get("inputTokens", 0),
                output_tokens=usage.get("outputTokens", 0),
                cache_read_tokens=usage.get("cacheReadInputTokens"),
                cache_write_tokens=usage.get("cacheWriteInputTokens"),
            ),
            model_id=self.model_id,
            stop_reason=stop_reason,
            service_tier=(response.get("serviceTier") or {}).get("type"),
        )
