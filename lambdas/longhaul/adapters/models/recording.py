"""Record and replay of model calls, for tests: fixtures keyed by prompt version and prompt hash.

`RecordingModel` wraps any adapter and writes each response to a JSON file; `ReplayModel` answers from such a file,
deterministically, and refuses a call it has no recording of (a changed prompt must be recorded again, never
answered with a stale response). Routes use them with `"record_to": <file>` or `"provider": "replay"`.

A prompt that carries ids of its own run (an agent's: the job's id in an artifact's key, its effects' operation ids,
its memories' ids; `RUN_IDS`) is asked again in another run with other ids. Such a call may be recorded under its
masked key (`masked`: each id replaced by a placeholder, in order of appearance), its response masked alike; a replay
that has no recording of the exact prompt answers from the masked one, with its own ids put back.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

from longhaul.core.errors import InternalError
from longhaul.core.llm import ModelGateway, ModelRequest, ModelResponse, StreamingGateway, TextSink, TokenCounter

# Ids that differ from one run of a job to the next: the job's, its effects' (`op_`), its memories' and reviews', and
# what a provider answered an effect with (an e-mail's message id: five to seven dash-separated groups, as SES's).
RUN_IDS = re.compile(r"\b(?:(?:job|op|mem|rev)_[0-9a-f]{24,28}|[0-9a-z]{8,16}(?:-[0-9a-z]{4,12}){4,6})\b")
MASKED = "masked:"


def fixture_key(request: ModelRequest) -> str:
    return f"{request.prompt_version}:{request.prompt_hash()}"


def masked(request: ModelRequest) -> tuple[str, dict[str, str]]:
    """The request's key with its run's ids masked (`masked:<prompt version>:<hash>`), and the mask: each id found
    (in order of appearance) and its placeholder. An empty mask: the prompt carries no id of its run."""
    text = json.dumps(request.sent(), sort_keys=True, ensure_ascii=False)
    mask: dict[str, str] = {}
    for found in RUN_IDS.findall(text):
        mask.setdefault(found, f"{{id{len(mask)}}}")
    for run_id, placeholder in mask.items():
        text = text.replace(run_id, placeholder)
    return f"{MASKED}{request.prompt_version}:{hashlib.sha256(text.encode()).hexdigest()}", mask


def apply_mask(text: str, mask: dict[str, str], *, reverse: bool = False) -> str:
    """`text` with each id of the mask replaced by its placeholder (or, `reverse`, each placeholder by its id)."""
    for run_id, placeholder in mask.items():
        text = text.replace(placeholder, run_id) if reverse else text.replace(run_id, placeholder)
    return text


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
        """The recorded response to the exact request, else to the request with its run's ids masked (those ids put
        back into its text)."""
        recorded = self.load()
        entry = recorded.get(fixture_key(request))
        if entry:
            return ModelResponse.model_validate(entry["response"])
        key, mask = masked(request)
        entry = recorded.get(key) if mask else None
        if not entry:
            return None
        response = ModelResponse.model_validate(entry["response"])
        return response.model_copy(update={"text": apply_mask(response.text, mask, reverse=True)})

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
