"""GenAI spans: each model call, each rung of the validation ladder, each agent turn and each tool call.

Spans are opened with the plain OpenTelemetry API (`trace.get_tracer("longhaul")`) inside whatever span is current
(the step's, in the job's trace: `longhaul.core.tracing`), so they join the job's one trace wherever they run. The
attribute names and values come from the semantic-conventions package (`gen_ai_attributes`, `error_attributes`);
the GenAI conventions are still marked "development" (expect the names to move with the pinned package), so none is
spelled out here. Longhaul's own attributes are the `longhaul.*` names below.

- A model call (`model_call`) is a CLIENT span named `"{gen_ai.operation.name} {gen_ai.request.model}"` ("chat
  <model>") with the provider, the request and response models, the output cap, the usage (exactly what the call's
  ledger entry settles: the gateway records both from one response), the finish reason, and the route, prompt
  version, step attempt and charge id. A failed call ends ERROR with `error.type` = the typed error's class name; a
  call the step's retry makes again is another span (its `longhaul.attempt` one more).
- Bedrock under the maintained botocore instrumentation: that instrumentation's Bedrock extension already emits the
  GenAI CLIENT span of a Converse call (from the same response, so the same usage). The gateway does not emit a second
  one: its span is then an INTERNAL `longhaul.model_call` span carrying Longhaul's attributes (route, prompt version,
  attempt, charge id, `error.type` of the typed error), with the instrumentation's span nested under it
  (`instrumented_provider`).
- Content (the system prompt, the prompt, the answer, a tool's arguments and result) goes into a span only when
  `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is on, as the GenAI conventions' message attributes (JSON
  strings in the conventions' message shape). It is off by default. When the tenant's policy redacts personal data
  (`longhaul.core.redaction.bound`, set by the model gateway and the agent loop), that content is redacted first.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from longhaul.core.redaction import scrub
from longhaul.core.settings import environ

TRACER_NAME = "longhaul"
#: `true` (or `1`): model-call and tool spans carry the prompts, the model's answers and the tools' arguments and
#: results (the GenAI conventions' message attributes); off by default: a span holds counts and names, never content.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# Longhaul's own attributes.
ROUTE = "longhaul.route"
PROMPT_VERSION = "longhaul.prompt_version"
ATTEMPT = "longhaul.attempt"
CALL_ID = "longhaul.call_id"
STEP = "longhaul.step"
ITEM = "longhaul.item"
LADDER_RUNG = "longhaul.ladder.rung"
LADDER_OUTCOME = "longhaul.ladder.outcome"
LADDER_ERRORS = "longhaul.ladder.errors"
LADDER_FIELDS = "longhaul.ladder.fields"
AGENT_TURN = "longhaul.agent.turn"
AGENT_NEXT = "longhaul.agent.next"
AGENT_TOOL_CALLS = "longhaul.agent.tool_calls"
AGENT_LIMIT = "longhaul.agent.limit"
OPERATION_ID = "longhaul.operation_id"
SIDE_EFFECT = "longhaul.side_effect"
TOOL_STATUS = "longhaul.tool.status"
TOOL_REPLAYED = "longhaul.tool.replayed"
# The span of a call whose GenAI span an instrumentation library emits (Bedrock under botocore's instrumentation).
WRAPPER_SPAN = "longhaul.model_call"

CHAT = gen_ai.GenAiOperationNameValues.CHAT.value
INVOKE_AGENT = gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value
EXECUTE_TOOL = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
PROVIDER_ATTRIBUTE = gen_ai.GEN_AI_PROVIDER_NAME
# A route's provider as the conventions name it; the offline and replayed models are Longhaul's own.
PROVIDER_NAMES = {
    "bedrock": gen_ai.GenAiProviderNameValues.AWS_BEDROCK.value,
    "openai": gen_ai.GenAiProviderNameValues.OPENAI.value,
    "offline": "longhaul.offline",
    "replay": "longhaul.replay",
}
_TRUE = frozenset({"1", "true", "yes", "on"})


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def capture_content() -> bool:
    """Whether spans may hold content (prompts, answers, tool arguments): the standard GenAI setting, off by default.
    The function's environment, else the process's (the local platform's functions run in its process: `make run`
    with the variable set turns it on for them)."""
    value = environ().get(CAPTURE_CONTENT_ENV) or os.environ.get(CAPTURE_CONTENT_ENV, "false")
    return value.strip().lower() in _TRUE


def provider_name(provider: str) -> str:
    return PROVIDER_NAMES.get(provider, provider)


def instrumented_provider(provider: str) -> bool:
    """Whether an instrumentation library already emits this provider's GenAI span: Bedrock once botocore's
    instrumentation is on (looked up only when the process imported it: nothing is imported here for it)."""
    if provider != "bedrock" or "opentelemetry.instrumentation.botocore" not in sys.modules:
        return False
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor

    instrumentor = BotocoreInstrumentor()  # type: ignore[no-untyped-call]  # (a singleton: the one instrumented)
    return bool(getattr(instrumentor, "is_instrumented_by_opentelemetry", False))


def fail(span: Span, error: BaseException) -> None:
    """A span ended by a failure: status ERROR and `error.type` = the typed error's class name (never its message,
    which may quote what the step was working on)."""
    name = type(error).__name__
    span.set_attribute(error_attributes.ERROR_TYPE, name)
    span.set_status(Status(StatusCode.ERROR, name))


@contextmanager
def span(name: str, attributes: Mapping[str, Any], *, kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """A span of `name` (current inside the block); an exception leaving the block fails it (`fail`)."""
    attributes = {k: v for k, v in attributes.items() if v is not None}
    with tracer().start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as error:
            fail(current, error)
            raise


def set_attributes(target: Span, attributes: Mapping[str, Any]) -> None:
    target.set_attributes({k: v for k, v in attributes.items() if v is not None})


# ---------------------------------------------------------------------------------------------------- model calls


@contextmanager
def model_call(
    *,
    provider: str,
    model: str,
    route: str,
    prompt_version: str,
    max_tokens: int,
    attempt: int,
    call_id: str,
    rung: str,
    system: str,
    prompt: str,
) -> Iterator[ModelCallSpan]:
    """The span of one model call; its `answered(…)` records the answer's usage."""
    own = {
        ROUTE: route,
        PROMPT_VERSION: prompt_version,
        ATTEMPT: attempt,
        CALL_ID: call_id,
        LADDER_RUNG: rung,
    }
    if instrumented_provider(provider):
        with span(WRAPPER_SPAN, own) as wrapper:
            yield ModelCallSpan(wrapper, instrumented=True)
        return
    attributes: dict[str, Any] = {
        gen_ai.GEN_AI_OPERATION_NAME: CHAT,
        PROVIDER_ATTRIBUTE: provider_name(provider),
        gen_ai.GEN_AI_REQUEST_MODEL: model,
        gen_ai.GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
        **own,
    }
    if capture_content():
        attributes[gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS] = _json([{"type": "text", "content": system}])
        attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = _json(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
        )
    with span(f"{CHAT} {model}", attributes, kind=SpanKind.CLIENT) as current:
        yield ModelCallSpan(current)


@dataclass
class ModelCallSpan:
    span: Span
    instrumented: bool = False  # the GenAI span is the instrumentation library's (nested under this one)

    def answered(
        self,
        *,
        model: str,
        input_tokens: int,
        output_tokens: int,
        finish_reason: str,
        text: str,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
    ) -> None:
        """The call's answer: the response model, the usage, the finish reason (and, only when content capture is
        on, the answer). Nothing on the wrapper of an instrumented call: the instrumentation's span has them."""
        if self.instrumented:
            return
        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_RESPONSE_MODEL: model,
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
            gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens,
            gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: (finish_reason,),
        }
        if cache_read_tokens is not None:
            attributes[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = cache_read_tokens
        if cache_write_tokens is not None:
            attributes[gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = cache_write_tokens
        if capture_content():
            message = {
                "role": "assistant",
                "parts": [{"type": "text", "content": text}],
                "finish_reason": finish_reason,
            }
            attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES] = _json([message])
        set_attributes(self.span, attributes)


# ---------------------------------------------------------------------------------------------- validation ladder


@contextmanager
def ladder_rung(rung: str, *, route: str) -> Iterator[Span]:
    """A rung of the validation ladder (`validate`, `feedback`, `stronger`, `fail`); `judged` records its outcome."""
    with span(f"ladder {rung}", {LADDER_RUNG: rung, ROUTE: route}) as current:
        yield current


def judged(target: Span, outcome: str, errors: Sequence[Mapping[str, str]] = ()) -> None:
    """A rung's outcome (`valid`, `repaired`, `invalid`, `failed`) and the fields it found wrong (names, counts:
    never a value)."""
    attributes: dict[str, Any] = {LADDER_OUTCOME: outcome}
    if errors:
        attributes[LADDER_ERRORS] = len(errors)
        attributes[LADDER_FIELDS] = tuple(sorted({e["field"] for e in errors}))
    set_attributes(target, attributes)


def repair_span(start_ns: int, *, route: str, repaired: bool) -> None:
    """The mechanical repair rung, which runs inside the validation (`ladder.check`): a span from `start_ns` to now."""
    repair = tracer().start_span(
        "ladder repair",
        start_time=start_ns,
        attributes={LADDER_RUNG: "repair", ROUTE: route, LADDER_OUTCOME: "repaired" if repaired else "failed"},
    )
    repair.end()


# ------------------------------------------------------------------------------------------------------- agents


@contextmanager
def agent_turn(agent: str, *, turn: int, conversation: str) -> Iterator[Span]:
    """One turn of an agent step (`invoke_agent <step>`)."""
    attributes = {
        gen_ai.GEN_AI_OPERATION_NAME: INVOKE_AGENT,
        gen_ai.GEN_AI_AGENT_NAME: agent,
        gen_ai.GEN_AI_CONVERSATION_ID: conversation,
        AGENT_TURN: turn,
    }
    with span(f"{INVOKE_AGENT} {agent}", attributes) as current:
        yield current


@contextmanager
def tool_call(tool: str, *, call_id: str, side_effect: str, description: str, arguments: Any) -> Iterator[Span]:
    """One tool call of an agent's turn (`execute_tool <tool>`)."""
    attributes: dict[str, Any] = {
        gen_ai.GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
        gen_ai.GEN_AI_TOOL_NAME: tool,
        gen_ai.GEN_AI_TOOL_CALL_ID: call_id,
        gen_ai.GEN_AI_TOOL_TYPE: "function",
        gen_ai.GEN_AI_TOOL_DESCRIPTION: description,
        SIDE_EFFECT: side_effect,
    }
    if capture_content():
        attributes[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS] = _json(arguments)
    with span(f"{EXECUTE_TOOL} {tool}", attributes) as current:
        yield current


def tool_result(
    target: Span,
    *,
    ok: bool,
    operation_id: str | None,
    status: str | None,
    replayed: bool,
    output: Any,
) -> None:
    """What a tool call came to: its effect's operation id, the outbox status, whether it was answered from the
    outbox; a call the model got wrong (refused, invalid input, an outcome that cannot be told) ends ERROR."""
    set_attributes(target, {OPERATION_ID: operation_id, TOOL_STATUS: status, TOOL_REPLAYED: replayed or None})
    if ok and output is not None and capture_content():
        target.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, _json(output))
    if not ok:
        kind = "unknown_outcome" if status == "unknown" else "tool_refused"
        target.set_attribute(error_attributes.ERROR_TYPE, kind)
        target.set_status(Status(StatusCode.ERROR, kind))


def _json(value: Any) -> str:
    """Content as a span attribute: JSON, with the personal data the tenant's policy redacts replaced (`scrub`)."""
    return scrub(json.dumps(value, ensure_ascii=False, default=str))
