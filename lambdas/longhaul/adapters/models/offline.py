"""A deterministic, offline stand-in for a language model: same input, same bytes out, no network.

It streams too (`stream`): the same answer, in pieces at a simulated writing pace.

It never reads the prompt, but counts it (four characters a token: `count_tokens` is exactly the input it reports)
and honours the request's `max_tokens` as a provider does: a longer answer is cut off there (`stop_reason`
`max_tokens`). Each request names the deterministic stand-in of its task (`ModelRequest.offline`,
"module:function", called with the request's structured `context` and this model's id), which answers in the JSON
shape a remote model is asked for: that is how each workflow brings the offline behaviour of its own tasks (document
analysis quotes verbatim sentences, `longhaul.workflows.document_analysis.offline`; invoice reconciliation reads
the invoices with its own parser) without a change here.

It simulates a provider's prompt cache (`PromptCache`): a request whose stable prefix the gateway marked
(`ModelRequest.cache_prefix_tokens`) reports that prefix as a cache write the first time, and as a cache read while
the same prefix (same model, system prompt, schema and stable prompt part) was seen within `CACHE_TTL_SECONDS` (each
read keeps it, as a provider's does). Its answer never depends on it: only the usage splits differently.

A second offline model, `longhaul-offline-loose-1` (`LOOSE_MODEL_ID`), answers the same but less tidily, so that two
routes can be compared locally (`make eval EVAL_ARGS="--compare default,loose"`): a share of its answers
(`LOOSE_MALFORMED_SHARE`, at random) come wrapped in prose and a code fence with a trailing comma, which the ladder's
mechanical repair fixes, and it writes each answer `LOOSE_SECONDS` later (a slower model: the local clock scales it).
It is priced as a smaller model (`longhaul.core.budgets.PRICES`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from longhaul.core import clock
from longhaul.core.errors import InternalError
from longhaul.core.llm import CACHE_TTL_SECONDS, ModelRequest, ModelResponse, TextSink, Usage
from longhaul.core.streams import OFFLINE_CHARS_PER_SECOND, OFFLINE_PIECE_CHARS

DEFAULT_MODEL_ID = "longhaul-offline-extractive-1"
LOOSE_MODEL_ID = "longhaul-offline-loose-1"
LOOSE_MALFORMED_SHARE = 0.3
LOOSE_SECONDS = 0.2


def _estimate_tokens(*texts: str) -> int:
    return math.ceil(sum(len(text) for text in texts) / 4)


class PromptCache:
    """The prefixes a provider holds in its cache, each until `ttl_seconds` after its last use (`now`: seconds)."""

    def __init__(self, ttl_seconds: float = CACHE_TTL_SECONDS, now: Callable[[], float] = time.monotonic) -> None:
        self.ttl_seconds = ttl_seconds
        self.now = now
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def use(self, key: str) -> bool:
        """True when `key` is cached (a read, which keeps it another TTL), else False (it is written now)."""
        with self._lock:
            now = self.now()
            hit = self._until.get(key, -math.inf) > now
            self._until[key] = now + self.ttl_seconds
            if len(self._until) > 10_000:  # forget expired prefixes now and then
                self._until = {k: t for k, t in self._until.items() if t > now}
            return hit

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


# The offline provider's cache: one per process, shared by every instance (as a provider's is by every caller).
CACHE = PromptCache()


def prefix_key(model_id: str, request: ModelRequest) -> str:
    """What a cached prefix is keyed by: the model, the system prompt, the schema and the prompt's stable part."""
    stable, _ = request.stable_prefix()
    prefix = json.dumps([model_id, request.system, request.response_schema, stable], sort_keys=True)
    return hashlib.sha256(prefix.encode()).hexdigest()


class OfflineExtractiveModel:
    """Deterministic extractive model for local runs and tests; it makes no network calls."""

    def __init__(self, model_id: str = DEFAULT_MODEL_ID, cache: PromptCache | None = None) -> None:
        self.model_id = model_id
        self.cache = cache or CACHE

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens `generate` reports for `request`."""
        return _estimate_tokens(request.system, request.prompt)

    def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The same response as `generate`, its text given to `on_text` in pieces of `OFFLINE_PIECE_CHARS` at
        `OFFLINE_CHARS_PER_SECOND` (a simulated pace: `clock.pause`, which the local clock's time scale scales)."""
        response = self.generate(request)
        text, piece = response.text, OFFLINE_PIECE_CHARS
        for start in range(0, len(text), piece):
            clock.pause(piece / OFFLINE_CHARS_PER_SECOND)
            on_text(text[start : start + piece])
        return response

    def generate(self, request: ModelRequest) -> ModelResponse:
        try:
            text = self._respond(request)
        except ValidationError as error:
            raise InternalError(f"offline model: malformed {request.task} context: {error}") from error
        if self.model_id == LOOSE_MODEL_ID:
            text = _loosely(text)
        stop = "end_turn"
        if _estimate_tokens(text) > request.max_tokens:  # cut off at the limit, as a provider's answer is
            text, stop = text[: request.max_tokens * 4], "max_tokens"
        return ModelResponse(text=text, usage=self._usage(request, text), model_id=self.model_id, stop_reason=stop)

    def _usage(self, request: ModelRequest, text: str) -> Usage:
        """The prompt's tokens (cached prefix apart, when the gateway marked one) and the answer's."""
        total, output = self.count_tokens(request), _estimate_tokens(text)
        if request.cache_prefix_tokens is None:
            return Usage(input_tokens=total, output_tokens=output)
        prefix = min(request.cache_prefix_tokens, total)
        if self.cache.use(prefix_key(self.model_id, request)):
            return Usage(
                input_tokens=total - prefix, output_tokens=output, cache_read_tokens=prefix, cache_write_tokens=0
            )
        return Usage(input_tokens=total - prefix, output_tokens=output, cache_read_tokens=0, cache_write_tokens=prefix)

    def _respond(self, request: ModelRequest) -> str:
        if not request.offline:
            raise InternalError(f"offline model: no deterministic stand-in for task {request.task!r}")
        return _stand_in(request.offline)(request.context, self.model_id)


def _loosely(text: str) -> str:
    """The loose model's answer: written `LOOSE_SECONDS` later, and now and then wrapped as a chatty model wraps JSON
    (prose, a fence, a trailing comma), which mechanical repair undoes."""
    clock.pause(LOOSE_SECONDS)
    body = text.rstrip()
    if not body.endswith("}") or random.random() >= LOOSE_MALFORMED_SHARE:
        return text
    return f"Here is the JSON you asked for:\n```json\n{body[:-1].rstrip()},}}\n```"


# A task's deterministic answer: (the request's context, the offline model's id) -> the response text.
StandIn = Callable[[dict[str, Any], str], str]


def _stand_in(path: str) -> StandIn:
    module, _, name = path.partition(":")
    try:
        answer: StandIn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise InternalError(f"offline model: no stand-in {path!r} ({error})") from error
    return answer
