"""The validation ladder's rungs that need no I/O: validate, repair mechanically, ask again with the errors.

1. validate the output against the step's pydantic schema;
2. repair it mechanically (`json_repair`: quotes, commas, brackets, fences — it never invents a value), unless the
   provider says the output was cut off at its token limit: a truncated answer is never repaired into success;
3. a feedback retry: the same request with the validation errors appended (bounded, `FEEDBACK_RETRIES`);
4. the route's stronger route, with the same feedback;
5. `output-invalid`.
The driver (`longhaul.guardrails.gateway`) makes the calls and records each rung as an event; the ladder's metrics
are counted here: `ValidationFailures` (one per invalid field of an answer, by model, route, prompt version and the
field's top-level name) and `ValidationEscalations` (per answer the ladder judged, by route: 1 if it climbed to the
stronger route, else 0 — its average is the route's escalation rate).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from longhaul.core.llm import TRUNCATED, ModelRequest, ModelResponse
from longhaul.core.observability import ESCALATIONS_METRIC, VALIDATION_FAILURES_METRIC, emit

FEEDBACK_RETRIES = 1
MAX_ERRORS = 10
_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)

T = TypeVar("T", bound=BaseModel)
Rung = Literal["validate", "repair", "feedback", "stronger"]


@dataclass
class Outcome(Generic[T]):
    """A response through rungs 1 and 2: the value if it passed, else what was wrong."""

    value: T | None
    errors: list[dict[str, str]] = field(default_factory=list)
    repaired: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.value is not None


def _errors(error: ValidationError | ValueError) -> list[dict[str, str]]:
    if isinstance(error, ValidationError):
        return [
            {"field": ".".join(str(p) for p in e["loc"]) or "(root)", "error": e["type"], "message": e["msg"][:200]}
            for e in error.errors()[:MAX_ERRORS]
        ]
    return [{"field": "(root)", "error": "json_invalid", "message": str(error)[:200]}]


def json_candidate(text: str) -> str:
    """The JSON inside a fenced block or between the first `{` and the last `}` (prose around it is dropped)."""
    fenced = _FENCED.search(text)
    if fenced:
        return fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def _with_defaults(value: Any, defaults: Mapping[str, Any]) -> Any:
    return {**defaults, **value} if isinstance(value, dict) and defaults else value


def check(response: ModelResponse, schema: type[T] | None, *, defaults: Mapping[str, Any] | None = None) -> Outcome[T]:
    """Rungs 1 and 2 for one response. Without a schema (free text) only truncation fails."""
    truncated = response.stop_reason in TRUNCATED
    cut = {"field": "(output)", "error": "truncated", "message": "cut off at the token limit"}
    if schema is None:
        return Outcome(value=None, errors=[cut]) if truncated else Outcome(value=None, errors=[])
    defaults = defaults or {}
    try:
        value = schema.model_validate(_with_defaults(json.loads(response.text), defaults))
        if not truncated:
            return Outcome(value=value)
    except (ValidationError, ValueError) as error:
        first = _errors(error)
        if truncated:  # never repaired: whatever a repair makes of a cut-off answer is a guess
            return Outcome(value=None, errors=[cut, *first], truncated=True)
        import json_repair  # only malformed output needs it: kept out of cold starts

        try:
            repaired: Any = json_repair.loads(json_candidate(response.text))
            return Outcome(value=schema.model_validate(_with_defaults(repaired, defaults)), repaired=True)
        except (ValidationError, ValueError, RecursionError) as again:
            return Outcome(value=None, errors=_errors(again) if isinstance(again, ValidationError) else first)
    return Outcome(value=None, errors=[cut], truncated=True)


#: The `field` of a failure that is not one of the schema's own top-level fields (an invented key, a whole answer that
#: is not an object): an answer's own key names never become metric dimensions.
OTHER_FIELD = "(other)"


def metric_field(error_field: str, schema: type[BaseModel] | None) -> str:
    """The bounded `field` dimension of a validation error: its top-level field if the schema has it (or a marker the
    ladder itself writes, `(root)`, `(output)`), else `OTHER_FIELD`."""
    top = error_field.split(".")[0]
    if top.startswith("(") or (schema is not None and top in schema.model_fields):
        return top
    return OTHER_FIELD


def count_failures(
    outcome: Outcome[Any], schema: type[BaseModel] | None, *, model: str, route: str, prompt_version: str
) -> None:
    """One `ValidationFailures` per field an answer got wrong (a field wrong twice counts once)."""
    for name in sorted({metric_field(e["field"], schema) for e in outcome.errors}):
        emit(VALIDATION_FAILURES_METRIC, model=model, route=route, prompt_version=prompt_version, field=name)


def count_escalation(route: str, *, escalated: bool) -> None:
    """Per answer the ladder judged on `route` (the step's): whether it had to ask the stronger route."""
    emit(ESCALATIONS_METRIC, 1 if escalated else 0, route=route)


def with_feedback(request: ModelRequest, outcome: Outcome[Any]) -> ModelRequest:
    """The request again, telling the model what was wrong with its previous answer."""
    lines = [f"- {e['field']}: {e['message']}" for e in outcome.errors]
    if outcome.truncated:
        advice = "Your previous answer was cut off at the token limit. Answer again, more briefly, complete."
    else:
        advice = "Your previous answer did not match the required JSON schema. Answer again, fixing:"
    prompt = f"{request.prompt}\n\n{advice}\n" + "\n".join(lines) + "\nReturn only the corrected JSON object."
    return request.model_copy(update={"prompt": prompt})
