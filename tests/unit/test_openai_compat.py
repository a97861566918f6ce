"""The OpenAI-compatible adapter against a real HTTP server speaking Chat Completions (started by the test), and
record/replay of model calls keyed by prompt version and prompt hash."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from longhaul.adapters.models import adapter_for
from longhaul.adapters.models.openai_compat import OpenAICompatibleModel
from longhaul.adapters.models.recording import Fixtures, RecordingModel, ReplayModel
from longhaul.core.errors import (
    PlatformConfigurationError,
    PolicyRefusalError,
    RateLimitedError,
    UpstreamUnavailableError,
)
from longhaul.core.llm import ModelRequest
from longhaul.core.routes import Route
from longhaul.core.settings import function_environment


class ChatServer:
    """A minimal Chat Completions server: it answers with `reply` (status, body) and keeps what it received."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.reply: tuple[int, dict[str, Any]] = (200, {})
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, payload = server.reply
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, content: str | None, finish: str = "stop", **message: Any) -> None:
        self.reply = (
            200,
            {
                "id": "c1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message},
                             "finish_reason": finish}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
            },
        )  # fmt: skip


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.httpd.shutdown()


REQUEST = ModelRequest(
    task="extract_evidence",
    prompt_version="v1",
    system="be exact",
    prompt="question?",
    context={},
    max_tokens=99,
    response_schema={"type": "object", "properties": {"a": {"type": "string"}}},
)


def _model(chat: ChatServer) -> OpenAICompatibleModel:
    return OpenAICompatibleModel("test-model", chat.url, api_key=lambda: "sk-test")


def test_a_structured_call_sends_the_schema_and_reads_usage_and_stop_reason(chat: ChatServer) -> None:
    chat.answer('{"a": "b"}')
    response = _model(chat).generate(REQUEST)
    assert (response.text, response.stop_reason) == ('{"a": "b"}', "end_turn")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 7)
    [(headers, body)] = chat.received
    assert headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "test-model" and body["max_tokens"] == 99 and body["temperature"] == 0
    assert body["messages"] == [{"role": "system", "content": "be exact"}, {"role": "user", "content": "question?"}]
    assert body["response_format"]["json_schema"]["schema"] == REQUEST.response_schema


def test_length_is_a_truncation_and_a_refusal_is_a_policy_refusal(chat: ChatServer) -> None:
    chat.answer('{"a": ', finish="length")
    assert _model(chat).generate(REQUEST).stop_reason == "max_tokens"
    chat.answer(None, refusal="I can't help with that")
    with pytest.raises(PolicyRefusalError):
        _model(chat).generate(REQUEST)


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, RateLimitedError), (503, UpstreamUnavailableError), (400, PlatformConfigurationError),
     (401, PlatformConfigurationError)],
)  # fmt: skip
def test_http_errors_become_typed_errors_and_4xx_is_never_an_outage(chat: ChatServer, status: int, error: type) -> None:
    chat.reply = (status, {"error": {"message": "nope"}})
    with pytest.raises(error) as raised:
        _model(chat).generate(REQUEST)
    assert raised.value.retryable == (status >= 429 and status != 400 and status != 401)


def test_a_refused_connection_is_upstream_unavailable() -> None:
    model = OpenAICompatibleModel("m", "http://127.0.0.1:9/v1", api_key=lambda: None, timeout_seconds=2)
    with pytest.raises(UpstreamUnavailableError):
        model.generate(REQUEST)


def test_a_route_reads_its_key_from_the_function_environment(chat: ChatServer) -> None:
    chat.answer("{}")
    route = Route(provider="openai", model_id="m", base_url=chat.url, api_key_env="CHAT_KEY")
    with function_environment({"CHAT_KEY": "sk-env"}):
        adapter_for(route).generate(REQUEST)
    assert chat.received[0][0]["authorization"] == "Bearer sk-env"


def test_recorded_calls_replay_deterministically_by_prompt_version_and_hash(chat: ChatServer, tmp_path: Path) -> None:
    fixtures = Fixtures(tmp_path / "calls.json")
    chat.answer('{"a": "recorded"}')
    recorded = RecordingModel(_model(chat), fixtures).generate(REQUEST)
    replay = ReplayModel("test-model", Fixtures(tmp_path / "calls.json"))
    assert replay.generate(REQUEST) == recorded == replay.generate(REQUEST)
    assert len(chat.received) == 1
    # another prompt version (or prompt) was never recorded: no stale answer
    with pytest.raises(Exception, match="no recorded response"):
        replay.generate(REQUEST.model_copy(update={"prompt_version": "v2"}))
