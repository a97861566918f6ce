"""The model port's adapters: the deterministic offline model and the Bedrock Converse adapter."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from longhaul.errors import (
    InternalError,
    InvalidInputError,
    LonghaulError,
    PolicyRefusalError,
    RateLimitedError,
    UpstreamUnavailableError,
)
from longhaul.llm import BedrockConverseModel, ModelRequest, OfflineExtractiveModel, gateway_for

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
    )


def _draft_request() -> ModelRequest:
    evidence = [
        {"chunk_id": "d0-p2-c1", "quote": "8.3 Neither party is liable for lost profits.", "relevance": 0.2,
         "document": "msa.pdf", "page": 2},
        {"chunk_id": "d0-p3-c1", "quote": "12.2 Either party may terminate\nfor material breach.",
         "relevance": 0.6, "document": "msa.pdf", "page": 3},
    ]  # fmt: skip
    return ModelRequest(
        task="draft_answer", system="s", prompt="p", context={"question": QUESTION, "evidence": evidence}
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


def test_offline_rejects_a_malformed_context_as_internal() -> None:
    request = ModelRequest(task="draft_answer", system="s", prompt="p", context={"question": QUESTION})

    with pytest.raises(InternalError, match="draft_answer"):
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


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("ThrottlingException", 429, RateLimitedError),
        ("ServiceUnavailableException", 503, UpstreamUnavailableError),
        ("ModelNotReadyException", 429, UpstreamUnavailableError),
        ("ModelTimeoutException", 408, UpstreamUnavailableError),
        ("InternalServerException", 500, UpstreamUnavailableError),
        ("ValidationException", 400, InvalidInputError),
        ("AccessDeniedException", 403, InvalidInputError),
        ("ResourceNotFoundException", 404, InvalidInputError),
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
