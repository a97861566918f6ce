"""Any OpenAI-compatible Chat Completions endpoint (`POST {base_url}/chat/completions`), over the standard library;
streamed with `stream: true` (Server-Sent chunks) when the gateway streams a call's text.

Structured output asks for `response_format: {"type": "json_schema", …}` with the request's schema. The key comes
from an environment variable (local) or a Secrets Manager secret (AWS), read once per process. Errors become the
typed errors: 429 rate-limited; 5xx, timeouts and refused connections upstream-unavailable (the breaker counts
those); 400/401/403/404/422 platform-misconfigured (the platform builds every request: a 4xx is never an outage).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from longhaul.core import correlation
from longhaul.core.errors import (
    InternalError,
    LonghaulError,
    PlatformConfigurationError,
    PolicyRefusalError,
    RateLimitedError,
    UpstreamUnavailableError,
)
from longhaul.core.llm import ModelRequest, ModelResponse, TextSink, Usage

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "content_filtered",
    "tool_calls": "tool_use",
}


def error_for_status(status: int, model_id: str, detail: str) -> LonghaulError:
    if status == 429:
        return RateLimitedError(f"openai-compatible {model_id}: 429 {detail}")
    if status >= 500:
        return UpstreamUnavailableError(f"openai-compatible {model_id}: {status} {detail}")
    if status in (400, 401, 403, 404, 422):
        return PlatformConfigurationError(
            f"openai-compatible {model_id} refused the platform's request ({status}): check the route's base URL, "
            f"model id and key ({detail})"
        )
    return InternalError(f"openai-compatible {model_id}: unexpected {status} {detail}")


class OpenAICompatibleModel:
    """One model behind one Chat Completions endpoint; temperature 0."""

    provider = "openai"

    def __init__(
        self, model_id: str, base_url: str, *, api_key: Callable[[], str | None], timeout_seconds: float = 60
    ) -> None:
        self.model_id = model_id
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout_seconds = timeout_seconds

    def generate(self, request: ModelRequest) -> ModelResponse:
        with self._post(self._body(request)) as answer:
            try:
                payload = json.loads(answer.read())
            except ValueError as error:  # the body was not JSON
                raise UpstreamUnavailableError(
                    f"openai-compatible {self.model_id}: malformed response ({error})"
                ) from None
        return self._response(payload)

    def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """`stream: true` (with `stream_options.include_usage`): the Server-Sent chunks' `delta.content` go to
        `on_text`; the response is assembled as the non-streamed call answers it (the same text and usage)."""
        body = {**self._body(request), "stream": True, "stream_options": {"include_usage": True}}
        texts: list[str] = []
        finish: object = None
        refusal = ""
        usage: dict[str, Any] = {}
        with self._post(body) as answer:
            try:
                for raw in answer:
                    line = raw.decode("utf-8", errors="replace").strip()
                    if not line.startswith("data:"):
                        continue  # blank lines, comments, `event:` lines
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        refusal += str(delta.get("refusal") or "")
                        if delta.get("content"):
                            texts.append(str(delta["content"]))
                            on_text(str(delta["content"]))
                        finish = choice.get("finish_reason") or finish
            except (TimeoutError, ConnectionError, OSError) as error:
                raise UpstreamUnavailableError(f"openai-compatible {self.model_id}: stream broke ({error})") from None
            except ValueError as error:  # a chunk that was not JSON
                message = f"openai-compatible {self.model_id}: malformed chunk ({error})"
                raise UpstreamUnavailableError(message) from None
        answered = {"content": "".join(texts), "refusal": refusal or None}
        return self._response({"choices": [{"message": answered, "finish_reason": finish}], "usage": usage})

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": [{"role": "system", "content": request.system}, {"role": "user", "content": request.prompt}],
            "max_tokens": request.max_tokens,
            "temperature": 0,
        }
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.task[:64], "schema": request.response_schema},
            }
        return body

    @contextmanager
    def _post(self, body: dict[str, Any]) -> Iterator[Any]:
        """The open HTTP answer to `POST /chat/completions` with `body`; HTTP and network errors typed."""
        # The job's correlation id: OpenAI-compatible servers log `X-Request-Id` (Bedrock's Converse takes no header).
        accept = "text/event-stream" if body.get("stream") else "application/json"
        headers = {"Content-Type": "application/json", "Accept": accept, **correlation.outgoing_headers()}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        http = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            answer = urllib.request.urlopen(http, timeout=self.timeout_seconds)
        except urllib.error.HTTPError as error:
            detail = error.read(500).decode(errors="replace")
            raise error_for_status(error.code, self.model_id, " ".join(detail.split())[:200]) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            raise UpstreamUnavailableError(f"openai-compatible {self.model_id}: {error}") from None
        with answer:
            yield answer

    def _response(self, payload: dict[str, Any]) -> ModelResponse:
        try:
            choice = payload["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError):
            raise UpstreamUnavailableError(f"openai-compatible {self.model_id}: response without choices") from None
        stop_reason = STOP_REASONS.get(str(choice.get("finish_reason")), str(choice.get("finish_reason")))
        if message.get("refusal") or stop_reason == "content_filtered":
            raise PolicyRefusalError(f"openai-compatible {self.model_id} refused the request ({stop_reason})")
        usage = payload.get("usage") or {}
        # `prompt_tokens` includes the prompt's cached tokens: the input reported is the rest, as Bedrock reports it.
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        cached = min(int(cached), prompt_tokens) if cached is not None else None
        return ModelResponse(
            text=str(message.get("content") or ""),
            usage=Usage(
                input_tokens=prompt_tokens - (cached or 0),
                output_tokens=int(usage.get("completion_tokens", 0)),
                cache_read_tokens=cached,
            ),
            model_id=self.model_id,
            stop_reason=stop_reason,
        )
