"""The model gateway under a tenant's redaction policy: what is kept has placeholders, what the model receives is
unchanged unless `redact_before_model`, where the placeholders of its answer are put back in the result.

The adapters are the scripted fakes of `test_model_calls` (they record what they were sent); the rest is real on moto.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel

from longhaul import services as wiring
from longhaul.core.budgets import TenantPolicy
from longhaul.core.contracts import KeptPrompt, KeptResponse
from longhaul.core.llm import ModelRequest
from longhaul.operations import calls as ops_calls
from longhaul.storage.artifacts import prompt_key, response_key
from tests.unit import test_model_calls as base
from tests.unit.test_model_calls import JOB, _calls

# The fixtures of the gateway's own tests: scripted models, the routes, no faults left behind.
gateway_services, models, no_faults = base.gateway_services, base.models, base.no_faults

DOCUMENT = (
    "Supplier: write to billing@acme.example or call +44 20 7946 0958. "
    "Pay DE89 3704 0044 0532 0130 00 by 2024-01-15, invoice INV-2024-000123, amount 1,234.56 EUR."
)


class Payee(BaseModel):
    email: str
    iban: str
    phone: str


ANSWER = {"email": "billing@acme.example", "iban": "DE89 3704 0044 0532 0130 00", "phone": "+44 20 7946 0958"}


def _request() -> ModelRequest:
    return ModelRequest(
        task="t", prompt_version="v1", system="Extract the payee.", prompt=DOCUMENT, context={"doc": DOCUMENT}
    )


def _policy(s: wiring.Services, **fields: object) -> None:
    s.budgets.put_policy("tenant-a", TenantPolicy.model_validate({"redact": ["email", "phone", "iban"], **fields}))


def _kept(s: wiring.Services) -> tuple[KeptPrompt, KeptResponse]:
    [charge] = s.budgets.ledger(JOB)
    assert charge.prompt_hash and charge.response_hash
    prompt = KeptPrompt.model_validate(s.artifacts.get_json(prompt_key(JOB, charge.prompt_hash)))
    response = KeptResponse.model_validate(s.artifacts.get_json(response_key(JOB, charge.response_hash)))
    return prompt, response


def test_kept_prompt_and_response_have_placeholders_while_the_model_gets_the_prompt_as_it_is(
    gateway_services, models
) -> None:
    s = gateway_services
    _policy(s)
    models["primary"].script = [(json.dumps(ANSWER), "end_turn")]
    value, _ = _calls(s).ask(_request(), Payee)
    assert value == Payee(**ANSWER)
    [sent] = models["primary"].requests
    assert sent.prompt == DOCUMENT  # the model-facing prompt is unchanged
    prompt, response = _kept(s)
    assert prompt.prompt == (
        "Supplier: write to <EMAIL_1> or call <PHONE_1>. Pay <IBAN_1> by 2024-01-15, invoice INV-2024-000123, "
        "amount 1,234.56 EUR."
    )
    assert prompt.redacted == ["email", "iban", "phone"] and prompt.redacted_before_model is False
    assert prompt.prompt_hash == sent.prompt_hash()  # still the call's hash (the ledger's)
    assert json.loads(response.text) == {"email": "<EMAIL_1>", "iban": "<IBAN_1>", "phone": "<PHONE_1>"}
    assert response.redacted == ["email", "iban", "phone"]
    assert "billing@acme.example" not in json.dumps(s.artifacts.get_json(prompt_key(JOB, prompt.prompt_hash)))


def test_redact_before_model_sends_placeholders_and_puts_the_values_back_in_the_result(
    gateway_services, models
) -> None:
    s = gateway_services
    _policy(s, redact_before_model=True)
    placeholders = {"email": "<EMAIL_1>", "iban": "<IBAN_1>", "phone": "<PHONE_1>"}
    models["primary"].script = [(json.dumps(placeholders), "end_turn")]  # the model answers with what it saw
    value, response = _calls(s).ask(_request(), Payee)
    assert value == Payee(**ANSWER)  # mapped back
    assert json.loads(response.text) == ANSWER
    [sent] = models["primary"].requests
    assert "billing@acme.example" not in sent.prompt and "<EMAIL_1>" in sent.prompt and "<IBAN_1>" in sent.prompt
    assert sent.context == {"doc": sent.prompt}  # the offline model's context is redacted alike
    prompt, kept = _kept(s)
    assert prompt.prompt == sent.prompt and prompt.redacted_before_model is True
    assert json.loads(kept.text) == placeholders


def test_a_retried_call_redacts_to_the_same_placeholders_and_is_reused_from_the_ledger(
    gateway_services, models
) -> None:
    s = gateway_services
    _policy(s, redact_before_model=True)
    models["primary"].script = [(json.dumps({"email": "<EMAIL_1>", "iban": "<IBAN_1>", "phone": "<PHONE_1>"}), "x")]
    _calls(s).ask(_request(), Payee)
    again, _ = _calls(s).ask(_request(), Payee)  # the step delivered again: the mapping was never stored
    assert again == Payee(**ANSWER) and len(models["primary"].requests) == 1
    assert len(s.budgets.ledger(JOB)) == 1


def test_the_operators_view_redacts_a_copy_kept_before_the_policy(gateway_services, models, monkeypatch) -> None:
    s = gateway_services
    monkeypatch.setattr(ops_calls, "JOB_ID", re.compile(r"^job_"))  # (this module's job id is not a minted one)
    models["primary"].script = [(json.dumps(ANSWER), "end_turn")]
    _calls(s).ask(_request(), Payee)  # no policy yet: kept as sent
    prompt, response = _kept(s)
    assert prompt.redacted is None and "billing@acme.example" in prompt.prompt
    _policy(s)
    viewed = ops_calls.kept_prompt(s, JOB, prompt.prompt_hash)
    assert "billing@acme.example" not in viewed.prompt and "<EMAIL_1>" in viewed.prompt
    assert viewed.redacted == ["email", "iban", "phone"]
    answer = ops_calls.kept_response(s, JOB, response.response_hash)
    assert json.loads(answer.text)["iban"] == "<IBAN_1>"
