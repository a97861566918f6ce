"""GenAI spans: each model call (GenAI conventions, the usage the ledger settled), each ladder rung with its outcome,
each agent turn and tool call; no content in a span unless content capture is on.

The spans go to the SDK's in-memory exporter through a provider of the test's own (the gateway's `genai.tracer` is
pointed at it), so what the global provider of the process does is left alone. The gateway's scripted models and
the agent's scripted policy are the neighbouring tests'; the offline model answers the whole-job test.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from longhaul import services as wiring
from longhaul.core import faults, genai
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import OutputInvalidError, UpstreamUnavailableError
from longhaul.core.llm import ModelRequest
from longhaul.core.settings import Settings
from longhaul.guardrails.gateway import ModelCalls
from longhaul.services import Services
from longhaul.storage.jobs import NewJob
from tests.unit.test_agent_turns import SCRIPT, decide, run_turns, spec_with
from tests.unit.test_agent_turns import fresh as fresh  # the fixtures
from tests.unit.test_agent_turns import job as job
from tests.unit.test_model_calls import GOOD, JOB, Answer, _calls, _request
from tests.unit.test_model_calls import gateway_services as gateway_services
from tests.unit.test_model_calls import models as models
from tests.unit.test_model_calls import no_faults as no_faults

SECRET = "the-secret-clause-7731"  # a prompt's text: never in a span unless content capture is on


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(genai, "tracer", lambda: provider.get_tracer(genai.TRACER_NAME))
    monkeypatch.delenv(genai.CAPTURE_CONTENT_ENV, raising=False)
    yield exporter
    provider.shutdown()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def calls_of(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s for s in exporter.get_finished_spans() if (s.attributes or {}).get(gen_ai.GEN_AI_OPERATION_NAME) == "chat"
    ]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(exporter: InMemorySpanExporter, span: ReadableSpan) -> ReadableSpan | None:
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans()}
    return by_id.get(span.parent.span_id) if span.parent else None


def secret_request() -> ModelRequest:
    return ModelRequest(
        task="t", prompt_version="v7", system=f"system {SECRET}", prompt=f"read {SECRET}", context={}, max_tokens=100
    )


# ------------------------------------------------------------------------------------------------ model calls


def test_a_model_call_is_a_client_span_with_the_genai_attributes_and_longhauls_own(
    gateway_services, models, spans
) -> None:
    _calls(gateway_services).ask(_request(), Answer)

    [call] = calls_of(spans)
    assert call.name == "chat primary" and call.kind is SpanKind.CLIENT
    assert attrs(call) == {
        gen_ai.GEN_AI_OPERATION_NAME: "chat",
        gen_ai.GEN_AI_PROVIDER_NAME: "longhaul.offline",
        gen_ai.GEN_AI_REQUEST_MODEL: "primary",
        gen_ai.GEN_AI_REQUEST_MAX_TOKENS: 100,
        gen_ai.GEN_AI_RESPONSE_MODEL: "primary",
        gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 10,
        gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("end_turn",),
        "longhaul.route": "default",
        "longhaul.prompt_version": "v7",
        "longhaul.attempt": 1,
        "longhaul.call_id": "1/draft_answer/",
        "longhaul.ladder.rung": "validate",
    }
    assert call.status.status_code is StatusCode.UNSET
    rung = parent_of(spans, call)
    assert rung is not None and rung.name == "ladder validate"  # the call nests in its rung


def test_a_failed_call_then_its_retry_are_two_spans_attempts_1_and_2(gateway_services, models, spans) -> None:
    # Given a route without a fallback whose model fails once
    models["alone"].script = [UpstreamUnavailableError("alone: 503"), (GOOD, "end_turn")]
    first = _calls(gateway_services, route="alone")
    with pytest.raises(UpstreamUnavailableError):
        first.ask(_request(), Answer)

    # When the state machine retries the step (its second delivery)
    ModelCalls(gateway_services, _job(gateway_services), "draft_answer", None, 1, attempt=2).ask(_request(), Answer)

    # Then two spans of the one call: the failed attempt 1 and the answered attempt 2
    failed, retried = calls_of(spans)
    assert [attrs(s)["longhaul.attempt"] for s in (failed, retried)] == [1, 2]
    assert attrs(failed)["longhaul.call_id"] == attrs(retried)["longhaul.call_id"] == "1/draft_answer/"
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)[error_attributes.ERROR_TYPE] == "UpstreamUnavailableError"
    assert gen_ai.GEN_AI_USAGE_INPUT_TOKENS not in attrs(failed)  # nothing was used
    assert error_attributes.ERROR_TYPE not in attrs(retried)
    [charge] = gateway_services.budgets.ledger(JOB)
    assert (attrs(retried)[gen_ai.GEN_AI_USAGE_INPUT_TOKENS], attrs(retried)[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS]) == (
        charge.input_tokens,
        charge.output_tokens,
    )


def test_a_call_answered_from_the_ledger_makes_no_model_call_span(gateway_services, models, spans) -> None:
    _calls(gateway_services).ask(_request(), Answer)
    ModelCalls(gateway_services, _job(gateway_services), "draft_answer", None, 1, attempt=2).ask(_request(), Answer)
    assert len(calls_of(spans)) == 1  # the rerun paid nothing and called nothing


# ------------------------------------------------------------------------------------------- the ladder's rungs


def test_a_wrong_shape_then_a_feedback_retry_are_two_rungs_with_their_outcomes(gateway_services, models, spans) -> None:
    models["primary"].script = [(json.dumps({"answer": "yes"}), "end_turn"), (GOOD, "end_turn")]
    _calls(gateway_services).ask(_request(), Answer)

    rungs = named(spans, "ladder ")
    assert [(attrs(r)["longhaul.ladder.rung"], attrs(r)["longhaul.ladder.outcome"]) for r in rungs] == [
        ("repair", "failed"),  # json_repair cannot invent the missing score
        ("validate", "invalid"),
        ("feedback", "valid"),
    ]
    validate = rungs[1]
    assert attrs(validate)["longhaul.ladder.fields"] == ("score",) and attrs(validate)["longhaul.ladder.errors"] == 1
    assert [attrs(c)["longhaul.ladder.rung"] for c in calls_of(spans)] == ["validate", "feedback"]


def test_malformed_output_is_a_repair_rung_that_repaired(gateway_services, models, spans) -> None:
    models["primary"].script = [('Sure! ```json\n{"answer": "yes", "score": 0.5,\n```', "end_turn")]
    _calls(gateway_services).ask(_request(), Answer)

    repair, validate = named(spans, "ladder ")
    assert attrs(repair)["longhaul.ladder.outcome"] == "repaired"
    assert parent_of(spans, repair) == validate
    assert attrs(validate)["longhaul.ladder.outcome"] == "repaired"


def test_every_rung_failing_ends_with_the_fail_rung_as_output_invalid(gateway_services, models, spans) -> None:
    for name in ("primary", "strong"):
        models[name].script = [(json.dumps({"nope": 1}), "end_turn")]
    with pytest.raises(OutputInvalidError):
        _calls(gateway_services).ask(_request(), Answer)

    rungs = [s for s in named(spans, "ladder ") if attrs(s)["longhaul.ladder.rung"] != "repair"]
    assert [(attrs(r)["longhaul.ladder.rung"], attrs(r)["longhaul.ladder.outcome"]) for r in rungs] == [
        ("validate", "invalid"),
        ("feedback", "invalid"),
        ("stronger", "invalid"),
        ("fail", "failed"),
    ]
    assert attrs(rungs[2])["longhaul.route"] == "strong"
    assert attrs(rungs[-1])[error_attributes.ERROR_TYPE] == "OutputInvalidError"
    assert rungs[-1].status.status_code is StatusCode.ERROR


# ------------------------------------------------------------------------------- a whole job against its ledger


class Found(BaseModel):
    found: list[str]


def stand_in(context: dict[str, Any], model_id: str) -> str:
    return json.dumps({"found": [str(context["n"])] * int(context["n"])})


def test_every_model_call_span_of_an_offline_job_matches_its_charge_in_the_ledger(services: Services, spans) -> None:
    # Given a job whose steps call the offline model: five items and a draft, with a malformed answer (repaired), a
    # wrong shape (a feedback call) and a cut-off answer
    settings = Settings.model_validate(
        {**services.settings.model_dump(by_alias=True), "LONGHAUL_BREAKER_FAILURES": "9"}
    )
    s = dataclasses.replace(services, settings=settings)
    created, _ = s.jobs.create_job(
        NewJob(JOB, "tenant-a", "document-analysis", "k", "h", "m", 1, budget_tokens=1_000_000, budget_cost_micro=10**9)
    )
    s.jobs.transition(JOB, JobStatus.RUNNING, event="job_started")
    faults.install(
        faults.FaultInjector("extract#1=malformed-outputx1,extract#3=schema-invalid-outputx1,draft=truncated-outputx1")
    )

    def ask(step: str, item: int | None, n: int) -> None:
        request = ModelRequest(
            task="find", system="s", prompt=f"find {n} {SECRET}", context={"n": n}, max_tokens=400,
            offline=f"{__name__}:stand_in",
        )  # fmt: skip
        ModelCalls(s, created, step, item, 1).ask(request, Found)

    # When its steps run
    for item in range(5):
        ask("extract", item, item + 1)
    ask("draft", None, 7)

    # Then every model-call span's usage is its charge's, and every settled charge has its span
    ledger = {c.charge_id: c for c in s.budgets.ledger(JOB)}
    answered = [c for c in calls_of(spans) if gen_ai.GEN_AI_USAGE_INPUT_TOKENS in attrs(c)]
    assert len(answered) == len(calls_of(spans)) == 8  # five items, one feedback call, the draft and its feedback
    matching = [
        c
        for c in answered
        if (attrs(c)[gen_ai.GEN_AI_USAGE_INPUT_TOKENS], attrs(c)[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS])
        == (ledger[attrs(c)["longhaul.call_id"]].input_tokens, ledger[attrs(c)["longhaul.call_id"]].output_tokens)
    ]
    assert len(matching) / len(answered) == 1.0
    assert {attrs(c)["longhaul.call_id"] for c in answered} == {i for i, c in ledger.items() if c.status == "settled"}
    assert all(SECRET not in json.dumps(attrs(span), default=str) for span in spans.get_finished_spans())


# ------------------------------------------------------------------------------------------- agents and tools


def test_each_agent_turn_is_an_invoke_agent_span_and_each_tool_call_an_execute_tool_span(
    services: Services, job, monkeypatch: pytest.MonkeyPatch, spans
) -> None:
    SCRIPT[:] = [
        decide("look first", ("look", {"text": SECRET})),
        decide("now say it", ("say", {"text": "hello"})),
        decide("done", final={"said": "hello"}),
    ]
    run_turns(services, job, spec_with(), monkeypatch)

    turns = named(spans, "invoke_agent ")
    assert [t.name for t in turns] == ["invoke_agent talk"] * 3
    assert [attrs(t)["longhaul.agent.turn"] for t in turns] == [0, 1, 2]
    assert [attrs(t)["longhaul.agent.next"] for t in turns] == ["turn", "turn", "done"]
    assert all(attrs(t)[gen_ai.GEN_AI_OPERATION_NAME] == "invoke_agent" for t in turns)
    assert all(attrs(t)[gen_ai.GEN_AI_AGENT_NAME] == "talk" for t in turns)
    look, say = named(spans, "execute_tool ")
    assert (look.name, say.name) == ("execute_tool look", "execute_tool say")
    assert (
        attrs(look)[gen_ai.GEN_AI_OPERATION_NAME] == "execute_tool" and attrs(look)[gen_ai.GEN_AI_TOOL_NAME] == "look"
    )
    assert attrs(look)["longhaul.side_effect"] == "none" and "longhaul.operation_id" not in attrs(look)
    effect = services.effects.get(job.job_id, attrs(say)["longhaul.operation_id"])
    assert effect is not None and effect.tool == "say" and attrs(say)["longhaul.side_effect"] == "irreversible"
    assert (
        attrs(say)[gen_ai.GEN_AI_TOOL_CALL_ID] == effect.operation_id and attrs(say)["longhaul.tool.status"] == "done"
    )
    assert parent_of(spans, look) == turns[0] and parent_of(spans, say) == turns[1]
    for call in calls_of(spans):  # each turn's model call, in its rung, in its turn
        rung = parent_of(spans, call)
        assert rung is not None and parent_of(spans, rung) in turns
    charges = {c.charge_id: c for c in services.checkpoints.charges(job.job_id)}
    assert [(attrs(c)["longhaul.call_id"], attrs(c)[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS]) for c in calls_of(spans)] == [
        (i, charges[i].output_tokens) for i in ("1/talk/0", "1/talk/1", "1/talk/2")
    ]
    assert all(SECRET not in json.dumps(attrs(span), default=str) for span in spans.get_finished_spans())


def test_a_tool_call_the_model_got_wrong_ends_in_error(
    services: Services, job, monkeypatch: pytest.MonkeyPatch, spans
) -> None:
    SCRIPT[:] = [decide("bad input", ("look", {"words": 1})), decide("done", final={"said": "x"})]
    run_turns(services, job, spec_with(), monkeypatch)

    [look] = named(spans, "execute_tool ")
    assert look.status.status_code is StatusCode.ERROR and attrs(look)[error_attributes.ERROR_TYPE] == "tool_refused"


# ------------------------------------------------------------------------------------------------ content capture


def test_no_prompt_or_answer_text_in_any_span_by_default(gateway_services, models, spans) -> None:
    _calls(gateway_services).ask(secret_request(), Answer)
    assert spans.get_finished_spans()
    for span in spans.get_finished_spans():
        values = json.dumps(attrs(span), default=str)
        assert SECRET not in values and "yes" not in values
        assert not {gen_ai.GEN_AI_INPUT_MESSAGES, gen_ai.GEN_AI_OUTPUT_MESSAGES} & set(attrs(span))


def test_content_capture_puts_the_messages_in_the_genai_attributes(
    gateway_services, models, spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")
    _calls(gateway_services).ask(secret_request(), Answer)

    [call] = calls_of(spans)
    sent = json.loads(attrs(call)[gen_ai.GEN_AI_INPUT_MESSAGES])
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": f"read {SECRET}"}]}]
    assert json.loads(attrs(call)[gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": f"system {SECRET}"}
    ]
    [answer] = json.loads(attrs(call)[gen_ai.GEN_AI_OUTPUT_MESSAGES])
    assert answer["role"] == "assistant" and json.loads(answer["parts"][0]["content"]) == json.loads(GOOD)
    assert answer["finish_reason"] == "end_turn"


def test_content_capture_puts_a_tools_arguments_and_result_in_its_span(
    services: Services, job, monkeypatch: pytest.MonkeyPatch, spans
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "1")
    SCRIPT[:] = [decide("look", ("look", {"text": SECRET})), decide("done", final={"said": "x"})]
    run_turns(services, job, spec_with(), monkeypatch)

    [look] = named(spans, "execute_tool ")
    assert json.loads(attrs(look)[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"text": SECRET}
    assert json.loads(attrs(look)[gen_ai.GEN_AI_TOOL_CALL_RESULT]) == {"text": SECRET}


# ------------------------------------------------------------------------------------------------ instrumented


def test_a_bedrock_call_under_botocores_instrumentation_is_not_a_second_genai_span(
    monkeypatch: pytest.MonkeyPatch, spans
) -> None:
    # Given botocore's instrumentation on (its Bedrock extension emits the GenAI span of a Converse call)
    monkeypatch.setattr(genai, "instrumented_provider", lambda provider: provider == "bedrock")

    # When the gateway opens a Bedrock call's span and the call is answered
    with genai.model_call(
        provider="bedrock", model="m", route="default", prompt_version="1", max_tokens=10, attempt=1,
        call_id="1/s/", rung="validate", system="s", prompt=SECRET,
    ) as call:  # fmt: skip
        call.answered(model="m", input_tokens=1, output_tokens=2, finish_reason="end_turn", text="t")

    # Then its span is Longhaul's wrapper, without the GenAI attributes the instrumentation's span carries
    [wrapper] = spans.get_finished_spans()
    assert wrapper.name == "longhaul.model_call" and wrapper.kind is SpanKind.INTERNAL
    assert attrs(wrapper)["longhaul.call_id"] == "1/s/"
    assert not [k for k in attrs(wrapper) if k.startswith("gen_ai.")]


def test_the_instrumentation_is_looked_up_only_for_bedrock() -> None:
    assert genai.instrumented_provider("offline") is False
    assert genai.provider_name("bedrock") == "aws.bedrock"


def _job(s: wiring.Services) -> Any:
    found = s.jobs.get_job(JOB)
    assert found is not None
    return found


def test_an_injected_model_outage_fails_the_call_once_and_the_retried_step_calls_again(
    gateway_services, models, spans
) -> None:
    # Given a model call that fails once (the local platform's `model-unavailable` fault), on a route without fallback
    faults.install(faults.FaultInjector("draft_answer=model-unavailablex1"))
    with pytest.raises(UpstreamUnavailableError):
        _calls(gateway_services, route="alone").ask(_request(), Answer)

    # When the step is retried
    ModelCalls(gateway_services, _job(gateway_services), "draft_answer", None, 1, attempt=2).ask(_request(), Answer)

    # Then the failed call and the call made again are two spans, and the ledger holds the one settled charge
    failed, retried = calls_of(spans)
    assert (attrs(failed)["longhaul.attempt"], attrs(retried)["longhaul.attempt"]) == (1, 2)
    assert attrs(failed)[error_attributes.ERROR_TYPE] == "UpstreamUnavailableError"
    [charge] = gateway_services.budgets.ledger(JOB)
    assert charge.status == "settled" and charge.input_tokens == attrs(retried)[gen_ai.GEN_AI_USAGE_INPUT_TOKENS]
    assert len(models["alone"].requests) == 1  # the outage was before the provider: one request reached it
