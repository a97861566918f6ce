"""Scenario: an interactive job takes its class's route (`LONGHAUL_CLASS_ROUTES`) at the tier that route names for
its class, retrieves at its class's depth, and counts its calls against the route's shared limit; its cost shows the
tier it was paid at."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from local import lambda_runtime
from local.platform import LocalPlatform
from longhaul.core.budgets import PRICES
from longhaul.workflows.document_analysis.retrieval import DEPTHS
from tests.workflows.conftest import TEST_ROUTES, Client

OFFLINE = "longhaul-offline-extractive-1"
FAST = {"provider": "offline", "model_id": OFFLINE, "service_tier": {"interactive": "priority"},
        "requests_per_minute": 600}  # fmt: skip


def contracts(count: int) -> dict[str, Any]:
    """A job over `count` small contracts, each with a liability cap and a notice period to find: every document has
    a passage to retrieve, so the depth decides how many are."""
    documents = [
        {
            "name": f"contract_{i:02d}.txt",
            "text": f"Supply agreement {i} between Northwind Analytics Ltd and customer {i}.\n\n"
            f"Liability. The Supplier's aggregate liability is capped at {1000 + i * 10} GBP per year.\n\n"
            f"Termination. Either party may terminate on {30 + i} days' written notice.\n",
        }
        for i in range(count)
    ]
    question = "What are the liability caps and the termination notice periods?"
    return {"workflow": "document-analysis", "input": {"question": question, "documents": documents}}


def test_an_interactive_job_takes_the_class_route_its_tier_and_its_depth(
    alpha: Client, platform: LocalPlatform
) -> None:
    # Given a route `fast` for interactive jobs, at the Priority tier for them, limited to 600 calls a minute
    before = lambda_runtime.environment_overrides()
    platform.set_function_environment(
        LONGHAUL_MODEL_ROUTES=json.dumps({**TEST_ROUTES, "fast": FAST}),
        LONGHAUL_CLASS_ROUTES=json.dumps({"interactive": "fast"}),
    )
    try:
        # When an interactive job runs (and a standard one beside it)
        request = contracts(12)
        interactive = alpha.submit({**request, "sla_class": "interactive"})
        standard = alpha.submit({**request, "sla_class": "standard"})
        assert alpha.wait(interactive)["status"] == "completed"
        assert alpha.wait(standard)["status"] == "completed"
    finally:
        lambda_runtime.configure(environment_overrides=before)

    # Then every model call of the interactive job went to `fast` at the Priority tier, the standard job's to `default`
    def calls(job_id: str) -> list[dict[str, Any]]:
        return [e["detail"] for e in alpha.events(job_id) if e["type"] == "model_called"]

    fast_calls, default_calls = calls(interactive), calls(standard)
    assert fast_calls and {(c["route"], c["service_tier"]) for c in fast_calls} == {("fast", "priority")}
    assert {(c["route"], c["service_tier"]) for c in default_calls} == {("default", "default")}

    # And its cost is priced at Priority (1.75 x the offline model's notional Standard price) and shown by tier
    job = alpha.get(f"/v1/jobs/{interactive}").json()
    model = job["cost"]["model"]
    assert list(model["tiers"]) == ["priority"]
    assert model["tiers"]["priority"]["input_tokens"] == model["input_tokens"] > 0
    price = PRICES[OFFLINE].at_tier("priority")
    exact = sum(
        Decimal(c["input_tokens"]) * price.input + Decimal(c["output_tokens"]) * price.output for c in fast_calls
    )
    assert Decimal(model["usd"]) * 1_000_000 >= exact  # each call rounded up to a micro-dollar
    assert Decimal(model["usd"]) * 1_000_000 - exact <= len(fast_calls)

    # And it retrieved at the interactive depth: fewer passages, so fewer evidence-extraction calls than standard's
    extraction = [
        e for e in alpha.events(interactive) if e["type"] == "model_called" and e["step"] == "extract_evidence"
    ]
    baseline = [e for e in alpha.events(standard) if e["type"] == "model_called" and e["step"] == "extract_evidence"]
    interactive_depth, standard_depth = DEPTHS["interactive"], DEPTHS["standard"]
    assert len({e["item"] for e in extraction}) <= math.ceil(interactive_depth.top_k / interactive_depth.group_size)
    assert (
        len({e["item"] for e in extraction})
        < len({e["item"] for e in baseline})
        <= math.ceil(standard_depth.top_k / standard_depth.group_size)
    )

    # And its calls were counted against the route's shared limit, in the platform's table
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    slots = table.query(KeyConditionExpression=Key("pk").eq("ROUTELIMIT#fast"))["Items"]
    assert sum(int(s.get("requests", 0)) for s in slots) >= len(fast_calls)
