"""Record and replay of model calls, for tests: fixtures keyed by prompt version and prompt hash.

`RecordingModel` wraps any adapter and writes each response to a JSON file; `ReplayModel` answers from such a file,
deterministically, and refuses a call it has no recording of (a changed prompt must be recorded again, never
answered with a stale response). Routes use them with `"record_to": <file>` or `"provider": "replay"`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from longhaul.core.errors import InternalError
from longhaul.core.llm import ModelGateway, ModelRequest, ModelResponse, StreamingGateway, TextSink, TokenCounter


def fixture_key(request: ModelRequest) -> str:
    return f"{request.prompt_version}:{request.prompt_hash()}"


class Fixtures:
    """A file of recorded responses: {"<prompt version>:<prompt hash>": {"task", "response"}}."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict[str, object]]:
        if not self.path.exists():
            return {}
        loaded: dict[str, dict[str, object]] = json.loads(self.path.read_text())
        return loaded

    def get(self, request: ModelRequest) -> ModelResponse | None:
        entry = self.load().get(fixture_key(request))
        return ModelResponse.model_validate(entry["response"]) if entry else None

    def put(self, request: ModelRequest, response: ModelResponse) -> None:
        with self._lock:
            recorded = self.load()
            answer = response.model_dump(mode="json", exclude_none=True)  # (cache counts only when reported)
            recorded[fixture_key(request)] = {"task": request.task, "response": answer}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(recorded, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


class RecordingModel:
    """Any adapter, recording each response it gives."""

    def __init__(self, inner: ModelGateway, fixtures: Fixtures) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.fixtures = fixtures

    def count_tokens(self, request: ModelRequest) -> int | None:
        """The wrapped adapter's count, if it has a counter."""
        return self.inner.count_tokens(request) if isinstance(self.inner, TokenCounter) else None

    def generate(self, request: ModelRequest) -> ModelResponse:
        response = self.inner.generate(request)
        self.fixtures.put(request, response)
        return response

    def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The wrapped adapter's stream when it has one (the recorded response is the same either way)."""
        if not isinstance(self.inner, StreamingGateway):
            return self.generate(request)
        response = self.inner.stream(request, on_text)
        self.fixtures.put(request, response)
        return response


class ReplayModel:
    """Answers from recorded fixtures only."""

    def __init__(self, model_id: str, fixtures: Fixtures) -> None:
        self.model_id = model_id
        self.fixtures = fixtures

    def generate(self, request: ModelRequest) -> ModelResponse:
        response = self.fixtures.get(request)
        if response is None:
            raise InternalError(
                f"no recorded response for {request.task} (prompt version {request.prompt_version}, "
                f"hash {request.prompt_hash()[:12]}) in {self.fixtures.path.name}: record it again"
            )
        return response
