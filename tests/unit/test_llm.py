"""The model port's adapters: the deterministic offline model and the Bedrock Converse adapter."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.retries.standard import ExponentialBackoff
from botocore.stub import Stubber

from longhaul.adapters import aws
from longhaul.adapters.models import BedrockConverseModel, ModelRequest, OfflineExtractiveModel, gateway_for
from longhaul.adapters.models.bedrock import split_inference_profile
from longhaul.core.errors import (
    InternalError,
    LonghaulError,
    PlatformConfigurationError,
    PolicyRefusalError,
    RateLimitedError,
    UpstreamUnavailableError,
)
from longhaul.engine.failures import sanitize
from longhaul.workflows.document_analysis import offline
from tests.unit.aws_env import offline_credentials

QUESTION = "What is the liability cap and how can the agreement be terminated?"
PASSAGES = [
    {
        "chunk_id": "d0-p2-c1",
        "text": "8. Limitation of liability\n8.2 Each party's total liability shall not exceed the Fees\n"
        "paid in the preceding twelve months. 8.3 Neither party is liable for lost profits.",
    },
    {
        "chunk_id": "d0-p3-c1",
        "text": "12.2 Either party may terminate for material breach. The weather was pleasant.",
    },
    {"chunk_id": "d1-p1-c1", "text": "Invoices are payable within thirty days."},
]


def _extract_request(passages: list[dict[str, str]] = PASSAGES) -> ModelRequest:
    return ModelRequest(
        task="extract_evidence",
        system="system",
        prompt="prompt",
        context={"question": QUESTION, "passages": passages},
        offline=offline.EXTRACT,
    )


def _draft_request() -> ModelRequest:
    evidence = [
        {"chunk_id": "d0-p2-c1", "quote": "8.3 Neither party is liable for lost profits.", "relevance": 0.2,
         "document": "msa.pdf", "page": 2},
        {"chunk_id": "d0-p3-c1", "quote": "12.2 Either party may terminate\nfor material breach.",
         "relevance": 0.6, "document": "msa.pdf", "page": 3},
    ]  # fmt: skip
    return ModelRequest(
        task="draft_answer",
        system="s",
        prompt="p",
        context={"question": QUESTION, "evidence": evidence},
        offline=offline.DRAFT,
    )


# ---------------------------------------------------------------- offline


def test_offline_evidence_quotes_are_verbatim_sentences_of_their_passage() -> None:
    response = OfflineExtractiveModel().generate(_extract_request())

    evidence = json.loads(response.text)["evidence"]
    texts = {p["chunk_id"]: p["text"] for p in PASSAGES}
    assert evidence, "the question shares terms with two passages"
    for item in evidence:
        assert item["quote"] in texts[item["chunk_id"]]
        assert 0 < item["relevance"] <= 1
    quotes = [item["quote"] for item in evidence]
    assert "12.2 Either party may terminate for material breach." in quotes
    assert "The weather was pleasant." not in quotes
    assert "d1-p1-c1" not in {item["chunk_id"] for item in evidence}


def test_offline_output_is_byte_identical_for_the_same_input() -> None:
    first = OfflineExtractiveModel().generate(_extract_request())
    second = OfflineExtractiveModel().generate(_extract_request())

    assert first == second
    assert first.model_id == "longhaul-offline-extractive-1"


def test_offline_returns_no_evidence_when_nothing_overlaps() -> None:
    response = OfflineExtractiveModel().generate(
        _extract_request([{"chunk_id": "x", "text": "Completely unrelated prose about gardens."}])
    )

    assert json.loads(response.text) == {"evidence": []}


def test_offline_draft_says_it_is_offline_and_cites_quotes_unchanged() -> None:
    request = _draft_request()

    draft = json.loads(OfflineExtractiveModel("offline-test").generate(request).text)

    assert "offline-test" in draft["answer"]
    assert "no language model" in draft["answer"]
    cited = [c for claim in draft["claims"] for c in claim["citations"]]
    assert cited == [
        {"chunk_id": "d0-p3-c1", "quote": "12.2 Either party may terminate\nfor material breach."},
        {"chunk_id": "d0-p2-c1", "quote": "8.3 Neither party is liable for lost profits."},
    ]


def test_offline_usage_is_estimated_from_characters() -> None:
    request = _extract_request()

    response = OfflineExtractiveModel().generate(request)

    assert response.usage.input_tokens == math.ceil(len(request.system + request.prompt) / 4)
    assert response.usage.output_tokens == math.ceil(len(response.text) / 4)
    # its token counter is the input it reports: the gateway reserves a prompt at that count
    assert OfflineExtractiveModel().count_tokens(request) == response.usage.input_tokens


def test_offline_answers_are_cut_off_at_max_tokens_as_a_providers_are() -> None:
    whole = OfflineExtractiveModel().generate(_extract_request())
    cap = whole.usage.output_tokens // 2
    cut = OfflineExtractiveModel().generate(_extract_request().model_copy(update={"max_tokens": cap}))
    assert (cut.stop_reason, cut.usage.output_tokens) == ("max_tokens", cap)
    assert whole.text.startswith(cut.text) and whole.stop_reason == "end_turn"


def test_offline_rejects_a_malformed_context_as_internal() -> None:
    request = ModelRequest(
        task="draft_answer", system="s", prompt="p", context={"question": QUESTION}, offline=offline.DRAFT
    )

    with pytest.raises(InternalError, match="draft_answer"):
        OfflineExtractiveModel().generate(request)


def test_offline_refuses_a_task_without_a_stand_in() -> None:
    request = ModelRequest(task="summarize", system="s", prompt="p", context={"question": QUESTION})

    with pytest.raises(InternalError, match="no deterministic stand-in for task 'summarize'"):
        OfflineExtractiveModel().generate(request)


def test_gateway_for_picks_the_provider() -> None:
    assert isinstance(gateway_for("offline", "m"), OfflineExtractiveModel)
    bedrock = gateway_for("bedrock", "anthropic.claude", bedrock_client=object())
    assert isinstance(bedrock, BedrockConverseModel)
    assert bedrock.model_id == "anthropic.claude"
    with pytest.raises(ValueError, match="openai"):
        gateway_for("openai", "gpt")


# ---------------------------------------------------------------- bedrock

MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture
def bedrock() -> Iterator[tuple[BedrockConverseModel, Stubber]]:
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    with Stubber(client) as stubber:
        yield BedrockConverseModel(MODEL_ID, client=client), stubber
        stubber.assert_no_pending_responses()


def _converse_response(stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": '{"evidence": '}, {"text": "[]}"}]}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 321, "outputTokens": 7, "totalTokens": 328},
        "metrics": {"latencyMs": 412},
    }


def test_bedrock_sends_the_prompt_and_maps_the_response(
    bedrock: tuple[BedrockConverseModel, Stubber],
) -> None:
    model, stubber = bedrock
    request = ModelRequest(task="extract_evidence", system="Be exact.", prompt="Question?", context={}, max_tokens=99)
    stubber.add_response(
        "converse",
        _converse_response(),
        expected_params={
            "modelId": MODEL_ID,
            "system": [{"text": "Be exact."}],
            "messages": [{"role": "user", "content": [{"text": "Question?"}]}],
            "inferenceConfig": {"maxTokens": 99, "temperature": 0},
        },
    )

    response = model.generate(request)

    assert response.text == '{"evidence": []}'
    assert (response.usage.input_tokens, response.usage.output_tokens) == (321, 7)
    assert (response.model_id, response.stop_reason) == (MODEL_ID, "end_turn")


def test_bedrock_asks_for_structured_output_through_one_forced_tool_and_returns_its_input(
    bedrock: tuple[BedrockConverseModel, Stubber],
) -> None:
    model, stubber = bedrock
    schema = {"type": "object", "properties": {"total": {"type": "string"}}, "required": ["total"]}
    request = ModelRequest(
        task="extract_invoice", system="Extract.", prompt="Invoice…", context={}, max_tokens=50, response_schema=schema
    )
    answer = {"toolUse": {"toolUseId": "t1", "name": "answer", "input": {"total": "$1,234.50"}}}
    stubber.add_response(
        "converse",
        {
            "output": {"message": {"role": "assistant", "content": [answer]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 40, "outputTokens": 9, "totalTokens": 49},
            "metrics": {"latencyMs": 100},
        },
        expected_params={
            "modelId": MODEL_ID,
            "system": [{"text": "Extract."}],
            "messages": [{"role": "user", "content": [{"text": "Invoice…"}]}],
            "inferenceConfig": {"maxTokens": 50, "temperature": 0},
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": "answer",
                            "description": "Give the extract_invoice answer, matching the schema exactly.",
                            "inputSchema": {"json": schema},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": "answer"}},
            },
        },
    )

    response = model.generate(request)

    assert json.loads(response.text) == {"total": "$1,234.50"}
    assert response.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("ThrottlingException", 429, RateLimitedError),
        ("ServiceUnavailableException", 503, UpstreamUnavailableError),
        ("ModelNotReadyException", 429, UpstreamUnavailableError),
        ("ModelTimeoutException", 408, UpstreamUnavailableError),
        ("InternalServerException", 500, UpstreamUnavailableError),
        ("ValidationException", 400, PlatformConfigurationError),
        ("AccessDeniedException", 403, PlatformConfigurationError),
        ("ResourceNotFoundException", 404, PlatformConfigurationError),
        ("SomethingNewException", 502, UpstreamUnavailableError),
        ("SomethingNewException", 400, InternalError),
    ],
)
def test_bedrock_errors_become_typed_errors(
    bedrock: tuple[BedrockConverseModel, Stubber], code: str, status: int, expected: type[LonghaulError]
) -> None:
    model, stubber = bedrock
    stubber.add_client_error("converse", service_error_code=code, service_message="nope", http_status_code=status)

    with pytest.raises(expected, match=code) as caught:
        model.generate(ModelRequest(task="draft_answer", system="s", prompt="p", context={}))

    assert type(caught.value) is expected


def test_a_guardrail_intervention_is_a_policy_refusal(bedrock: tuple[BedrockConverseModel, Stubber]) -> None:
    model, stubber = bedrock
    stubber.add_response("converse", _converse_response("guardrail_intervened"))

    with pytest.raises(PolicyRefusalError):
        model.generate(ModelRequest(task="draft_answer", system="s", prompt="p", context={}))


def _platform_error(
    bedrock: tuple[BedrockConverseModel, Stubber], code: str, message: str
) -> PlatformConfigurationError:
    model, stubber = bedrock
    stubber.add_client_error("converse", service_error_code=code, service_message=message, http_status_code=403)
    with pytest.raises(PlatformConfigurationError) as caught:
        model.generate(ModelRequest(task="draft_answer", system="s", prompt="p", context={}))
    return caught.value


def test_missing_model_access_names_what_to_enable_and_leaks_no_account(
    bedrock: tuple[BedrockConverseModel, Stubber],
) -> None:
    aws_message = (
        "User: arn:aws:sts::123456789012:assumed-role/Longhaul-prod-draft/fn is not authorized to perform: "
        "bedrock:InvokeModel on resource: arn:aws:bedrock:us-east-1::foundation-model/" + MODEL_ID
    )

    error = _platform_error(bedrock, "AccessDeniedException", aws_message)

    assert error.kind == "platform-misconfigured"
    assert not error.retryable
    assert f"enable model access to {MODEL_ID} in us-east-1" in error.message
    assert "Marketplace subscription" in error.message and "inference profile" in error.message
    assert "123456789012" not in error.message and "arn:" not in error.message
    assert "AccessDeniedException" in error.message


def test_a_cross_region_profile_names_its_geography_and_base_model(
    bedrock: tuple[BedrockConverseModel, Stubber],
) -> None:
    model, _ = bedrock
    model.model_id = "eu.anthropic.claude-sonnet-4-20250514-v1:0"

    error = _platform_error(bedrock, "ValidationException", "The provided model identifier is invalid.")

    assert "enable model access to anthropic.claude-sonnet-4-20250514-v1:0 in us-east-1" in error.message
    assert "'eu' cross-region profile" in error.message
    assert sanitize(error.message) == error.message, "the recorded (bounded) message keeps the whole hint"


def test_a_platform_configuration_error_emits_the_alarmed_metric(
    bedrock: tuple[BedrockConverseModel, Stubber], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)

    _platform_error(bedrock, "AccessDeniedException", "You don't have access to the model.")

    records = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    (metric,) = [r for r in records if "PlatformMisconfigured" in r]
    assert metric["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["provider"]]
    assert metric["provider"] == "bedrock"


def test_a_tenant_caused_error_emits_no_platform_metric(
    bedrock: tuple[BedrockConverseModel, Stubber], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    model, stubber = bedrock
    stubber.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)

    with pytest.raises(RateLimitedError):
        model.generate(ModelRequest(task="draft_answer", system="s", prompt="p", context={}))

    assert "PlatformMisconfigured" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", ("us", "anthropic.claude-sonnet-4-20250514-v1:0")),
        ("apac.amazon.nova-pro-v1:0", ("apac", "amazon.nova-pro-v1:0")),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", (None, "anthropic.claude-3-5-haiku-20241022-v1:0")),
        ("amazon.nova-lite-v1:0", (None, "amazon.nova-lite-v1:0")),
    ],
)
def test_inference_profiles_are_told_from_base_models(model_id: str, expected: tuple[str | None, str]) -> None:
    assert split_inference_profile(model_id) == expected


# ---------------------------------------------------------------- the model client's time budget


def test_the_model_client_uses_the_model_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_credentials(monkeypatch)
    aws.clear_clients()
    try:
        config = aws.client("bedrock-runtime").meta.config
    finally:
        aws.clear_clients()

    assert (config.connect_timeout, config.read_timeout) == (aws.MODEL_CONNECT_TIMEOUT, aws.MODEL_READ_TIMEOUT)
    assert config.retries == {"mode": "standard", "total_max_attempts": aws.MODEL_MAX_ATTEMPTS}


def test_one_model_call_with_its_retries_ends_inside_the_model_steps_timeout() -> None:
    worst = aws.worst_case_seconds(
        connect_timeout=aws.MODEL_CONNECT_TIMEOUT, read_timeout=aws.MODEL_READ_TIMEOUT, attempts=aws.MODEL_MAX_ATTEMPTS
    )

    assert worst + aws.MODEL_STEP_HEADROOM <= aws.MODEL_STEP_TIMEOUT
    assert aws.MODEL_READ_TIMEOUT >= 60, "a long generation (Converse answers when it is done) needs a minute"


@pytest.mark.parametrize(("budget", "attempts"), [(105, 1), (105, 2), (105, 3), (300, 4), (60, 2)])
def test_the_derived_read_timeout_is_the_longest_that_fits(budget: int, attempts: int) -> None:
    read = aws.read_timeout_within(budget, connect_timeout=5, attempts=attempts)

    assert aws.worst_case_seconds(connect_timeout=5, read_timeout=read, attempts=attempts) <= budget
    assert aws.worst_case_seconds(connect_timeout=5, read_timeout=read + 1, attempts=attempts) > budget


def test_a_budget_too_small_for_the_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="no read timeout"):
        aws.read_timeout_within(10, connect_timeout=5, attempts=3)


class _RetryContext:
    """What botocore's backoff reads: the attempt number and a response asking for a long `x-amz-retry-after`."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number
        self.http_response = type("Response", (), {"headers": {"x-amz-retry-after": "3600000"}})()


@pytest.mark.parametrize("attempts", [1, 2, 3, 4, 6, 8])
def test_the_backoff_bound_is_botocores_longest_sleep(attempts: int) -> None:
    throttled = type("Detector", (), {"is_throttling_error_from_context": lambda self, context: True})()
    backoff = ExponentialBackoff(random=lambda: 1.0, throttling_detector=throttled)

    longest = sum(backoff.delay_amount(_RetryContext(i)) for i in range(1, attempts))

    assert aws.retry_backoff_bound(attempts) == pytest.approx(longest)


@pytest.mark.parametrize("max_attempts", [aws.MODEL_MAX_ATTEMPTS, 3])
def test_the_client_makes_exactly_the_configured_attempts(monkeypatch: pytest.MonkeyPatch, max_attempts: int) -> None:
    offline_credentials(monkeypatch)
    config = aws.MODEL_CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": max_attempts}))
    client = boto3.session.Session().client("bedrock-runtime", config=config)
    sent: list[str] = []

    def unavailable(request: Any, **_: Any) -> AWSResponse:
        sent.append(request.url)
        return AWSResponse(request.url, 503, {}, _Raw(b'{"message": "busy"}'))

    client.meta.events.register("before-send.bedrock-runtime.Converse", unavailable)

    with pytest.raises(ClientError):
        client.converse(modelId=MODEL_ID, messages=[{"role": "user", "content": [{"text": "p"}]}])

    assert len(sent) == max_attempts


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body
