"""Personal data detection and placeholders (`longhaul.core.redaction`): each kind's positives and its near misses
(an invoice number, a date, an amount are not personal data), stable placeholders, the policy's kinds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from longhaul.core import redaction
from longhaul.core.budgets import TenantPolicy, TenantPolicyPatch
from longhaul.core.redaction import KINDS, Redactor, detect

# Near misses every kind must leave alone: an invoice number, dates, amounts, an order number, a time, a version.
NEAR_MISSES = (
    "Invoice INV-2024-000123 dated 2024-01-15 (15.01.2024), amount 1,234.56 EUR and 12 345 678,90 USD; "
    "order 4111111111111112, reference 1234567890123, PO 20240115, at 12:30:45, version 1.2.3, ISBN 978-3-16-148410-0."
)


def found(text: str, kind: str) -> list[str]:
    return [f.value for f in detect(text, [kind])]


@pytest.mark.parametrize("kind", KINDS)
def test_near_misses_are_not_personal_data(kind: str) -> None:
    assert found(NEAR_MISSES, kind) == []


def test_email_addresses() -> None:
    text = "Write to jane.doe+billing@example.co.uk or J.Smith@sub.example.com. Not: a@b, user@-bad.com, @example.com"
    assert found(text, "email") == ["jane.doe+billing@example.co.uk", "J.Smith@sub.example.com"]


def test_phone_numbers_international_and_national() -> None:
    text = "Call +44 20 7946 0958, +49 30 901820, (415) 555-2671 or +1 202-555-0143; not 555-123-4567."
    assert found(text, "phone") == ["+44 20 7946 0958", "+49 30 901820", "(415) 555-2671", "+1 202-555-0143"]


def test_a_number_run_into_a_reference_is_not_a_phone_number() -> None:
    assert found("ref INV-2024-000123 and PO/2024000123", "phone") == []


def test_ibans_checked_by_mod_97_spaced_or_not() -> None:
    text = "Pay DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX or GB82WEST12345698765432; not DE89 3704 0044 0532 0130 01."
    assert found(text, "iban") == ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"]


def test_card_numbers_need_a_network_prefix_and_a_luhn_check_digit() -> None:
    text = "Card 4111 1111 1111 1111, Amex 3782-822463-10005; invoice 4111111111111112, order 9111111111111111."
    assert found(text, "credit_card") == ["4111 1111 1111 1111", "3782-822463-10005"]


def test_ip_addresses_v4_and_v6() -> None:
    text = "From 192.168.1.20 and 2001:db8::1; not 999.1.1.1, 1.2.3, 12:30:45 or 10.0.0.1.5."
    assert found(text, "ip") == ["192.168.1.20", "2001:db8::1"]


def test_persons_introduced_by_a_title_or_a_label() -> None:
    text = (
        "Dear Mr. John Smith, Contact: Jane Doe. Account holder: Ana María López. The Name of the rose; Dr. Who. "
        "Dear Procurement Team, Attn: Accounts Department."
    )
    assert found(text, "person") == ["John Smith", "Jane Doe", "Ana María López", "Who"]


def test_the_same_value_gets_the_same_placeholder_and_restore_puts_it_back() -> None:
    redactor = Redactor(["email", "iban", "phone"])
    text = "a@example.com pays DE89 3704 0044 0532 0130 00; again a@example.com, DE89370400440532013000, b@example.org"
    redacted = redactor.redact(text)
    assert redacted == "<EMAIL_1> pays <IBAN_1>; again <EMAIL_1>, <IBAN_1>, <EMAIL_2>"
    assert redactor.redact(text) == redacted  # stable within the redactor
    assert Redactor(["email", "iban", "phone"]).redact(text) == redacted  # and made again the same way
    assert redactor.restore("<EMAIL_2> wrote to <EMAIL_1> about <IBAN_1>, not <IBAN_9>") == (
        "b@example.org wrote to a@example.com about DE89 3704 0044 0532 0130 00, not <IBAN_9>"
    )
    assert redactor.counts == {"email": 2, "iban": 1}


def test_only_the_kinds_asked_for_are_redacted() -> None:
    text = "a@example.com, +44 20 7946 0958, 192.168.1.20"
    assert Redactor(["ip"]).redact(text) == "a@example.com, +44 20 7946 0958, <IP_1>"
    assert Redactor([]).redact(text) == text


def test_json_values_are_redacted_and_restored_string_by_string() -> None:
    redactor = Redactor(["email"])
    value = {"to": ["a@example.com"], "n": 3, "note": "cc a@example.com"}
    redacted = redactor.redact_value(value)
    assert redacted == {"to": ["<EMAIL_1>"], "n": 3, "note": "cc <EMAIL_1>"}
    assert redactor.restore_value(redacted) == value


def test_scrub_redacts_only_inside_a_bound_context() -> None:
    assert redaction.scrub("a@example.com") == "a@example.com"
    with redaction.bound(["email"]):
        assert redaction.scrub("to a@example.com") == "to <EMAIL_1>"
    assert redaction.scrub("a@example.com") == "a@example.com"


def test_log_lines_written_in_a_bound_context_are_redacted() -> None:
    from longhaul.core.observability import redact  # what the log formatter applies to every line

    line = {"message": "mail a@example.com about DE89 3704 0044 0532 0130 00", "detail": {"to": "b@example.org"}}
    with redaction.bound(["email", "iban"]):
        written = redact(line)
    assert written == {"message": "mail <EMAIL_1> about <IBAN_1>", "detail": {"to": "<EMAIL_1>"}}
    assert redact(line) == line


def test_span_content_and_stream_records_written_in_a_bound_context_are_redacted() -> None:
    from longhaul.core import genai
    from longhaul.core.streams import NewRecord
    from longhaul.guardrails.gateway import _scrubbed

    record = NewRecord(kind="output_delta", step="s", call_id="c", index=0, text="IBAN DE89 3704 0044 0532 0130 00")
    with redaction.bound(["iban"]):
        attribute = genai._json([{"type": "text", "content": "pay DE89 3704 0044 0532 0130 00"}])
        streamed = _scrubbed(record)
    assert "DE89" not in attribute and "<IBAN_1>" in attribute
    assert streamed.text == "IBAN <IBAN_1>" and _scrubbed(record) is record


def test_the_policy_takes_known_kinds_and_names_an_unknown_one() -> None:
    policy = TenantPolicy.model_validate({"redact": ["email", "iban"], "redact_before_model": True})
    assert policy.redact == ["email", "iban"] and policy.redact_before_model
    assert TenantPolicy().redact == [] and TenantPolicy().redact_before_model is False
    with pytest.raises(ValidationError) as refused:
        TenantPolicyPatch.model_validate({"redact": ["email", "passport"]})
    [error] = refused.value.errors()
    assert error["loc"] == ("redact", 1) and "'passport'" in error["msg"]
    with pytest.raises(ValidationError):
        TenantPolicy.model_validate({"redact_before_model": "yes"})
