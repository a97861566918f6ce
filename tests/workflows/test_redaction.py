"""Personal data redaction through the local platform, as a tenant and an operator would see it: a document holding
e-mail addresses, IBANs and phone numbers, the tenant's policy set to redact them, a job run; the kept prompts read
through the operators' prompt view have placeholders, and the model was sent the prompt unchanged, unless the policy
says `redact_before_model` (then the model saw the placeholders and the result has the values back)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from local.platform import LocalPlatform
from longhaul.adapters.models.offline import OfflineExtractiveModel
from longhaul.core.llm import ModelRequest, ModelResponse
from tests.workflows.conftest import Client

VALUES = ("billing@northwind.example", "DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "+44 20 7946 0958")
LETTER = (
    "Northwind Analytics Ltd\n\nPayment details\n\nPlease pay every invoice to our account IBAN "
    "DE89 3704 0044 0532 0130 00, or in pounds to GB82WEST12345698765432. Questions about a payment go to "
    "billing@northwind.example or to our accounts team on +44 20 7946 0958. Invoice INV-2024-000123 of "
    "2024-01-15 for 1,234.56 EUR is due in 30 days.\n"
)
REQUEST = {
    "workflow": "document-analysis",
    "input": {
        "question": "Where should payments go: which IBAN, which e-mail address and which phone number?",
        "documents": [{"name": "payment_details.txt", "media_type": "text/plain", "text": LETTER}],
    },
}


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[ModelRequest]:
    """Every request the offline model receives (the platform's functions run in this process)."""
    seen: list[ModelRequest] = []
    generate = OfflineExtractiveModel.generate

    def recording(self: OfflineExtractiveModel, request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return generate(self, request)

    monkeypatch.setattr(OfflineExtractiveModel, "generate", recording)
    return seen


@pytest.fixture
def ops(platform: LocalPlatform) -> Iterator[Client]:
    operator = Client(platform, "ops")
    yield operator
    # The session's other tests use alpha: its policy goes back to redacting nothing.
    reset = {"redact": None, "redact_before_model": None}
    requests.patch(
        f"{operator.base}/v1/ops/tenants/alpha/policy",
        data=json.dumps(reset),
        headers={**operator.headers, "Content-Type": "application/json"},
        timeout=30,
    )


def _set_policy(ops: Client, **policy: Any) -> None:
    response = requests.patch(
        f"{ops.base}/v1/ops/tenants/alpha/policy",
        data=json.dumps(policy),
        headers={**ops.headers, "Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["policy"]["redact"] == policy["redact"]


def _kept_prompts(ops: Client, job_id: str) -> list[dict[str, Any]]:
    calls = ops.get(f"/v1/ops/jobs/{job_id}/calls").json()["calls"]
    assert calls
    prompts = []
    for call in calls:
        link = call["links"]["prompt"]
        viewed = ops.get(link[link.index("/v1/") :])
        assert viewed.status_code == 200, viewed.text
        prompts.append(viewed.json())
    return prompts


def test_kept_prompts_show_placeholders_and_the_model_gets_the_document_as_it_is(
    platform: LocalPlatform, alpha: Client, ops: Client, sent: list[ModelRequest]
) -> None:
    # Given alpha's policy redacts e-mail addresses, IBANs and phone numbers (an unknown kind is refused by name)
    bad = requests.patch(
        f"{ops.base}/v1/ops/tenants/alpha/policy",
        data=json.dumps({"redact": ["email", "passport"]}),
        headers={**ops.headers, "Content-Type": "application/json"},
        timeout=30,
    )
    assert bad.status_code == 422 and "'passport'" in json.dumps(bad.json()["errors"])
    _set_policy(ops, redact=["email", "iban", "phone"])

    # When a job reads a document holding them
    job_id = alpha.submit(REQUEST)
    assert alpha.wait(job_id)["status"] == "completed"

    # Then every kept prompt, as the operators' view shows it, has placeholders where the values were
    prompts = _kept_prompts(ops, job_id)
    text = json.dumps(prompts)
    assert not [v for v in VALUES if v in text]
    assert "<IBAN_1>" in text and "<IBAN_2>" in text and "<EMAIL_1>" in text and "<PHONE_1>" in text
    assert "INV-2024-000123" in text and "1,234.56 EUR" in text  # an invoice number and an amount are left alone
    assert all(p["redacted"] == ["email", "iban", "phone"] and p["redacted_before_model"] is False for p in prompts)
    # and the model was sent the document unchanged
    assert any(all(v in r.prompt for v in VALUES) for r in sent)


def test_redact_before_model_sends_placeholders_and_the_result_has_the_values(
    platform: LocalPlatform, alpha: Client, ops: Client, sent: list[ModelRequest]
) -> None:
    # Given alpha's policy also redacts before the model
    _set_policy(ops, redact=["email", "iban", "phone"], redact_before_model=True)

    # When a job reads the document
    job_id = alpha.submit(REQUEST)
    assert alpha.wait(job_id)["status"] == "completed"

    # Then the model saw placeholders only, the kept prompts are what it saw
    mine = [r for r in sent if "payment_details" in json.dumps(r.context) or "IBAN" in r.prompt]
    assert mine and not [v for r in mine for v in VALUES if v in r.prompt or v in json.dumps(r.context)]
    assert any("<IBAN_1>" in r.prompt for r in mine)
    prompts = _kept_prompts(ops, job_id)
    assert all(p["redacted_before_model"] is True for p in prompts)
    assert not [v for v in VALUES if v in json.dumps(prompts)]
    # and the result has the values back, no placeholder
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert "<IBAN_" not in json.dumps(result) and "<EMAIL_" not in json.dumps(result)
    assert any(v in json.dumps(result) for v in VALUES)
