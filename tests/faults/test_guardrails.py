"""Model guardrails on the local platform, as a tenant and an operator see them: budgets reserved before every
call, the validation ladder under model-output faults, tenant ceilings and daily allowances, failover."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import requests

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS
from tests.faults.helpers import assert_consistent, charges
from tests.workflows.conftest import Client

MICRO = Decimal("0.000001")


def _types(events: list[dict[str, Any]], step: str | None = None) -> list[str]:
    return [e["type"] for e in events if step is None or e.get("step") == step]


def _ops(platform: LocalPlatform) -> dict[str, str]:
    return platform.auth_header("ops")


def _used(job: dict[str, Any]) -> int:
    return int(job["usage"]["input_tokens"]) + int(job["usage"]["output_tokens"])


def test_a_budget_of_1_3_times_the_unbudgeted_use_completes_and_a_smaller_one_fails_only_near_it(
    platform: LocalPlatform, alpha: Client, sample_request
):
    # Given a fan-out of one passage per item (several extract_evidence items at once) and what it uses unbudgeted
    request = {**sample_request, "input": {**sample_request["input"], "passages_per_group": 1}}
    unbudgeted = alpha.wait(alpha.submit(request))
    assert unbudgeted["status"] == "completed", unbudgeted
    used, cost = _used(unbudgeted), Decimal(unbudgeted["usage"]["cost_usd"])
    items = [s for s in unbudgeted["budget"]["steps"] if s["step"] == "extract_evidence"]
    assert len(items) >= 3 and used < 5000

    # Then 1.3 times that, in tokens or in dollars, is enough: the items' calls wait for each other's releases
    for budget in ({"max_tokens": math.ceil(used * 1.3)}, {"max_cost_usd": str((cost * 13 / 10).quantize(MICRO))}):
        job = alpha.wait(alpha.submit({**request, "budget": budget}))
        assert job["status"] == "completed", (budget, job["error"])
        assert _used(job) == used

    # And a budget below what it needs fails budget-exceeded only once it has spent up to it, never over
    budget = math.floor(used * 0.8)
    job_id = alpha.submit({**request, "budget": {"max_tokens": budget}})
    job = alpha.wait(job_id)
    assert job["status"] == "failed" and job["error"]["kind"] == "budget-exceeded", job
    assert job["budget"]["exhausted"] == "job" and job["budget"]["held_tokens"] <= budget
    assert budget * 0.9 <= _used(job) <= budget, f"used {_used(job)} of {budget}"
    settled = [c for c in charges(platform, job_id) if c.get("status") == "settled"]
    assert sum(int(c["input_tokens"]) + int(c["output_tokens"]) for c in settled) == _used(job)
    # no model call was made after the refusal, in any step
    events = alpha.events(job_id)
    refused = min(i for i, e in enumerate(events) if e["type"] == "budget_exceeded")
    assert "model_called" not in _types(events[refused + 1 :])
    assert_consistent(events)


def test_schema_invalid_output_once_gets_a_feedback_retry_and_completes(alpha: Client, sample_request, inject):
    inject("extract_evidence=schema-invalid-outputx1")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    types = _types(alpha.events(job_id), "extract_evidence")
    assert "output_validation_failed" in types and "feedback_retry" in types


def test_truncated_output_ends_output_invalid_never_completed(alpha: Client, sample_request, inject):
    inject("draft_answer=truncated-output")
    job_id = alpha.submit(sample_request)
    job = alpha.wait(job_id)
    assert job["status"] == "failed" and job["error"]["kind"] == "output-invalid", job
    types = _types(alpha.events(job_id), "draft_answer")
    assert "output_repaired" not in types and types.count("feedback_retry") == 1 and "output_invalid" in types


def test_malformed_output_is_repaired_and_the_job_completes(alpha: Client, sample_request, inject):
    inject("draft_answer=malformed-output")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    assert "output_repaired" in _types(alpha.events(job_id), "draft_answer")


def test_a_budget_above_the_ceiling_is_422_and_an_exhausted_allowance_refuses_before_any_work(
    platform: LocalPlatform, alpha: Client, beta: Client, sample_request
):
    ops = _ops(platform)
    policy = {"max_job_tokens": 50000, "daily_tokens": 100000}
    put = requests.put(f"{platform.api_url}/v1/ops/tenants/beta/policy", json=policy, headers=ops, timeout=30)
    assert put.status_code == 200, put.text
    assert put.json()["policy"]["max_job_tokens"] == 50000 and put.json()["source"] == "stored"
    over = beta.post("/v1/jobs", {**sample_request, "budget": {"max_tokens": 50001}})
    assert over.status_code == 422 and over.json()["errors"][0]["loc"][-1] == "max_tokens"
    # a job spends part of today's allowance; lowered below what was spent, the allowance is past
    assert beta.wait(beta.submit(sample_request))["status"] == "completed"
    today = requests.get(f"{platform.api_url}/v1/ops/tenants/beta/policy", headers=ops, timeout=30).json()["today"]
    assert today["tokens"] > 0
    lowered = {**policy, "daily_tokens": today["tokens"]}
    requests.put(f"{platform.api_url}/v1/ops/tenants/beta/policy", json=lowered, headers=ops, timeout=30)

    def submitted() -> requests.Response | None:
        # the operators' function stored the change; the tenants' function reads it within its cache's time
        answer = beta.post("/v1/jobs", sample_request)
        if answer.status_code == 202:
            beta.post(f"/v1/jobs/{answer.json()['job_id']}/cancel")
            return None
        return answer

    refused = wait_until(submitted, timeout=LOOKUP_CACHE_SECONDS + 10, interval=2, what="the lowered allowance")
    assert refused.status_code == 429 and refused.json()["type"].endswith("/daily-allowance-exhausted")
    assert "daily allowance" in refused.json()["detail"]
    requests.put(f"{platform.api_url}/v1/ops/tenants/beta/policy", json={}, headers=ops, timeout=30)


def test_with_one_provider_down_jobs_complete_on_the_fallback_route(alpha: Client, sample_request):
    job_id = alpha.submit({**sample_request, "route": "unreachable"})
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    events = alpha.events(job_id)
    assert "model_failover" in _types(events)
    called = [e["detail"] for e in events if e["type"] == "model_called"]
    assert called and {c["route"] for c in called} == {"default"}
    assert "breaker_opened" in _types(events)  # the second outage of this model within the window


def test_without_a_fallback_an_open_breaker_retries_then_fails_upstream_unavailable(alpha: Client, sample_request):
    job_id = alpha.submit({**sample_request, "route": "unreachable-alone"})
    job = alpha.wait(job_id)
    assert job["status"] == "failed" and job["error"]["kind"] == "upstream-unavailable", job
    failed = [e for e in alpha.events(job_id) if e["type"] == "step_attempt_failed"]
    assert failed and all(e["detail"]["will_retry"] for e in failed)
    assert any("circuit open" in e["detail"]["message"] for e in failed)
