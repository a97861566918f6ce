"""Admission on the local runtime: a tenant over its jobs in flight has its jobs accepted `queued` with an estimate,
another tenant's interactive job starts at once, the backlog drains as slots free (never more than the tenant's
limit at a time), and a tenant over its submission rate gets 429 with Retry-After while another is accepted.

The scenario's tenants get their keys and policies here, seeded exactly as `LONGHAUL_TENANT_POLICIES` is at start
(`local.platform.seed_tenant_policies`), so the session's other scenarios keep the default policy."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import pytest
import requests

from local.deploy import wait_until
from local.keys import ApiKey, seed_api_keys
from local.platform import LocalPlatform, seed_tenant_policies
from tests.workflows.conftest import Client

QUEUED_TENANT, INTERACTIVE_TENANT, BURSTY_TENANT = "gamma", "delta", "epsilon"
POLICIES = {
    QUEUED_TENANT: {"jobs_in_flight": 2, "sla_classes": ["standard", "batch"]},
    INTERACTIVE_TENANT: {"jobs_in_flight": 5},
    BURSTY_TENANT: {"submissions_per_minute": 3},
}
BACKLOG = 12


@pytest.fixture(scope="module")
def tenants(platform: LocalPlatform) -> dict[str, Client]:
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    keys = [ApiKey(tenant=t, key=f"lh_local_{t}_0123456789abcdef") for t in POLICIES]
    seed_api_keys(table, keys)
    platform.keys.extend(keys)
    seed_tenant_policies(table, json.dumps(POLICIES))
    return {t: Client(platform, t) for t in POLICIES}


def at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_a_backlog_waits_its_turn_while_another_tenants_interactive_job_starts_at_once(
    tenants: dict[str, Client], sample_request: dict[str, Any]
) -> None:
    gamma, delta = tenants[QUEUED_TENANT], tenants[INTERACTIVE_TENANT]

    # Given tenant gamma (2 jobs in flight) submits a batch backlog
    accepted = []
    for _ in range(BACKLOG):
        response = gamma.post("/v1/jobs", {**sample_request, "sla_class": "batch"})
        assert response.status_code == 202, response.text
        accepted.append(response.json())

    # Then most are queued with an honest estimate of their start (their view says it too): whole rounds of the job's
    # own duration estimate, as many as the tenant's jobs waiting with it allow, 2 at a time (fewer when gamma's
    # first jobs finished during the burst and queued ones started meanwhile: a sample job takes about as long as a
    # few submissions locally, so up to two more may start at once), several rounds for the last
    waiting = [a for a in accepted if a["estimated_start_seconds"] > 0]
    assert len(waiting) >= BACKLOG - 4
    rounds = [a["estimated_start_seconds"] / a["estimated_sla_seconds"] for a in waiting]
    assert all(r == int(r) and 1 <= r <= math.ceil((k + 1) / 2) for k, r in enumerate(rounds)), rounds
    assert max(rounds) >= 2, rounds
    view = gamma.get(f"/v1/jobs/{waiting[-1]['job_id']}").json()
    assert view["sla_class"] == "batch"
    assert view["status"] == "queued" and view["estimated_start_seconds"] > 0

    # When tenant delta submits an interactive job
    response = delta.post("/v1/jobs", {**sample_request, "sla_class": "interactive"})
    assert response.status_code == 202, response.text
    assert response.json()["estimated_start_seconds"] == 0

    # Then it starts promptly, while gamma's backlog still waits
    interactive = response.json()["job_id"]
    wait_until(
        lambda: delta.get(f"/v1/jobs/{interactive}").json()["started_at"] or None,
        timeout=30,
        interval=0.2,
        what="the interactive job to start",
    )

    # and as gamma's jobs finish its queued ones start, never more than 2 at a time, until all are done
    finished = [gamma.wait(a["job_id"], timeout=300) for a in accepted]
    assert [j["status"] for j in finished] == ["completed"] * BACKLOG
    interactive_job = delta.wait(interactive)
    assert interactive_job["status"] == "completed"
    # (the interactive job did not wait for the backlog: a good part of it started only after it)
    started_after = [j for j in finished if at(j["started_at"]) > at(interactive_job["started_at"])]
    assert len(started_after) >= BACKLOG // 3, [j["started_at"] for j in finished]
    moments = sorted(
        [(at(j["started_at"]), 1) for j in finished] + [(at(j["finished_at"]), -1) for j in finished],
        key=lambda m: (m[0], m[1]),
    )
    running = peak = 0
    for _, change in moments:
        running += change
        peak = max(peak, running)
    assert peak <= 2
    assert all(j["estimated_start_seconds"] is None for j in finished)


def test_a_tenant_over_its_rate_gets_429_with_retry_after_and_others_are_accepted(
    tenants: dict[str, Client], sample_request: dict[str, Any]
) -> None:
    epsilon, delta = tenants[BURSTY_TENANT], tenants[INTERACTIVE_TENANT]
    responses: list[requests.Response] = [epsilon.post("/v1/jobs", sample_request) for _ in range(7)]
    # the limit holds over any 60 seconds, whatever the clock's minute: exactly 3 of the 7 are accepted
    assert [r.status_code for r in responses].count(202) == 3, [r.status_code for r in responses]
    refused = [r for r in responses if r.status_code == 429]
    problem = refused[0].json()
    assert refused[0].headers["Content-Type"].startswith("application/problem+json")
    assert problem["type"].endswith("/rate-limited")
    assert 1 <= int(refused[0].headers["Retry-After"]) <= 61
    assert problem["retry_after_seconds"] == int(refused[0].headers["Retry-After"])
    # another tenant is not affected
    other = delta.post("/v1/jobs", sample_request)
    assert other.status_code == 202, other.text
    for response in [*responses, other]:
        if response.status_code == 202:
            Client.wait(delta if response is other else epsilon, response.json()["job_id"])
