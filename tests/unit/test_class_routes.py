"""Routing by SLA class and Bedrock service tiers: which route a call takes (job > step > class > default), the tier
it is sent, reserved and priced at, and the job's cost by tier.

The adapters are scripted fakes of the model port; the ledger, the job and its cost view are the real code on moto.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from longhaul import services as wiring
from longhaul.adapters.models.bedrock import BedrockConverseModel
from longhaul.core.budgets import PRICES, SlaClass, cost_micro, price_of, price_table
from longhaul.core.llm import ModelRequest, ModelResponse, Usage
from longhaul.core.routes import RouteClass, Routing
from longhaul.core.settings import Settings
from longhaul.guardrails.gateway import ModelCalls
from tests.unit.step_support import running_job

JOB = "job_cr_1"


class Answer(BaseModel):
    answer: str


GOOD = json.dumps({"answer": "yes"})
ROUTES = {
    "default": {"provider": "offline", "model_id": "big", "stronger": "strong"},
    "fast": {
        "provider": "offline",
        "model_id": "small",
        "stronger": "strong",
        "service_tier": {"interactive": "priority", "batch": "flex"},
    },
    "strong": {"provider": "offline", "model_id": "strong"},
}
PRICE_ROWS = {
    "big": {"input": "3.00", "output": "15.00"},
    "small": {"input": "1.00", "output": "5.00"},
    "strong": {"input": "15.00", "output": "75.00"},
}


# ---------------------------------------------------------------------------------------------- route choice


def _routing(classes: dict[str, str] | None = None, steps: dict[str, str] | None = None) -> Routing:
    return Routing.configured(ROUTES, steps or {}, provider="offline", model_id="x", classes=classes)


def test_the_job_s_route_wins_then_the_step_s_then_the_class_s_then_default() -> None:
    routing = _routing(classes={"interactive": "fast"}, steps={"draft_answer": "strong"})
    assert routing.route_for("draft_answer", "default", "interactive") == "default"  # the job names one
    assert routing.route_for("draft_answer", None, "interactive") == "strong"  # the step has one
    assert routing.route_for("extract_evidence", None, "interactive") == "fast"  # its class has one
    assert routing.route_for("extract_evidence", None, "batch") == "default"  # nothing names one
    assert routing.route_for("extract_evidence", None, None) == "default"


def test_an_unknown_class_route_fails_at_start_up_with_the_routes_named() -> None:
    with pytest.raises(ValidationError, match=r"class 'interactive' uses unknown route 'fastest'.*'fast'"):
        _routing(classes={"interactive": "fastest"})
    with pytest.raises(ValidationError, match="interactive"):  # not a class: the classes are listed
        _routing(classes={"urgent": "fast"})


def test_the_settings_read_class_routes_and_services_build_the_routing() -> None:
    settings = Settings.model_validate(
        {
            "LONGHAUL_TABLE": "t",
            "LONGHAUL_BUCKET": "b",
            "LONGHAUL_MODEL_ROUTES": json.dumps(ROUTES),
            "LONGHAUL_CLASS_ROUTES": '{"interactive": "fast"}',
        }
    )
    assert settings.class_routes == {"interactive": "fast"}
    services = wiring.Services.__new__(wiring.Services)
    object.__setattr__(services, "settings", settings)
    assert wiring.Services.routing.func(services).classes == {"interactive": "fast"}  # type: ignore[attr-defined]


def test_a_route_s_classes_are_the_sla_classes() -> None:
    assert typing.get_args(RouteClass) == typing.get_args(SlaClass)


def test_a_service_tier_is_bedrock_s_and_a_class_without_one_is_standard() -> None:
    routing = _routing()
    assert routing["fast"].tier_for("interactive") == "priority"
    assert routing["fast"].tier_for("standard") == "default"
    assert routing["default"].tier_for("interactive") == "default"
    with pytest.raises(ValidationError, match="Bedrock"):
        Routing.configured(
            {"o": {"provider": "openai", "model_id": "m", "base_url": "http://x", "service_tier": {"batch": "flex"}}},
            {},
            provider="offline",
            model_id="x",
        )
    with pytest.raises(ValidationError):  # `reserved` needs a reservation: not a per-class choice
        Routing.configured(
            {"b": {"provider": "bedrock", "model_id": "m", "service_tier": {"batch": "reserved"}}},
            {},
            provider="offline",
            model_id="x",
        )


# ---------------------------------------------------------------------------------------------- tier prices


def test_priority_is_a_premium_and_flex_a_discount_of_the_standard_price() -> None:
    sonnet = price_of("us.anthropic.claude-sonnet-4-20250514-v1:0", PRICES)
    assert sonnet.at_tier("default") == sonnet and sonnet.at_tier(None) == sonnet
    assert (sonnet.at_tier("priority").input, sonnet.at_tier("priority").output) == (Decimal("5.25"), Decimal("26.25"))
    assert (sonnet.at_tier("flex").input, sonnet.at_tier("flex").output) == (Decimal("1.5"), Decimal("7.5"))
    assert cost_micro(1000, 100, sonnet.at_tier("flex")) * 2 == cost_micro(1000, 100, sonnet)


def test_a_price_row_may_set_its_own_tier_multipliers() -> None:
    table = price_table({"m": {"input": "2.00", "output": "8.00", "tiers": {"priority": "1.5"}}})
    assert table["m"].at_tier("priority").input == Decimal("3.00")
    assert table["m"].at_tier("flex").input == Decimal("1.00")  # the default multiplier still applies


# ---------------------------------------------------------------------------------------------- the gateway


class Scripted:
    def __init__(self, model_id: str, texts: list[str], served: str | None = None) -> None:
        self.model_id, self.texts, self.served = model_id, texts, served
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        text = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
        usage = Usage(input_tokens=1000, output_tokens=100)
        return ModelResponse(text=text, usage=usage, model_id=self.model_id, stop_reason="end_turn",
                             service_tier=self.served)  # fmt: skip


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> dict[str, Scripted]:
    scripted = {name: Scripted(name, [GOOD]) for name in ("big", "small", "strong")}
    adapter: Any = lambda route: scripted[route.model_id]  # noqa: E731
    adapter.cache_clear = lambda: None  # as the real one's lru_cache has
    monkeypatch.setattr(wiring, "_adapter", adapter)
    return scripted


@pytest.fixture
def routed(services: wiring.Services) -> wiring.Services:
    settings = Settings.model_validate(
        {
            **services.settings.model_dump(by_alias=True),
            "LONGHAUL_MODEL_ROUTES": json.dumps(ROUTES),
            "LONGHAUL_CLASS_ROUTES": json.dumps({"interactive": "fast", "batch": "fast"}),
            "LONGHAUL_MODEL_PRICES": json.dumps(PRICE_ROWS),
        }
    )
    return dataclasses.replace(services, settings=settings)


def _calls(s: wiring.Services, sla_class: SlaClass, *, route: str | None = None, step: str = "draft_answer") -> Any:
    job = running_job(s.jobs, JOB, budget_tokens=1_000_000, route=route, sla_class=sla_class)
    return ModelCalls(s, job, step, None, 1)


def _request() -> ModelRequest:
    return ModelRequest(task="t", system="s", prompt="p", context={}, max_tokens=100)


def test_an_interactive_job_takes_its_class_route_at_its_tier_priced_and_shown_by_tier(routed, models) -> None:
    calls = _calls(routed, "interactive")
    calls.ask(_request(), Answer)
    [sent] = models["small"].requests
    assert sent.service_tier == "priority" and not models["big"].requests
    assert sent.prompt_hash() == _request().prompt_hash()  # the tier is not part of what the ledger keys on
    [call] = calls.calls
    priority = cost_micro(1000, 100, price_of("small", price_table(PRICE_ROWS)).at_tier("priority"))
    assert (call["route"], call["service_tier"], call["cost_usd"]) == ("fast", "priority", f"{priority / 1e6:.6f}")
    assert priority == 2_625  # (1000 x $1 + 100 x $5) per million tokens = 1,500 micro-dollars, x 1.75
    job = routed.jobs.get_job(JOB)
    assert job is not None and job.cost_micro == priority
    tiers = job.view().cost.model.tiers
    assert tiers["priority"].model_dump() == {"input_tokens": 1000, "output_tokens": 100, "usd": "0.002625"}
    assert list(tiers) == ["priority"]


def test_the_reservation_holds_the_tier_s_price(routed, models) -> None:
    calls = _calls(routed, "interactive")
    calls.ask(_request(), Answer)
    [charge] = [c for c in routed.budgets.ledger(JOB)]
    size_cost = cost_micro(charge.reserved_tokens - 100, 100, price_of("small", price_table(PRICE_ROWS)))
    assert charge.reserved_cost_micro == cost_micro(charge.reserved_tokens - 100, 100, price_of(
        "small", price_table(PRICE_ROWS)).at_tier("priority")) > size_cost  # fmt: skip
    assert charge.service_tier == "priority"


def test_a_standard_job_takes_the_default_route_at_the_standard_tier(routed, models) -> None:
    calls = _calls(routed, "standard")
    calls.ask(_request(), Answer)
    [sent] = models["big"].requests
    assert sent.service_tier is None and calls.calls[0]["service_tier"] == "default"
    job = routed.jobs.get_job(JOB)
    assert job is not None and list(job.view().cost.model.tiers) == ["default"]


def test_the_job_s_own_route_wins_over_its_class(routed, models) -> None:
    _calls(routed, "interactive", route="strong").ask(_request(), Answer)
    assert len(models["strong"].requests) == 1 and not models["small"].requests


def test_the_ladder_still_escalates_from_the_class_route_to_its_stronger_one(routed, models) -> None:
    models["small"].texts = ["[1]"]
    calls = _calls(routed, "interactive")
    value, _ = calls.ask(_request(), Answer)
    assert value.answer == "yes" and len(models["small"].requests) == 2 and len(models["strong"].requests) == 1
    assert [c["route"] for c in calls.calls] == ["fast", "fast", "strong"]
    assert calls.calls[-1]["service_tier"] == "default"  # the stronger route names no tier


def test_the_tier_the_provider_served_is_the_one_paid(routed, models) -> None:
    models["small"].served = "default"  # asked for flex, served at Standard
    calls = _calls(routed, "batch")
    calls.ask(_request(), Answer)
    assert models["small"].requests[0].service_tier == "flex"
    standard = cost_micro(1000, 100, price_of("small", price_table(PRICE_ROWS)))
    assert calls.calls[0]["service_tier"] == "default" and calls.calls[0]["cost_usd"] == f"{standard / 1e6:.6f}"


# ---------------------------------------------------------------------------------------------- Bedrock


def test_bedrock_sends_the_tier_as_converse_s_service_tier_and_reads_the_tier_served() -> None:
    model = BedrockConverseModel("us.anthropic.claude-sonnet-4-20250514-v1:0", client=object())
    request = _request()
    assert "serviceTier" not in model._arguments(request)
    assert "serviceTier" not in model._arguments(request.model_copy(update={"service_tier": "default"}))
    sent = model._arguments(request.model_copy(update={"service_tier": "priority"}))
    assert sent["serviceTier"] == {"type": "priority"}
    answered = model._response(
        {
            "stopReason": "end_turn",
            "output": {"message": {"content": [{"text": "hi"}]}},
            "usage": {"inputTokens": 3, "outputTokens": 1},
            "serviceTier": {"type": "flex"},
        }
    )
    assert answered.service_tier == "flex"


def test_botocore_knows_converse_s_service_tier() -> None:
    import botocore.session

    shape = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")
    tier = shape.input_shape.members["serviceTier"]
    assert {"priority", "default", "flex"} <= set(tier.members["type"].enum)
