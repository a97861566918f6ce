"""Model guardrails on the local platform, as a tenant and an operator see them: budgets reserved before every
call, the validation ladder under model-output faults, tenant ceilings and daily allowances, failover."""

from __future__ import annotations

from typing import Any

import requests

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS
from tests.faults.helpers import assert_consistent, charges
from tests.workflows.conftest import Client


def _types(events: list[dict[str, Any]], step: str | None = None) -> list[str]:
    return [e["type"] for e in events if step is None or e.get("step") == step]


def _ops(platform: LocalPlatform) -> dict[str, str]:
    return platform.auth_header("ops")


def test_a_budget_smaller_than_the_work_fails_budget_exceeded_without_overspending(
    platform: LocalPlatform, alpha: Client, sample_request
):
    # Given a fan-out of one passage per item and a budget that fits only some of their calls
    request = {**sample_request, "input": {**sample_request["input"], "passages_per_group": 1}}
    job_id = alpha.submit({**request, "budget": {"max_tokens": 5000}})
    job = alpha.wait(job_id)
    # Then the job fails budget-exceeded, its usage within the budget
    assert job["status"] == "failed" and job["error"]["kind"] == "budget-exceeded", job
    budget = job["budget"]
    assert budget["max_tokens"] == 5000 and budget["held_tokens"] <= 5000 and budget["exhausted"] == "job"
    assert job["usage"]["input_tokens"] + job["usage"]["output_tokens"] <= 5000
    assert job["error"]["step"] == "extract_evidence" and job["error"]["items"], "failed mid fan-out"
    # And some calls fit the budget, but no model call was made after the first reservation that did not fit (also
    # inside the fan-out): items run concurrently, so calls reserved before the refusal may all be recorded after it,
    # but no item that starts after the refusal calls the model
    events = alpha.events(job_id)
    assert "model_called" in _types(events)
    refused = min(i for i, e in enumerate(events) if e["type"] == "budget_exceeded")
    later = [e for e in events[refused:] if e.get("step") == "extract_evidence"]
    started_later = {e.get("item") for e in later if e["type"] == "step_started"}
    called_later = {e.get("item") for e in later if e["type"] == "model_called"}
    assert not started_later & called_later, "an item started after the refusal called the model"
    assert "model_called" not in _types([e for e in events[refused:] if e.get("step") != "extract_evidence"])
    settled = [c for c in charges(platform, job_id) if c.get("status") == "settled"]
    assert sum(int(c["input_tokens"]) + int(c["output_tokens"]) for c in settled) <= 5000
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
