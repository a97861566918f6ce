"""A deterministic, offline stand-in for a language model: same input, same bytes out, no network.

It streams too (`stream`): the same answer, in pieces at a simulated writing pace.

It never reads the prompt, but counts it (four characters a token: `count_tokens` is exactly the input it reports)
and honours the request's `max_tokens` as a provider does: a longer answer is cut off there (`stop_reason`
`max_tokens`). Each request names the deterministic stand-in of its task (`ModelRequest.offline`,
"module:function", called with the request's structured `context` and this model's id), which answers in the JSON
shape a remote model is asked for: that is how each workflow brings the offline behaviour of its own tasks (document
analysis quotes verbatim sentences, `longhaul.workflows.document_analysis.offline`; invoice reconciliation reads
the invoices with its own parser) without a change here.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from longhaul.core import clock
from longhaul.core.errors import InternalError
from longhaul.core.llm import ModelRequest, ModelResponse, TextSink, Usage
from longhaul.core.streams import OFFLINE_CHARS_PER_SECOND, OFFLINE_PIECE_CHARS

DEFAULT_MODEL_ID = "longhaul-offline-extractive-1"


def _estimate_tokens(*texts: str) -> int:
    return math.ceil(sum(len(text) for text in texts) / 4)


class OfflineExtractiveModel:
    """Deterministic extractive model for local runs and tests; it makes no network calls."""

    def __init__(self, model_id: str = DEFAULT_MODEL_ID) -> None:
        self.model_id = model_id

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
        stop = "end_turn"
        if _estimate_tokens(text) > request.max_tokens:  # cut off at the limit, as a provider's answer is
            text, stop = text[: request.max_tokens * 4], "max_tokens"
        return ModelResponse(
            text=text,
            usage=Usage(input_tokens=self.count_tokens(request), output_tokens=_estimate_tokens(text)),
            model_id=self.model_id,
            stop_reason=stop,
        )

    def _respond(self, request: ModelRequest) -> str:
        if not request.offline:
            raise InternalError(f"offline model: no deterministic stand-in for task {request.task!r}")
        return _stand_in(request.offline)(request.context, self.model_id)


# A task's deterministic answer: (the request's context, the offline model's id) -> the response text.
StandIn = Callable[[dict[str, Any], str], str]


def _stand_in(path: str) -> StandIn:
    module, _, name = path.partition(":")
    try:
        answer: StandIn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise InternalError(f"offline model: no stand-in {path!r} ({error})") from error
    return answer
