"""The audit trail: the hash chain (append, verify, an edited or deleted entry found, concurrent appends that never
fork it, one write per action), and the API's recording of a session of operator and reviewer actions, in order, with
each tenant reading only the actions on its own resources."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from longhaul.core.audit import AuditActor, audited, entry_hash, verify
from longhaul.core.auth import api_key_item
from longhaul.storage.audit import Action, AuditFilter, AuditStore
from tests.unit.api_helpers import assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, KEY_OPS, TENANT_A, TENANT_B, CallApi, FakeClock

OPERATOR = AuditActor(tenant_id="ops", role="operator", key_id="abc123")
REVIEWER_KEY = "key-reviewer-a-0123456789"


def action(n: int, tenant: str | None = TENANT_A) -> Action:
    return Action(
        actor=OPERATOR, action=f"POST /v1/ops/thing/{n}", target=f"/v1/ops/thing/{n}", outcome=200, tenant_id=tenant
    )


@pytest.fixture
def trail(table: Any, clock: FakeClock) -> AuditStore:
    return AuditStore(table, clock=clock)


def test_appended_entries_link_into_a_chain_that_verifies(trail: AuditStore) -> None:
    entries = [trail.append(action(n)) for n in range(5)]

    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].prev_hash == "0" * 64
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(entries))
    checked = trail.verify()
    assert checked.ok and checked.entries == 5 and checked.last_hash == entries[-1].hash
    assert trail.writes == 5  # one write per action


def test_an_edited_entry_is_detected(trail: AuditStore, table: Any) -> None:
    for n in range(3):
        trail.append(action(n))

    table.update_item(
        Key={"pk": "AUDIT", "sk": "SEQ#000000000002"},
        UpdateExpression="SET outcome = :o",
        ExpressionAttributeValues={":o": 404},
    )

    checked = trail.verify()
    assert not checked.ok
    assert checked.problems == ["entry 2 was changed after it was recorded"]


def test_an_edit_that_rehashes_the_entry_breaks_the_next_link(trail: AuditStore, table: Any) -> None:
    for n in range(3):
        trail.append(action(n))
    stored = table.get_item(Key={"pk": "AUDIT", "sk": "SEQ#000000000002"})["Item"]
    forged = {**{k: v for k, v in stored.items() if k not in ("pk", "sk", "gsi1pk", "gsi1sk")}, "outcome": 404}
    table.put_item(Item={**stored, "outcome": 404, "hash": entry_hash(_plain(forged))})

    assert trail.verify().problems == ["entry 3 does not link to the entry before it"]


def test_a_deleted_entry_is_detected(trail: AuditStore, table: Any) -> None:
    for n in range(4):
        trail.append(action(n))

    table.delete_item(Key={"pk": "AUDIT", "sk": "SEQ#000000000003"})

    problems = trail.verify().problems
    assert "entries 3-3 are missing" in problems and "entry 4 does not link to the entry before it" in problems


@pytest.fixture
def atomic_dynamodb() -> Iterator[None]:
    """Each DynamoDB operation atomic, as on AWS and on the local platform (plain moto checks a condition and writes
    without a lock: two threads could both pass `attribute_not_exists`)."""
    from moto.dynamodb.models import DynamoDBBackend

    from local.moto_patches import dynamodb as dynamodb_patches

    already = DynamoDBBackend.put_item.__qualname__.startswith("_atomic")  # a platform of this process patched it
    dynamodb_patches.serialize_dynamodb_operations()
    try:
        yield
    finally:
        if not already:
            dynamodb_patches.unserialize_dynamodb_operations()


@pytest.mark.usefixtures("atomic_dynamodb")
def test_concurrent_appends_never_fork_the_chain(table: Any, clock: FakeClock) -> None:
    stores = [AuditStore(table, clock=clock) for _ in range(4)]  # four functions
    errors: list[BaseException] = []

    def appender(store: AuditStore, base: int) -> None:
        try:
            for n in range(10):
                store.append(action(base + n))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=appender, args=(s, i * 100)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    checked = verify(stores[0].entries())
    assert checked.ok, checked.problems
    assert checked.entries == 40 and checked.last_seq == 40
    assert sorted(e["target"] for e in stores[0].entries()) == sorted(
        f"/v1/ops/thing/{i * 100 + n}" for i in range(4) for n in range(10)
    )


def test_functions_taking_turns_each_write_once_per_action(table: Any, clock: FakeClock) -> None:
    first, second = AuditStore(table, clock=clock), AuditStore(table, clock=clock)
    for n in range(3):
        first.append(action(2 * n))
        second.append(action(2 * n + 1))  # links to the entry the other function just wrote

    assert verify(first.entries()).ok and [e["seq"] for e in first.entries()] == [1, 2, 3, 4, 5, 6]
    assert first.writes == second.writes == 3


def test_listing_filters_and_pages_in_chain_order(trail: AuditStore, clock: FakeClock) -> None:
    for n in range(6):
        trail.append(action(n, TENANT_A if n % 2 == 0 else TENANT_B))

    page = trail.page(AuditFilter(), None, 4)
    rest = trail.page(AuditFilter(), page.next_cursor, 4)
    assert [e.seq for e in page.entries + rest.entries] == [1, 2, 3, 4, 5, 6] and rest.next_cursor is None
    assert [e.seq for e in trail.page(AuditFilter(action="POST /v1/ops/thing/3"), None, 10).entries] == [4]
    assert [e.seq for e in trail.page(AuditFilter(tenant_id=TENANT_B), None, 10).entries] == [2, 4, 6]


@pytest.mark.parametrize(
    ("role", "route", "recorded"),
    [
        ("operator", "POST /v1/ops/jobs/{job_id}/replay", True),
        ("operator", "POST /v1/ops/jobs/bulk-terminate", True),  # a route added later: recorded all the same
        ("operator", "GET /v1/ops/jobs", False),
        ("operator", "GET /v1/ops/jobs/{job_id}/prompts/{prompt_hash}", True),
        ("operator", "GET /v1/ops/tenants/{tenant_id}/policy", True),
        ("reviewer", "POST /v1/reviews/{review_id}/decision", True),
        ("reviewer", "GET /v1/reviews/{review_id}", True),
        ("reviewer", "GET /v1/reviews", False),
        ("tenant", "POST /v1/jobs", False),
        ("tenant", "POST /v1/jobs/{job_id}/cancel", True),
        ("tenant", "DELETE /v1/jobs/{job_id}", True),
    ],
)
def test_which_requests_are_recorded(role: str, route: str, recorded: bool) -> None:
    assert audited(role, route) is recorded


@pytest.mark.usefixtures("api_keys", "operator_key")
def test_a_session_of_operator_and_reviewer_actions_is_recorded_in_order(call_api: CallApi, table: Any) -> None:
    table.put_item(Item=api_key_item(REVIEWER_KEY, TENANT_A, role="reviewer"))
    job_a = submit(call_api, key=KEY_A).body["job_id"]
    submit(call_api, key=KEY_B)
    policy = "/v1/ops/tenants/tenant-a/policy"

    session = [
        ("GET", policy, KEY_OPS, None),
        ("PUT", policy, KEY_OPS, {"max_job_tokens": 200000, "daily_tokens": 5000000, "weight": 3}),
        ("GET", "/v1/ops/jobs", KEY_OPS, None),  # a plain listing: not recorded
        ("POST", f"/v1/ops/jobs/{job_a}/cancel", KEY_OPS, {}),
        ("GET", "/v1/reviews/rev_000000000000000000000000", REVIEWER_KEY, None),
        ("POST", "/v1/reviews/rev_000000000000000000000000/decision", REVIEWER_KEY, {"decision": "approve"}),
        ("GET", "/v1/ops/tenants/tenant-b/policy", KEY_OPS, None),
    ]
    statuses = [call_api(m, p, key=k, body=b).status for m, p, k, b in session]

    listed = call_api("GET", "/v1/ops/audit", key=KEY_OPS, query={"limit": "3"})
    entries = listed.body["entries"]
    while listed.body["next_cursor"]:
        listed = call_api(
            "GET", "/v1/ops/audit", key=KEY_OPS, query={"limit": "3", "cursor": listed.body["next_cursor"]}
        )
        entries += listed.body["entries"]
    assert [(e["action"], e["outcome"]) for e in entries] == [
        ("GET /v1/ops/tenants/{tenant_id}/policy", statuses[0]),
        ("PUT /v1/ops/tenants/{tenant_id}/policy", 200),
        ("POST /v1/ops/jobs/{job_id}/cancel", statuses[3]),
        ("GET /v1/reviews/{review_id}", 404),
        ("POST /v1/reviews/{review_id}/decision", statuses[5]),
        ("GET /v1/ops/tenants/{tenant_id}/policy", statuses[6]),
    ]
    cancel, decision = entries[2], entries[4]
    assert (cancel["tenant_id"], cancel["job_id"], cancel["actor"]["role"]) == (TENANT_A, job_a, "operator")
    assert cancel["source_ip"] == "192.0.2.10" and cancel["request_id"] and cancel["after_digest"]
    assert (decision["actor"]["role"], decision["tenant_id"]) == ("reviewer", TENANT_A)
    assert entries[1]["before_digest"] and entries[1]["before_digest"] != entries[1]["after_digest"]
    assert verify(entries).ok  # the pages hand out the chain as recorded

    # each tenant reads the actions on its own resources, operators' included, and no other tenant's
    own = call_api("GET", "/v1/audit", key=KEY_A).body["entries"]
    assert [e["seq"] for e in own] == [e["seq"] for e in entries if e["tenant_id"] == TENANT_A]
    other = call_api("GET", "/v1/audit", key=KEY_B).body["entries"]
    assert [e["target"] for e in other] == ["/v1/ops/tenants/tenant-b/policy"]
    assert_problem(call_api("GET", "/v1/ops/audit", key=KEY_A), 403, "forbidden")
    filtered = call_api("GET", "/v1/ops/audit", key=KEY_OPS, query={"action": "POST /v1/ops/jobs/{job_id}/cancel"})
    assert [e["job_id"] for e in filtered.body["entries"]] == [job_a]
    assert_problem(call_api("GET", "/v1/ops/audit", key=KEY_OPS, query={"cursor": "abc"}), 400, "bad-request")


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    from longhaul.storage.dynamo import plain

    return dict(plain(item))


@pytest.mark.usefixtures("api_keys", "operator_key")
def test_the_command_line_verifies_the_chain_and_exits_2_on_an_edited_entry(
    call_api: CallApi, table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from typer.testing import CliRunner

    from longhaul_client import client as client_module
    from longhaul_client.cli import app

    def through_the_handler(request: httpx.Request) -> httpx.Response:
        answer = call_api(
            request.method,
            request.url.path,
            key=request.headers["authorization"].removeprefix("Bearer "),
            query=dict(request.url.params) or None,
        )
        return httpx.Response(answer.status, headers=answer.headers, content=answer.raw_body.encode())

    made = client_module.LonghaulClient
    monkeypatch.setattr(
        "longhaul_client.cli.common.LonghaulClient",
        lambda url, key: made(url, key, transport=httpx.MockTransport(through_the_handler)),
    )
    for tenant in (TENANT_A, TENANT_B):
        call_api("GET", f"/v1/ops/tenants/{tenant}/policy", key=KEY_OPS)
    runner = CliRunner()
    env = {"LONGHAUL_URL": "http://api.example.test", "LONGHAUL_API_KEY": KEY_OPS}

    listed = runner.invoke(app, ["ops", "audit", "-o", "json"], env=env, catch_exceptions=False)
    held = runner.invoke(app, ["ops", "audit", "verify"], env=env, catch_exceptions=False)
    table.update_item(
        Key={"pk": "AUDIT", "sk": "SEQ#000000000001"},
        UpdateExpression="SET target = :t",
        ExpressionAttributeValues={":t": "/v1/ops/tenants/someone-else/policy"},
    )
    broken = runner.invoke(app, ["ops", "audit", "verify"], env=env, catch_exceptions=False)

    assert listed.exit_code == 0 and len(json.loads(listed.stdout)["entries"]) == 2
    assert held.exit_code == 0 and "holds: 2 entries" in held.stdout
    assert broken.exit_code == 2 and "entry 1 was changed after it was recorded" in broken.stdout


def test_a_sparse_filter_answers_bounded_pages_that_lead_to_the_match(trail: AuditStore) -> None:
    for n in range(20):
        trail.append(action(n))

    cursor, pages, found = None, 0, []
    while True:
        page = trail.page(AuditFilter(action="POST /v1/ops/thing/19"), cursor, 1)
        pages, found = pages + 1, found + [e.seq for e in page.entries]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert found == [20] and pages > 1  # each page read a bounded number of entries, none skipped
