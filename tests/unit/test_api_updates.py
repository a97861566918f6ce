"""Steering a job through `handlers.api.handler`: `PATCH /v1/jobs/{job_id}` (and the operators' route) judged like a
submission, pinned limits, and a submission that supersedes a job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from longhaul.core.budgets import TenantPolicy
from longhaul.core.contracts import JobStatus
from longhaul.storage.budgets import BudgetStore
from longhaul.storage.jobs import JobStore
from tests.unit.api_helpers import BODY, assert_problem, job_items, submit
from tests.unit.conftest import KEY_A, KEY_B, KEY_OPS, CallApi

pytestmark = pytest.mark.usefixtures("api_keys", "operator_key")
S = JobStatus


def patch(call_api: CallApi, job_id: str, body: Any, *, key: str = KEY_A, ops: bool = False) -> Any:
    path = f"/v1/ops/jobs/{job_id}" if ops else f"/v1/jobs/{job_id}"
    return call_api("PATCH", path, key=key, body=body)


def events(call_api: CallApi, job_id: str) -> list[dict[str, Any]]:
    return call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"]


def running_job(call_api: CallApi, table: Any) -> str:
    job_id = submit(call_api).body["job_id"]
    JobStore(table).transition(job_id, S.RUNNING, event="job_started")
    return str(job_id)


def item(table: Any, job_id: str) -> dict[str, Any]:
    return table.get_item(Key={"pk": f"JOB#{job_id}", "sk": "JOB"})["Item"]


# ---------------------------------------------------------------------- what an update changes


def test_an_update_changes_the_fields_it_names_and_says_so_in_the_log(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)
    before = datetime.now(UTC)

    response = patch(
        call_api,
        job_id,
        {
            "deadline_seconds": 7200,
            "budget": {"max_tokens": 1_500_000, "max_cost_usd": "20"},
            "sla_class": "interactive",
            "review": {"mode": "always"},
            "instructions": "Answer in French.",
            "agent": {"max_turns": 7},
        },
    )

    assert response.status == 200, response.raw_body
    view = response.body
    assert view["job_id"] == job_id and view["status"] == "running"
    deadline = datetime.fromisoformat(view["deadline_at"].replace("Z", "+00:00"))
    assert before + timedelta(seconds=7190) < deadline < datetime.now(UTC) + timedelta(seconds=7210)
    assert view["budget"]["max_tokens"] == 1_500_000 and view["budget"]["max_cost_usd"] == "20.000000"
    assert view["sla_class"] == "interactive" and view["instructions"] == "Answer in French."
    assert view["agent"]["max_turns"] == 7
    assert item(table, job_id)["review_mode"] == "always"
    updated = [e for e in events(call_api, job_id) if e["type"] == "job_updated"]
    assert len(updated) == 1
    assert updated[0]["detail"]["fields"] == sorted(
        ["deadline_seconds", "budget", "sla_class", "review", "instructions", "agent"]
    )
    assert updated[0]["detail"]["requested_by"] == "tenant"


def test_the_same_update_again_changes_nothing_more(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)
    body = {"instructions": "Cite page numbers.", "budget": {"max_tokens": 1000}}

    first, second = patch(call_api, job_id, body), patch(call_api, job_id, body)

    assert first.status == second.status == 200
    assert first.body["budget"] == second.body["budget"]
    assert [e["type"] for e in events(call_api, job_id)].count("job_updated") == 1


def test_a_queued_job_can_be_updated_too(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]

    response = patch(call_api, job_id, {"instructions": "Be brief."})

    assert response.status == 200 and response.body["status"] == "queued"


def test_operators_update_any_tenants_job(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)

    response = patch(call_api, job_id, {"deadline_seconds": 600}, key=KEY_OPS, ops=True)

    assert response.status == 200, response.raw_body
    updated = next(e for e in events(call_api, job_id) if e["type"] == "job_updated")
    assert updated["detail"]["requested_by"] == "operator" and updated["detail"]["fields"] == ["deadline_seconds"]


# ---------------------------------------------------------------------- refusals (nothing written)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"deadline_seconds": 0}, ["body", "deadline_seconds"]),
        ({"deadline_seconds": 24 * 3600 + 1}, ["body", "deadline_seconds"]),
        ({"instructions": "x" * 4001}, ["body", "instructions"]),
        ({"instructions": ""}, ["body", "instructions"]),
        ({"budget": {"max_tokens": 0}}, ["body", "budget", "max_tokens"]),
        ({"budget": {"max_cost_usd": 3}}, ["body", "budget", "max_cost_usd"]),
        ({"agent": {"max_turns": 0}}, ["body", "agent", "max_turns"]),
        ({"sla_class": "urgent"}, ["body", "sla_class"]),
        ({"review": {"mode": "sometimes"}}, ["body", "review", "mode"]),
        ({"priority": 1}, ["body", "priority"]),
    ],
    ids=[
        "deadline-low",
        "deadline-high",
        "instructions-long",
        "instructions-empty",
        "tokens",
        "cost-number",
        "turns",
        "sla",
        "review",
        "unknown",
    ],
)
def test_a_field_outside_its_bounds_is_a_422_naming_it(
    call_api: CallApi, table: Any, body: dict[str, Any], loc: list[str]
) -> None:
    job_id = running_job(call_api, table)
    before = item(table, job_id)

    problem = assert_problem(patch(call_api, job_id, body), 422, "invalid-request")

    assert loc in [e["loc"] for e in problem["errors"]]
    assert item(table, job_id) == before


def test_an_empty_update_is_refused(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)

    assert_problem(patch(call_api, job_id, {}), 422, "invalid-request")


def test_a_null_field_changes_nothing(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)
    nulls = {"deadline_seconds": None, "sla_class": None, "review": None, "instructions": None, "agent": None}

    response = patch(call_api, job_id, {"budget": {"max_cost_usd": "2.50"}, **nulls})

    assert response.status == 200, response.raw_body
    assert response.body["budget"]["max_cost_usd"] == "2.500000" and response.body["instructions"] is None
    assert [e["detail"]["fields"] for e in events(call_api, job_id) if e["type"] == "job_updated"] == [["budget"]]


def test_the_tenants_ceilings_bound_an_update(call_api: CallApi, table: Any) -> None:
    BudgetStore(table).put_policy(
        "tenant-a",
        TenantPolicy(
            max_job_tokens=5000,
            max_job_cost_usd=Decimal("2"),
            agent_max_turns=10,
            agent_max_tool_calls=20,
            sla_classes=["standard", "batch"],
        ),
    )
    job_id = running_job(call_api, table)
    before = item(table, job_id)

    response = patch(
        call_api,
        job_id,
        {
            "budget": {"max_tokens": 5001, "max_cost_usd": "2.01"},
            "agent": {"max_turns": 11, "max_tool_calls": 21},
            "sla_class": "interactive",
        },
    )

    problem = assert_problem(response, 422, "invalid-request")
    assert sorted(tuple(e["loc"]) for e in problem["errors"]) == [
        ("body", "agent", "max_tool_calls"),
        ("body", "agent", "max_turns"),
        ("body", "budget", "max_cost_usd"),
        ("body", "budget", "max_tokens"),
        ("body", "sla_class"),
    ]
    assert item(table, job_id) == before
    within = patch(call_api, job_id, {"budget": {"max_tokens": 5000}, "agent": {"max_turns": 10}})
    assert within.status == 200 and within.body["budget"]["max_tokens"] == 5000


def test_a_budget_is_never_lowered_below_what_the_job_spent_and_holds(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)
    table.update_item(
        Key={"pk": f"JOB#{job_id}", "sk": "JOB"},
        UpdateExpression="SET spent_tokens = :t, spent_cost_micro = :c",
        ExpressionAttributeValues={":t": 1200, ":c": 500_000},
    )

    low = patch(call_api, job_id, {"budget": {"max_tokens": 1199, "max_cost_usd": "0.49"}})
    exact = patch(call_api, job_id, {"budget": {"max_tokens": 1200, "max_cost_usd": "0.5"}})

    problem = assert_problem(low, 422, "invalid-request")
    assert {tuple(e["loc"]) for e in problem["errors"]} == {
        ("body", "budget", "max_tokens"),
        ("body", "budget", "max_cost_usd"),
    }
    assert exact.status == 200 and exact.body["budget"]["max_tokens"] == 1200


def test_a_raise_lifts_the_jobs_exhausted_budget(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)
    patch(call_api, job_id, {"budget": {"max_tokens": 100}})
    BudgetStore(table).exhaust(job_id, "job")

    raised = patch(call_api, job_id, {"budget": {"max_tokens": 100_000}})

    assert raised.status == 200 and raised.body["budget"]["exhausted"] is None
    assert "budget_exhausted" not in item(table, job_id)


@pytest.mark.parametrize("status", [S.COMPLETED, S.FAILED, S.CANCELLED, S.EXPIRED])
def test_a_finished_job_is_a_409_with_its_status(call_api: CallApi, table: Any, status: JobStatus) -> None:
    job_id = running_job(call_api, table)
    if status == S.CANCELLED:
        call_api("POST", f"/v1/jobs/{job_id}/cancel", key=KEY_A)
    else:
        JobStore(table).transition(job_id, status, event="job_ended")
    before = item(table, job_id)

    problem = assert_problem(patch(call_api, job_id, {"instructions": "late"}), 409, "already-finished")

    assert problem["job_status"] == status.value
    assert item(table, job_id) == before


def test_another_tenants_job_is_a_404(call_api: CallApi, table: Any) -> None:
    job_id = running_job(call_api, table)

    assert_problem(patch(call_api, job_id, {"instructions": "x"}, key=KEY_B), 404, "not-found")
    assert_problem(patch(call_api, "job_nope", {"instructions": "x"}), 404, "not-found")
    assert_problem(patch(call_api, job_id, {"instructions": "x"}, ops=True), 403, "forbidden")


# ---------------------------------------------------------------------- pinned limits


def test_a_job_pins_its_agent_limits_from_the_policy_in_force_at_submission(call_api: CallApi, table: Any) -> None:
    BudgetStore(table).put_policy("tenant-a", TenantPolicy(agent_max_turns=5, agent_max_tool_calls=9))
    job_id = submit(call_api).body["job_id"]

    BudgetStore(table).put_policy("tenant-a", TenantPolicy(agent_max_turns=80, agent_max_tool_calls=900))

    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body
    assert view["agent"] == {"max_turns": 5, "max_tool_calls": 9}


# ---------------------------------------------------------------------- supersede


def test_a_submission_supersedes_a_running_job(call_api: CallApi, table: Any) -> None:
    old = running_job(call_api, table)

    new = submit(call_api, {**BODY, "supersedes": old}, **{"Idempotency-Key": "fix-1"})
    again = submit(call_api, {**BODY, "supersedes": old}, **{"Idempotency-Key": "fix-1"})

    assert new.status == again.status == 202 and new.body["job_id"] == again.body["job_id"]
    replaced = call_api("GET", f"/v1/jobs/{old}", key=KEY_A).body
    assert replaced["status"] == "cancelled" and replaced["superseded_by"] == new.body["job_id"]
    logged = events(call_api, old)
    assert [e["detail"] for e in logged if e["type"] == "job_superseded"] == [{"by": new.body["job_id"]}]
    cancelled = [e for e in logged if e["type"] == "job_cancelled"]
    assert len(cancelled) == 1 and cancelled[0]["detail"]["reason"] == "superseded"
    successor = call_api("GET", f"/v1/jobs/{new.body['job_id']}", key=KEY_A).body
    assert successor["supersedes"] == old


def test_a_finished_job_that_is_superseded_keeps_its_status(call_api: CallApi, table: Any) -> None:
    old = running_job(call_api, table)
    JobStore(table).transition(old, S.COMPLETED, event="job_completed")

    new = submit(call_api, {**BODY, "supersedes": old})

    view = call_api("GET", f"/v1/jobs/{old}", key=KEY_A).body
    assert view["status"] == "completed" and view["superseded_by"] == new.body["job_id"]


@pytest.mark.parametrize("whose", ["unknown", "other-tenant", "not-an-id"])
def test_superseding_a_job_that_is_not_the_tenants_is_a_422_storing_nothing(
    call_api: CallApi, table: Any, whose: str
) -> None:
    other = submit(call_api, key=KEY_B).body["job_id"]
    target = {"unknown": "job_" + "0" * 28, "other-tenant": other, "not-an-id": "job_nope"}[whose]
    count = len(job_items(table))

    problem = assert_problem(submit(call_api, {**BODY, "supersedes": target}), 422, "invalid-request")

    assert ["body", "supersedes"] in [e["loc"] for e in problem["errors"]]
    assert len(job_items(table)) == count
    assert call_api("GET", f"/v1/jobs/{other}", key=KEY_B).body["superseded_by"] is None


# ---------------------------------------------------------------------- the contract's cursors


def test_an_empty_cursor_is_outside_the_schema(call_api: CallApi) -> None:
    problem = assert_problem(call_api("GET", "/v1/jobs", key=KEY_A, query={"cursor": ""}), 422, "invalid-request")

    assert ["query", "cursor"] in [e["loc"] for e in problem["errors"]]
