"""An operator's termination of a job (with the message its owner reads), bulk replay and terminate by filter
(`/v1/ops/jobs:replay`, `/v1/ops/jobs:terminate`), and the job listings' filters, through `handlers.api.handler`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.storage.jobs import JobStore
from tests.unit.api_helpers import BODY, assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, KEY_OPS, CallApi

pytestmark = pytest.mark.usefixtures("api_keys", "operator_key")
OPS = KEY_OPS
S = JobStatus


def failed(store: JobStore, job_id: str, *, kind: str, step: str = "parse_documents") -> None:
    store.transition(job_id, S.RUNNING, event="job_started")
    error = {"kind": kind, "error": "SomeError", "step": step, "message": f"{kind} at {step}"}
    store.transition(job_id, S.FAILED, event="job_failed", set_fields={"error": error})


def events(call_api: CallApi, job_id: str, key: str = KEY_A) -> list[dict[str, Any]]:
    prefix = "/v1/ops" if key == OPS else "/v1"
    return call_api("GET", f"{prefix}/jobs/{job_id}/events", key=key).body["events"]


# ---------------------------------------------------------------------- terminate


def test_a_running_job_terminated_as_failed_shows_the_operators_message_to_its_owner(
    call_api: CallApi, store: JobStore
) -> None:
    job_id = submit(call_api).body["job_id"]
    store.transition(job_id, S.RUNNING, event="job_started")
    body = {"status": "failed", "reason": "the source archive is corrupt", "message": "Please upload the file again."}

    response = call_api("POST", f"/v1/ops/jobs/{job_id}/terminate", key=OPS, body=body)

    assert response.status == 200, response.raw_body
    assert response.body["status"] == "failed" and response.body["previous_status"] == "running"
    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body
    assert view["status"] == "failed"
    assert view["error"]["message"] == "Please upload the file again." and view["error"]["kind"] == "terminated"
    ended = [e for e in events(call_api, job_id) if e["type"] == "job_terminated"]
    assert len(ended) == 1 and ended[0]["status"] == "failed"
    assert ended[0]["detail"]["by"] == "ops" and ended[0]["detail"]["reason"] == "the source archive is corrupt"


def test_a_job_terminated_as_cancelled_carries_its_cancellation_message(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]
    body = {"status": "cancelled", "reason": "duplicate of another job", "message": "This job duplicated another."}

    response = call_api("POST", f"/v1/ops/jobs/{job_id}/terminate", key=OPS, body=body)

    assert response.status == 200, response.raw_body
    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body
    assert view["status"] == "cancelled" and view["error"] is None
    assert view["cancellation"]["message"] == "This job duplicated another."


def test_a_failed_job_terminated_as_failed_takes_the_message_and_a_finished_one_is_409(
    call_api: CallApi, store: JobStore
) -> None:
    job_id = submit(call_api).body["job_id"]
    failed(store, job_id, kind="invalid-input")
    body = {"status": "failed", "reason": "cannot be fixed", "message": "The contract is unreadable."}

    first = call_api("POST", f"/v1/ops/jobs/{job_id}/terminate", key=OPS, body=body)
    as_cancelled = call_api("POST", f"/v1/ops/jobs/{job_id}/terminate", key=OPS, body={**body, "status": "cancelled"})

    assert first.status == 200, first.raw_body
    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body
    assert view["error"]["message"] == "The contract is unreadable." and view["error"]["step"] == "parse_documents"
    assert_problem(as_cancelled, 409, "already-finished")
    cancelled = submit(call_api, {**BODY, "input": {**BODY["input"], "question": "another?"}}).body["job_id"]
    call_api("POST", f"/v1/jobs/{cancelled}/cancel", key=KEY_A)
    assert_problem(call_api("POST", f"/v1/ops/jobs/{cancelled}/terminate", key=OPS, body=body), 409, "already-finished")


def test_a_terminate_message_over_1000_characters_or_a_tenant_key_is_refused(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]
    long = {"status": "failed", "reason": "too long", "message": "x" * 1001}

    assert call_api("POST", f"/v1/ops/jobs/{job_id}/terminate", key=OPS, body=long).status == 422
    short = {**long, "message": "ok"}
    assert call_api("POST", f"/v1/ops/jobs/{job_id}/terminate", key=KEY_A, body=short).status == 403
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["status"] == "queued"


# ---------------------------------------------------------------------- bulk


def three_failures(call_api: CallApi, store: JobStore) -> tuple[str, str, str]:
    ids = [
        submit(call_api, {**BODY, "input": {**BODY["input"], "question": f"question {n}?"}}, key=key).body["job_id"]
        for n, key in enumerate((KEY_A, KEY_B, KEY_A))
    ]
    failed(store, ids[0], kind="invalid-input")
    failed(store, ids[1], kind="invalid-input", step="build_index")
    failed(store, ids[2], kind="transient")
    return ids[0], ids[1], ids[2]


def test_a_bulk_replay_dry_run_lists_the_matching_jobs_and_their_plans_and_changes_nothing(
    call_api: CallApi, store: JobStore
) -> None:
    a, b, _ = three_failures(call_api, store)
    before = events(call_api, a)

    response = call_api("POST", "/v1/ops/jobs:replay", key=OPS, body={"filter": {"error_kind": "invalid-input"}})

    assert response.status == 200, response.raw_body
    assert response.body["dry_run"] is True
    assert {j["job_id"] for j in response.body["jobs"]} == {a, b}
    assert {j["outcome"] for j in response.body["jobs"]} == {"would_replay"}
    plans = {j["job_id"]: j["plan"]["from_step"] for j in response.body["jobs"]}
    assert plans == {a: "parse_documents", b: "build_index"}
    assert events(call_api, a) == before
    narrowed = {"filter": {"error_kind": "invalid-input", "failed_step": "build_index", "tenant_id": "tenant-b"}}
    assert [j["job_id"] for j in call_api("POST", "/v1/ops/jobs:replay", key=OPS, body=narrowed).body["jobs"]] == [b]


def test_a_bulk_replay_sent_twice_with_its_key_replays_each_job_once(call_api: CallApi, store: JobStore) -> None:
    a, b, other = three_failures(call_api, store)
    body = {"filter": {"error_kind": "invalid-input"}, "dry_run": False, "reason": "the parser is fixed"}
    key = {"Idempotency-Key": "bulk-replay-1"}

    first = call_api("POST", "/v1/ops/jobs:replay", key=OPS, body=body, headers=key)
    # (between the two: job a fails again; the second send must not replay it a second time)
    store.transition(
        a,
        S.FAILED,
        event="job_failed",
        set_fields={"error": {"kind": "invalid-input", "error": "E", "message": "again"}},
    )
    second = call_api("POST", "/v1/ops/jobs:replay", key=OPS, body=body, headers=key)

    assert first.status == 200, first.raw_body
    assert {j["job_id"]: j["outcome"] for j in first.body["jobs"]} == {a: "replayed", b: "replayed"}
    assert second.body == first.body
    for job_id in (a, b):
        assert store.get_job(job_id).attempts == 2  # type: ignore[union-attr]
        replays = [e for e in events(call_api, job_id, OPS) if e["type"] == "job_replayed"]
        assert len(replays) == 1 and replays[0]["detail"]["reason"].startswith("the parser is fixed")
    assert store.get_job(other).attempts == 1  # type: ignore[union-attr]
    reused = call_api("POST", "/v1/ops/jobs:replay", key=OPS, body={**body, "reason": "another one"}, headers=key)
    assert_problem(reused, 422, "idempotency-key-reused")


def test_a_bulk_terminate_ends_the_matching_jobs_with_the_message(call_api: CallApi, store: JobStore) -> None:
    queued = [
        submit(call_api, {**BODY, "input": {**BODY["input"], "question": f"q{n}?"}}).body["job_id"] for n in range(2)
    ]
    body = {"filter": {"status": "queued", "tenant_id": "tenant-a"}, "status": "cancelled", "message": "Closed."}

    dry = call_api("POST", "/v1/ops/jobs:terminate", key=OPS, body=body)
    done = call_api("POST", "/v1/ops/jobs:terminate", key=OPS, body={**body, "dry_run": False})

    assert dry.status == 200 and {j["outcome"] for j in dry.body["jobs"]} == {"would_terminate"}
    assert done.status == 200, done.raw_body
    assert done.body["counts"] == {"terminated": 2}
    for job_id in queued:
        view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body
        assert view["status"] == "cancelled" and view["cancellation"]["message"] == "Closed."


def test_bulk_routes_are_for_operators(call_api: CallApi) -> None:
    assert call_api("POST", "/v1/ops/jobs:replay", key=KEY_A, body={}).status == 403


# ---------------------------------------------------------------------- listings


def test_listings_filter_by_workflow_class_time_and_find_by_question_word_or_id_prefix(call_api: CallApi) -> None:
    start = datetime.now(UTC) - timedelta(seconds=1)
    ids = [
        submit(call_api, {**BODY, "input": {**BODY["input"], "question": q}}).body["job_id"]
        for q in ("What is the termination notice?", "Who pays the indemnity?", "Termination fees?")
    ]
    submit(call_api, {**BODY, "input": {**BODY["input"], "question": "termination for B"}}, key=KEY_B)

    def listed(query: dict[str, str], key: str = KEY_A, path: str = "/v1/jobs") -> list[str]:
        found: list[str] = []
        cursor: str | None = None
        for _ in range(10):
            page = call_api("GET", path, key=key, query={**query, **({"cursor": cursor} if cursor else {})})
            assert page.status == 200, page.raw_body
            found += [j["job_id"] for j in page.body["jobs"]]
            cursor = page.body["next_cursor"]
            if cursor is None:
                return found
        raise AssertionError("the listing did not end")

    assert listed({"q": "TERMINATION", "limit": "1"}) == [ids[2], ids[0]]  # paged one at a time, newest first
    assert listed({"q": ids[1][:-4]}) == [ids[1]]
    assert listed({"workflow": "document-analysis", "sla_class": "standard"}) == ids[::-1]
    assert listed({"workflow": "invoice-reconciliation"}) == []
    assert listed({"sla_class": "batch"}) == []
    assert listed({"created_since": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}) == []
    assert listed({"created_since": start.isoformat(), "created_until": datetime.now(UTC).isoformat()}) == ids[::-1]
    assert len(listed({"q": "termination"}, key=OPS, path="/v1/ops/jobs")) == 3  # every tenant's
    assert listed({"q": "termination", "tenant": "tenant-b"}, key=OPS, path="/v1/ops/jobs") != []
    assert listed({"escalated": "true"}, key=OPS, path="/v1/ops/jobs") == []


def test_escalated_jobs_are_found_by_the_listings_and_the_bulk_filter(
    call_api: CallApi, store: JobStore, table: Any
) -> None:
    a, b, _ = three_failures(call_api, store)
    escalation = {"by": "ops", "at": "2026-12-07T10:00:00.000Z", "note": "parser crash", "link": "https://x.example/1"}
    table.update_item(
        Key={"pk": f"JOB#{b}", "sk": "JOB"},
        UpdateExpression="SET escalation = :e",
        ExpressionAttributeValues={":e": escalation},
    )

    listed = call_api("GET", "/v1/ops/jobs", key=OPS, query={"escalated": "true"}).body["jobs"]
    others = call_api("GET", "/v1/ops/jobs", key=OPS, query={"escalated": "false", "status": "failed"}).body["jobs"]
    tenants = call_api("GET", "/v1/jobs", key=KEY_B, query={"escalated": "true"}).body["jobs"]
    bulk = call_api("POST", "/v1/ops/jobs:replay", key=OPS, body={"filter": {"escalated": True}}).body["jobs"]

    assert [j["job_id"] for j in listed] == [b] == [j["job_id"] for j in tenants] == [j["job_id"] for j in bulk]
    assert b not in {j["job_id"] for j in others} and a in {j["job_id"] for j in others}


def test_a_jobs_outcome_is_kept_once_under_its_key(table: Any) -> None:
    from longhaul.storage.bulk import BulkRecords, BulkTarget

    records = BulkRecords(table)
    claimed = records.claim(
        "ops", "k1", action="replay", payload_hash="h", targets=[BulkTarget(job_id="j", attempts=1)], more=False
    )
    again = records.claim("ops", "k1", action="replay", payload_hash="h", targets=[], more=False)

    first = records.done("ops", "k1", "j", {"outcome": "replayed"})
    second = records.done("ops", "k1", "j", {"outcome": "refused"})  # a concurrent send of the same action, later

    assert claimed is not None and again is None
    assert first == second == '{"outcome":"replayed"}'
    assert records.get("ops", "k1").done == {"j": first}  # type: ignore[union-attr]


def test_a_filtered_page_that_reads_its_budget_answers_short_with_a_cursor_and_misses_nothing(
    call_api: CallApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from longhaul.storage import listing

    ids = [
        submit(call_api, {**BODY, "input": {**BODY["input"], "question": q}}).body["job_id"]
        for q in ("alpha one", "beta", "beta", "alpha two", "beta", "beta", "alpha three")
    ]
    monkeypatch.setattr(listing, "MAX_QUERIES_PER_PAGE", 1)
    monkeypatch.setattr(listing, "QUERY_PAGE_ITEMS", 2)

    pages: list[list[str]] = []
    query: dict[str, str] = {"q": "alpha", "limit": "2"}
    for _ in range(10):
        page = call_api("GET", "/v1/jobs", key=KEY_A, query=query).body
        pages.append([j["job_id"] for j in page["jobs"]])
        if page["next_cursor"] is None:
            break
        query = {"q": "alpha", "limit": "2", "cursor": page["next_cursor"]}

    assert [j for page in pages for j in page] == [ids[6], ids[3], ids[0]]
    assert any(len(page) < 2 for page in pages[:-1]), "a page read its budget and answered short"


@pytest.mark.parametrize("value", ["0.5", "1700000000", "yesterday"])
def test_a_time_that_is_not_iso_8601_is_refused(call_api: CallApi, value: str) -> None:
    assert call_api("GET", "/v1/jobs", key=KEY_A, query={"created_until": value}).status == 422
    assert call_api("GET", "/v1/ops/jobs", key=OPS, query={"created_since": value}).status == 422
    body = {"filter": {"until": float(value) if value[0].isdigit() else value}}
    assert call_api("POST", "/v1/ops/jobs:replay", key=OPS, body=body).status == 422
