"""The review lane and the webhook delivery in the synthesized template: nothing waits without a timeout, a rung's
timeout leads to the lane, deliveries retry with backoff and full jitter over hours and end in their own queue."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import definition, resources


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = [definition(m) for m in resources(template, "AWS::StepFunctions::StateMachine").values()]
    return {asl["Comment"]: asl for asl in found}


@pytest.mark.parametrize("workflow", sorted(REGISTRY))
def test_the_review_waits_on_a_token_one_rung_at_a_time(machines: dict[str, dict[str, Any]], workflow: str) -> None:
    spec = REGISTRY[workflow]
    assert spec.review_step is not None
    name = spec.review_step.name
    states = machines[f"Longhaul workflow {workflow}"]["States"]
    wait, advance, steer = states[f"{name}: wait"], states[f"{name}: advance"], states[f"{name}: decided?"]

    assert wait["Resource"].endswith(":lambda:invoke.waitForTaskToken")
    assert wait["Parameters"]["Payload"]["token.$"] == "$$.Task.Token"
    assert wait["TimeoutSecondsPath"] == f"$.steps.{name}.wait_seconds"  # nothing waits without a bound
    rung = next(c for c in wait["Catch"] if "States.Timeout" in c["ErrorEquals"])
    assert rung["Next"] == f"{name}: advance" and wait["Next"] == f"{name}: advance"
    assert advance["Next"] == f"{name}: decided?" and states[name]["Next"] == f"{name}: decided?"
    routes = {c["StringEquals"]: c["Next"] for c in steer["Choices"]}
    assert routes["wait"] == f"{name}: wait" and states[routes["stop"]]["Type"] == "Fail"
    assert all(not r.get("MaxAttempts") or "States.Timeout" not in r["ErrorEquals"] for r in wait.get("Retry", []))


def test_webhook_delivery_retries_for_hours_with_full_jitter_then_dead_letters(
    machines: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    states = machines["Longhaul webhook delivery"]["States"]
    deliver = states["Deliver"]
    (retry,) = [r for r in deliver["Retry"] if "WebhookDeliveryFailed" in r["ErrorEquals"]]
    caps = [
        min(retry["IntervalSeconds"] * retry["BackoffRate"] ** n, retry["MaxDelaySeconds"])
        for n in range(retry["MaxAttempts"])
    ]

    assert retry["JitterStrategy"] == "FULL" and retry["BackoffRate"] > 1
    assert caps == sorted(caps) and sum(caps) >= 2 * 3600  # growing gaps, hours in all
    record = states[deliver["Catch"][0]["Next"]]
    send = states[record["Next"]]
    assert deliver["Catch"][0]["ErrorEquals"] == ["States.ALL"]
    assert send["Resource"].endswith(":states:::sqs:sendMessage")
    queue = send["Parameters"]["QueueUrl"].lstrip("@")
    assert "Webhooks" in queue and queue in resources(template, "AWS::SQS::Queue")
