"""Operator routes through `handlers.api.handler`: every tenant's jobs, reads and cancel of any job, the replay
plan; and a job's ETA, which only a moving job has."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus, ReplayRequest
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore
from longhaul.workflows.document_analysis.spec import SPEC
from tests.unit.api_helpers import assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, KEY_OPS, CallApi

pytestmark = pytest.mark.usefixtures("api_keys", "operator_key")
OPS = KEY_OPS
S = JobStatus


STEPS = SPEC.step_names


def running(
    table: Any, job_id: str, *, started_ago: timedelta, completed: int, in_step: timedelta = timedelta(0)
) -> JobStore:
    """Move a submitted job to running, started `started_ago` with `completed` of its steps done, the next one
    running for `in_step`."""
    store = JobStore(table)  # the API's own clock: the ETA is computed from the real time
    store.transition(job_id, S.RUNNING, event="job_started")
    now = datetime.now(UTC)
    table.update_item(
        Key={"pk": f"JOB#{job_id}", "sk": "JOB"},
        UpdateExpression="SET started_at = :at, progress = :p, current_step = :step, step_started_at = :since",
        ExpressionAttributeValues={
            ":at": iso(now - started_ago),
            ":p": {"completed": completed, "total": len(STEPS), "unit": "steps", "message": "running"},
            ":step": STEPS[completed],
            ":since": iso(now - in_step),
        },
    )
    return store


# ---------------------------------------------------------------------- listing


def test_operators_list_every_tenants_jobs_newest_first_in_pages(call_api: CallApi) -> None:
    submitted = [submit(call_api, key=key).body["job_id"] for key in (KEY_A, KEY_B, KEY_A, KEY_B, KEY_A)]

    seen: list[list[str]] = []
    query = {"limit": "2"}
    for _ in range(5):
        page = call_api("GET", "/v1/ops/jobs", key=OPS, query=query)
        assert page.status == 200, page.raw_body
        seen.append([j["job_id"] for j in page.body["jobs"]])
        if page.body["next_cursor"] is None:
            break
        query = {"limit": "2", "cursor": page.body["next_cursor"]}

    assert [j for page in seen for j in page] == submitted[::-1]
    assert [len(page) for page in seen] == [2, 2, 1]


def test_each_row_of_the_operator_listing_says_whose_job_it_is(call_api: CallApi) -> None:
    a, b = (submit(call_api, key=key).body["job_id"] for key in (KEY_A, KEY_B))

    rows = call_api("GET", "/v1/ops/jobs", key=OPS).body["jobs"]
    one = call_api("GET", f"/v1/ops/jobs/{b}", key=OPS).body

    assert {r["job_id"]: r["tenant_id"] for r in rows} == {a: "tenant-a", b: "tenant-b"}
    assert one["tenant_id"] == "tenant-b"


def test_the_operator_listing_filters_by_tenant_and_status(call_api: CallApi, store: JobStore) -> None:
    a1, _, a2 = (submit(call_api, key=key).body["job_id"] for key in (KEY_A, KEY_B, KEY_A))
    store.transition(a1, S.RUNNING, event="job_started")

    by_tenant = call_api("GET", "/v1/ops/jobs", key=OPS, query={"tenant": "tenant-a"}).body["jobs"]
    running_ones = call_api("GET", "/v1/ops/jobs", key=OPS, query={"status": "running"}).body["jobs"]

    assert [j["job_id"] for j in by_tenant] == [a2, a1]
    assert [j["job_id"] for j in running_ones] == [a1]


def test_a_forged_cursor_is_400(call_api: CallApi) -> None:
    submit(call_api)
    tenants_cursor = call_api("GET", "/v1/jobs", key=KEY_A, query={"limit": "1"}).body["next_cursor"]

    assert_problem(call_api("GET", "/v1/ops/jobs", key=OPS, query={"cursor": "bm9wZQ"}), 400, "bad-request")
    # tenant B cannot page through tenant A's jobs with A's cursor
    response = call_api("GET", "/v1/jobs", key=KEY_B, query={"cursor": tenants_cursor or "x"})
    assert_problem(response, 400, "bad-request")


# ---------------------------------------------------------------------- any job


def test_operators_read_and_cancel_any_tenants_job(call_api: CallApi) -> None:
    job_id = submit(call_api, key=KEY_A).body["job_id"]

    view = call_api("GET", f"/v1/ops/jobs/{job_id}", key=OPS)
    events = call_api("GET", f"/v1/ops/jobs/{job_id}/events", key=OPS)
    cancelled = call_api("POST", f"/v1/ops/jobs/{job_id}/cancel", key=OPS)

    assert view.status == 200 and view.body["job_id"] == job_id
    assert events.status == 200 and [e["type"] for e in events.body["events"]] == ["job_queued"]
    assert cancelled.status == 202 and cancelled.body["status"] == "cancelled"
    after = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"]
    requested = next(e for e in after if e["type"] == "cancel_requested")
    assert requested["detail"] == {"by": "ops", "role": "operator"}


@pytest.mark.parametrize(
    ("method", "suffix"), [("GET", ""), ("GET", "/events"), ("POST", "/cancel")], ids=["job", "events", "cancel"]
)
def test_tenants_cannot_use_the_operator_job_routes(call_api: CallApi, method: str, suffix: str) -> None:
    job_id = submit(call_api, key=KEY_A).body["job_id"]

    assert_problem(call_api(method, f"/v1/ops/jobs/{job_id}{suffix}", key=KEY_A), 403, "forbidden")
    assert_problem(call_api(method, f"/v1/ops/jobs/job_doesnotexist{suffix}", key=OPS), 404, "not-found")
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["status"] == "queued"


def test_an_operator_key_on_tenant_routes_sees_only_its_own_tenant(call_api: CallApi) -> None:
    job_id = submit(call_api, key=KEY_A).body["job_id"]

    assert_problem(call_api("GET", f"/v1/jobs/{job_id}", key=OPS), 404, "not-found")


# ---------------------------------------------------------------------- ETA


def test_only_a_moving_job_has_an_eta(call_api: CallApi, table: Any) -> None:
    job_id = submit(call_api).body["job_id"]
    running(table, job_id, started_ago=timedelta(seconds=100), completed=2, in_step=timedelta(seconds=10))

    moving = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["progress"]
    call_api("POST", f"/v1/jobs/{job_id}/cancel", key=KEY_A)
    stopped = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body

    # No history yet: 90 s for its 2 finished steps is 45 s a step; 35 s left of the third, 45 s each step ahead.
    ahead = len(STEPS) - 3
    assert moving["eta_basis"] == "current_step"
    assert 35 + 45 * ahead - 5 <= moving["eta_seconds"] <= 35 + 45 * ahead + 5
    assert moving["estimated_finish_at"] is not None
    assert stopped["status"] == "cancelled" and stopped["progress"]["eta_seconds"] is None


@pytest.mark.parametrize(
    ("status", "eta"), [(S.RETRYING, True), (S.WAITING_FOR_REVIEW, True), (S.CANCEL_REQUESTED, False)]
)
def test_a_job_being_cancelled_has_no_eta_and_one_waiting_for_a_person_has_one(
    call_api: CallApi, table: Any, status: JobStatus, eta: bool
) -> None:
    job_id = submit(call_api).body["job_id"]
    running(table, job_id, started_ago=timedelta(seconds=100), completed=2).transition(
        job_id, status, event=f"job_{status.value}"
    )

    progress = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["progress"]

    assert (progress["eta_seconds"] is not None) is eta, progress


# ---------------------------------------------------------------------- replay plan


def _listed(count: int) -> dict[str, Any]:
    ref = {"index": 0, "name": "doc-0.txt", "media_type": "text/plain", "key": "k"}
    return {"count": count, "manifest_key": "m.json", "items": [{"index": 0, "ref": ref}][:count]}


def parsed_up_to_the_index(checkpoints: CheckpointStore, job_id: str) -> None:
    """One document listed and parsed, no page to OCR (the container step has no item), chunked and indexed (one
    batch of documents)."""
    batch = {"count": 1, "manifest_key": "b.json", "items": [{"index": 0, "ref": {"number": 0, "first": 0, "end": 1}}]}
    for step, output in (
        ("list_documents", {"documents": _listed(1)}),
        ("plan_ocr", {"ocr_batches": _listed(0), "index_batches": batch}),
    ):
        checkpoints.commit_step(job_id, step, None, {"status": "succeeded", "output": output})
    checkpoints.commit_step(job_id, "parse_documents", 0, {"status": "succeeded", "output": {"pages": 1}})
    checkpoints.commit_step(job_id, "build_index", 0, {"status": "succeeded", "output": {"chunks": 1}})


def test_a_replay_of_a_cancelled_job_lists_exactly_what_will_run_again(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore
) -> None:
    # Given a job cancelled in its fan-out: 3 of its 5 items committed, the steps after it never ran
    job_id = submit(call_api).body["job_id"]
    running(table, job_id, started_ago=timedelta(seconds=10), completed=4)
    parsed_up_to_the_index(checkpoints, job_id)
    groups = [f"group-{n}" for n in range(5)]
    checkpoints.commit_step(job_id, "retrieve_passages", None, {"status": "succeeded", "output": {"groups": groups}})
    for item in (0, 1, 3):
        checkpoints.commit_step(job_id, "extract_evidence", item, {"status": "succeeded", "output": {"n": item}})
    checkpoints.put_step(job_id, "extract_evidence", 2, {"status": "running"})
    assert call_api("POST", f"/v1/jobs/{job_id}/cancel", key=KEY_A).status == 202

    # When an operator replays it from a later step than it reached
    body = {"from_step": "verify_citations", "reason": "resume the cancelled job"}
    response = call_api("POST", f"/v1/ops/jobs/{job_id}/replay", key=OPS, body=body)

    # Then the response names every step and item that will run, not only those from `from_step`
    assert response.status == 202, response.raw_body
    plan = response.body
    assert plan["rerun_steps"] == ["extract_evidence", "draft_answer", "verify_citations", "review", "publish_result"]
    # (kept: the one parsed document, item 0 of parse_documents, its one batch, items 0, 1, 3 of extract_evidence)
    assert plan["rerun_items"] == {"extract_evidence": [2, 4]}
    assert plan["kept_items"] == {"parse_documents": [0], "build_index": [0], "extract_evidence": [0, 1, 3]}
    assert [(n["step"], n["item"], n["unit"]) for n in plan["rerun_named"]] == [
        ("extract_evidence", 2, "passage group"),
        ("extract_evidence", 4, "passage group"),
    ]
    replayed = next(e for e in call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"][::-1])
    assert replayed["type"] == "job_replayed" and replayed["detail"]["rerun_items"] == {"extract_evidence": [2, 4]}
    assert checkpoints.get_step(job_id, "extract_evidence", 0) is not None, "kept checkpoints stay"
    assert checkpoints.get_step(job_id, "extract_evidence", 2) is not None, "a step before from_step is not dropped"


def test_a_dry_run_replay_is_a_200_with_the_plan_and_starts_nothing(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore
) -> None:
    job_id = submit(call_api).body["job_id"]
    store = running(table, job_id, started_ago=timedelta(seconds=10), completed=4)
    parsed_up_to_the_index(checkpoints, job_id)
    store.transition(job_id, S.FAILED, event="job_failed")
    events = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"]

    body = {"from_step": "retrieve_passages", "reason": "what would run?", "dry_run": True}
    response = call_api("POST", f"/v1/ops/jobs/{job_id}/replay", key=OPS, body=body)

    assert response.status == 200, response.raw_body
    assert response.body["dry_run"] is True and response.body["status"] == "failed"
    assert response.body["rerun_steps"][0] == "retrieve_passages"
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["status"] == "failed"
    assert call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"] == events
    assert checkpoints.get_step(job_id, "build_index", 0) is not None


def test_a_redrive_on_the_current_version_is_refused_as_its_schema_says(call_api: CallApi, table: Any) -> None:
    """The document's `not` and the model agree: a redrive resumes its execution on its own version."""
    job_id = submit(call_api).body["job_id"]
    running(table, job_id, started_ago=timedelta(seconds=10), completed=4).transition(
        job_id, S.FAILED, event="job_failed"
    )
    body = {"reason": "resume it", "mode": "redrive", "version": "current"}

    response = call_api("POST", f"/v1/ops/jobs/{job_id}/replay", key=OPS, body=body)

    assert response.status == 422, response.raw_body
    assert "its own version" in response.raw_body
    schema = ReplayRequest.model_json_schema()
    assert schema["not"]["properties"] == {"mode": {"const": "redrive"}, "version": {"const": "current"}}
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["status"] == "failed"


def test_a_replay_from_before_the_fan_out_reruns_all_its_items(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore
) -> None:
    job_id = submit(call_api).body["job_id"]
    store = running(table, job_id, started_ago=timedelta(seconds=10), completed=4)
    parsed_up_to_the_index(checkpoints, job_id)
    checkpoints.commit_step(
        job_id, "retrieve_passages", None, {"status": "succeeded", "output": {"groups": ["a", "b"]}}
    )
    for item in (0, 1):
        checkpoints.commit_step(job_id, "extract_evidence", item, {"status": "succeeded", "output": {}})
    store.transition(job_id, S.FAILED, event="job_failed")

    body = {"from_step": "retrieve_passages", "reason": "new passages"}
    plan = call_api("POST", f"/v1/ops/jobs/{job_id}/replay", key=OPS, body=body).body

    assert plan["rerun_steps"] == [
        "retrieve_passages",
        "extract_evidence",
        "draft_answer",
        "verify_citations",
        "review",
        "publish_result",
    ]
    assert plan["rerun_items"] == {"extract_evidence": [0, 1]}
    assert plan["kept_items"] == {"parse_documents": [0], "build_index": [0]}  # the parsed document, its index
    assert checkpoints.get_step(job_id, "extract_evidence", 0) is None
    assert checkpoints.get_step(job_id, "build_index", 0) is not None


# ---------------------------------------------------------------------- the platform's metrics, read back


def test_operators_read_the_platforms_metrics_by_series(call_api: CallApi) -> None:
    import boto3

    from longhaul.core.observability import MODEL_COST_METRIC, MODEL_TOKENS_METRIC, NAMESPACE

    cloudwatch = boto3.client("cloudwatch")
    now = datetime.now(UTC)
    for workflow, tokens in (("document-analysis", 1200), ("document-analysis", 300), ("invoice-reconciliation", 50)):
        cloudwatch.put_metric_data(
            Namespace=NAMESPACE,
            MetricData=[
                {"MetricName": MODEL_TOKENS_METRIC, "Value": tokens, "Timestamp": now,
                 "Dimensions": [{"Name": "workflow", "Value": workflow}]},
                {"MetricName": MODEL_COST_METRIC, "Value": tokens / 1000, "Timestamp": now,
                 "Dimensions": [{"Name": "tenant", "Value": "tenant-a"}]},
            ],
        )  # fmt: skip

    report = call_api("GET", "/v1/ops/metrics", key=OPS, query={"hours": "2", "name": MODEL_TOKENS_METRIC})

    assert report.status == 200, report.raw_body
    series = {s["dimensions"]["workflow"]: s for s in report.body["series"]}
    assert series["document-analysis"]["sum"] == 1500 and series["document-analysis"]["count"] == 2
    assert series["invoice-reconciliation"]["maximum"] == 50
    assert call_api("GET", "/v1/ops/metrics", key=KEY_A).status == 403
    assert_problem(call_api("GET", "/v1/ops/metrics", key=OPS, query={"hours": "0"}), 422, "invalid-request")


# ---------------------------------------------------------------------- tenant policies


def test_a_policy_patch_changes_only_the_fields_it_names(call_api: CallApi) -> None:
    path = "/v1/ops/tenants/tenant-a/policy"
    put = call_api("PUT", path, key=OPS, body={"max_job_tokens": 200000, "daily_tokens": 5000000, "weight": 3})
    assert put.status == 200, put.raw_body

    patched = call_api("PATCH", path, key=OPS, body={"jobs_in_flight": 2, "sla_classes": ["standard", "batch"]})

    assert patched.status == 200, patched.raw_body
    policy = patched.body["policy"]
    assert (policy["max_job_tokens"], policy["daily_tokens"], policy["weight"]) == (200000, 5000000, 3)  # kept
    assert (policy["jobs_in_flight"], policy["sla_classes"]) == (2, ["standard", "batch"])
    assert patched.body["previous"]["jobs_in_flight"] == 50 and patched.body["reset"] == []
    assert call_api("GET", path, key=OPS).body["policy"] == policy

    # null puts a field back to its default, and says so
    back = call_api("PATCH", path, key=OPS, body={"weight": None}).body
    assert back["policy"]["weight"] == 1 and back["reset"] == ["weight"] and back["policy"]["jobs_in_flight"] == 2


def test_a_policy_put_replaces_the_whole_policy_and_says_what_it_reset(call_api: CallApi) -> None:
    path = "/v1/ops/tenants/tenant-a/policy"
    call_api("PUT", path, key=OPS, body={"max_job_tokens": 200000, "jobs_in_flight": 2})

    replaced = call_api("PUT", path, key=OPS, body={"max_job_tokens": 100000})

    assert replaced.status == 200, replaced.raw_body
    assert replaced.body["policy"]["jobs_in_flight"] == 50  # omitted: back to its default
    assert replaced.body["reset"] == ["jobs_in_flight"]
    assert replaced.body["previous"]["jobs_in_flight"] == 2 and replaced.body["previous"]["max_job_tokens"] == 200000


@pytest.mark.parametrize(
    ("body", "field"),
    [({"weight": 0}, "weight"), ({"sla_classes": []}, "sla_classes"), ({"jobs": 1}, "jobs"), ({"routes": ["x"]}, None)],
)
def test_an_invalid_policy_patch_is_422_and_changes_nothing(
    call_api: CallApi, body: dict[str, Any], field: str | None
) -> None:
    path = "/v1/ops/tenants/tenant-a/policy"
    before = call_api("GET", path, key=OPS).body

    problem = assert_problem(call_api("PATCH", path, key=OPS, body=body), 422, "invalid-request")

    if field:
        assert [e["loc"] for e in problem["errors"]] == [["body", field]]
    else:
        assert problem["allowed_routes"] == ["default"]
    assert call_api("GET", path, key=OPS).body == before


@pytest.fixture
def atomic_dynamodb() -> Iterator[None]:
    """moto checks a put's condition and writes the item without a lock; DynamoDB (and the local platform, through
    its patch) does both atomically, which concurrent conditional writes rely on."""
    from moto.dynamodb.models import DynamoDBBackend

    from local.moto_patches import dynamodb as dynamodb_patches

    already = DynamoDBBackend.put_item.__qualname__.startswith("_atomic")  # a platform of this process patched it
    dynamodb_patches.serialize_dynamodb_operations()
    try:
        yield
    finally:
        if not already:
            dynamodb_patches.unserialize_dynamodb_operations()


def test_concurrent_policy_patches_both_land(call_api: CallApi, atomic_dynamodb: None) -> None:
    """Each patch is conditional on the policy it read: neither undoes the other."""
    from concurrent.futures import ThreadPoolExecutor

    path = "/v1/ops/tenants/tenant-a/policy"
    changes = [{"weight": 5}, {"jobs_in_flight": 7}, {"daily_tokens": 123}, {"submissions_per_minute": 9}]
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda b: call_api("PATCH", path, key=OPS, body=b).status, changes))

    assert statuses == [200] * 4
    policy = call_api("GET", path, key=OPS).body["policy"]
    assert (policy["weight"], policy["jobs_in_flight"], policy["daily_tokens"], policy["submissions_per_minute"]) == (
        5,
        7,
        123,
        9,
    )


# ---------------------------------------------------------------------- tenants that do not exist


UNKNOWN = "TENANT-A"  # a tenant id, but no tenant's: no key was made for it, no policy stored, no job submitted


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"/v1/ops/tenants/{UNKNOWN}/policy", None),
        ("PATCH", f"/v1/ops/tenants/{UNKNOWN}/policy", {"weight": 2}),
        ("GET", f"/v1/ops/tenants/{UNKNOWN}/memory", None),
        ("DELETE", f"/v1/ops/tenants/{UNKNOWN}/memory", None),
        ("DELETE", f"/v1/ops/tenants/{UNKNOWN}/memory/mem_1", None),
    ],
)
def test_an_operator_route_naming_an_unknown_tenant_is_404_and_creates_nothing(
    call_api: CallApi, table: Any, method: str, path: str, body: dict[str, Any] | None
) -> None:
    problem = assert_problem(call_api(method, path, key=OPS, body=body), 404, "not-found")

    assert problem["detail"] == f"no tenant {UNKNOWN!r}"
    assert not [item for item in table.scan()["Items"] if item["pk"] == f"TENANT#{UNKNOWN}"]


def test_a_policy_put_makes_a_new_tenant_exist(call_api: CallApi) -> None:
    """An operator may set a tenant's limits before its first key is made."""
    path = "/v1/ops/tenants/acme/policy"
    assert call_api("GET", path, key=OPS).status == 404

    put = call_api("PUT", path, key=OPS, body={"max_job_tokens": 1000})

    assert put.status == 200, put.raw_body
    got = call_api("GET", path, key=OPS)
    assert got.status == 200 and got.body["policy"]["max_job_tokens"] == 1000 and got.body["source"] == "stored"
    assert call_api("GET", "/v1/ops/tenants/acme/memory", key=OPS).body["memories"] == []


def test_a_tenant_with_a_key_and_nothing_else_exists(call_api: CallApi) -> None:
    policy = call_api("GET", "/v1/ops/tenants/tenant-b/policy", key=OPS)

    assert policy.status == 200 and policy.body["source"] == "default", policy.raw_body
    assert call_api("GET", "/v1/ops/tenants/tenant-b/memory", key=OPS).status == 200


# ---------------------------------------------------------------------- the greedy gateway resource


def test_an_operator_path_with_another_method_is_405_with_allow_and_an_unknown_one_404(call_api: CallApi) -> None:
    """The operator routes reach the operators' function through one greedy gateway resource: the function answers
    what the gateway's own routes answer, a known path's other method 405 with `Allow`, an unknown path 404."""
    job_id = submit(call_api).body["job_id"]
    wrong = call_api("DELETE", f"/v1/ops/jobs/{job_id}/replay", key=OPS)
    assert_problem(wrong, 405, "method-not-allowed")
    assert wrong.headers["Allow"] == "POST"
    assert call_api("PUT", f"/v1/ops/jobs/{job_id}", key=OPS).headers["Allow"] == "GET, PATCH"
    assert_problem(call_api("GET", "/v1/ops/nothing-here", key=OPS), 404, "not-found")
