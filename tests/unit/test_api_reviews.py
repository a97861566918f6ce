"""The API function's review routes and callback checks: roles before routing, problems, nothing stored for a
rejected callback."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.core.auth import api_key_item
from tests.unit.api_helpers import BODY, assert_problem, job_items
from tests.unit.conftest import KEY_A, CallApi

REVIEWER_KEY = "key-reviewer-a-0123456789"


@pytest.fixture
def reviewer_key(table: Any, api_keys: dict[str, str]) -> str:
    table.put_item(Item=api_key_item(REVIEWER_KEY, "tenant-a", role="reviewer"))
    return REVIEWER_KEY


def test_review_routes_need_a_reviewer_key(call_api: CallApi, reviewer_key: str) -> None:
    as_tenant = call_api("GET", "/v1/reviews", key=KEY_A)
    as_reviewer = call_api("GET", "/v1/reviews", key=reviewer_key, query={"status": "pending"})
    missing = call_api("GET", "/v1/reviews/rev_000000000000000000000000", key=reviewer_key)

    assert_problem(as_tenant, 403, "forbidden")
    assert as_reviewer.status == 200 and as_reviewer.body == {"reviews": [], "next_cursor": None}
    assert_problem(missing, 404, "not-found")


def test_a_reviewer_key_reaches_nothing_but_the_review_routes(call_api: CallApi, reviewer_key: str) -> None:
    assert_problem(call_api("GET", "/v1/jobs", key=reviewer_key), 403, "forbidden")
    assert_problem(call_api("POST", "/v1/jobs", key=reviewer_key, body=BODY), 403, "forbidden")
    assert_problem(call_api("GET", "/v1/ops/jobs", key=reviewer_key), 403, "forbidden")


def test_a_decision_is_validated_before_anything_is_read(call_api: CallApi, reviewer_key: str) -> None:
    bad = call_api(
        "POST", "/v1/reviews/rev_000000000000000000000000/decision", key=reviewer_key, body={"decision": "maybe"}
    )
    assert_problem(bad, 422, "invalid-request")


@pytest.mark.parametrize(
    "url",
    ["http://hooks.example.com/h", "https://0x7f000001/", "https://[::ffff:169.254.169.254]/", "ftp://x.example.com/"],
)
def test_a_hostile_callback_is_422_and_nothing_is_stored(
    call_api: CallApi, api_keys: dict[str, str], table: Any, url: str
) -> None:
    response = call_api("POST", "/v1/jobs", key=KEY_A, body={**BODY, "callback_url": url})

    problem = assert_problem(response, 422, "invalid-request")
    assert problem["errors"][0]["loc"] == ["body", "callback_url"]
    assert job_items(table) == []


def test_review_and_callback_are_kept_on_the_job(call_api: CallApi, api_keys: dict[str, str]) -> None:
    body = {**BODY, "review": {"mode": "auto", "deadline_seconds": 600}, "callback_url": "https://hooks.example.com/h"}
    job_id = call_api("POST", "/v1/jobs", key=KEY_A, body=body).body["job_id"]

    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body

    assert view["review"] is None and view["callback"] is None  # neither has happened yet
    too_long = call_api("POST", "/v1/jobs", key=KEY_A, body={**BODY, "review": {"deadline_seconds": 10**6}})
    assert_problem(too_long, 422, "invalid-request")


def test_me_names_a_reviewers_groups_and_a_reviewer_outside_a_group_sees_no_review(
    call_api: CallApi, table: Any, api_keys: dict[str, str]
) -> None:
    grouped = "key-reviewer-finance-0123456789"
    table.put_item(Item=api_key_item(grouped, "tenant-a", role="reviewer", groups=["finance"]))
    table.put_item(Item=api_key_item(REVIEWER_KEY, "tenant-a", role="reviewer"))

    assert call_api("GET", "/v1/me", key=grouped).body == {
        "tenant_id": "tenant-a",
        "role": "reviewer",
        "groups": ["finance"],
    }
    assert call_api("GET", "/v1/me", key=REVIEWER_KEY).body == {"tenant_id": "tenant-a", "role": "reviewer"}
    assert call_api("GET", "/v1/reviews", key=grouped).body == {"reviews": [], "next_cursor": None}
