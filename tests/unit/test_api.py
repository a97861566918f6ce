"""The REST API through `handlers.api.handler`: auth, validation, problem+json, idempotency, tenancy, uploads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.core.limits import INLINE_TEXTS_IN_INPUT_MAX_BYTES, MAX_DOCUMENTS
from longhaul.documents.intake import DocumentReader, StoredDocument, read_document
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.jobs import JobStore
from longhaul.workflows import REGISTRY
from tests.unit.api_helpers import (
    BODY,
    assert_problem,
    body_with,
    executions,
    job_items,
    object_keys,
    submit,
)
from tests.unit.conftest import KEY_A, KEY_B, TENANT_A, CallApi

pytestmark = pytest.mark.usefixtures("api_keys")


# ---------------------------------------------------------------------- submit


def test_the_inline_texts_of_a_submission_are_one_object_whatever_their_count(
    call_api: CallApi, s3: Any, bucket: str
) -> None:
    """A submission's work before its 202 does not grow with its documents: 5,000 inline texts are one object (one
    PUT, as one is), and each document reads back as its own text."""
    documents = [{"name": f"d{n:04d}.txt", "text": f"Clause {n}: notice is {n} days."} for n in range(MAX_DOCUMENTS)]
    body = {**BODY, "input": {**BODY["input"], "documents": documents}}
    response = submit(call_api, body)

    assert response.status == 202, response.raw_body[:500]
    job_id = response.body["job_id"]
    written = [k for k in (o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) if job_id in k]
    assert sorted(written) == [f"work/{job_id}/input.json", f"work/{job_id}/source/inline"]
    stored = json.loads(s3.get_object(Bucket=bucket, Key=f"work/{job_id}/input.json")["Body"].read())["documents"]
    store = ArtifactStore(s3, bucket)
    for n in (0, 1, 2_500, MAX_DOCUMENTS - 1):
        assert read_document(store, StoredDocument.model_validate(stored[n])).decode() == documents[n]["text"]


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-bound", "one-byte-over"])
def test_small_inline_texts_travel_inside_the_input_document(
    call_api: CallApi, s3: Any, bucket: str, over: int
) -> None:
    """Inline texts of at most `INLINE_TEXTS_IN_INPUT_MAX_BYTES` in all are written inside the input document (a
    submission writes one object, not two); one byte more and they are an object of their own. Either way each
    document reads back as its own text, multi-byte characters and all."""
    first = "Préavis: 30 jours — ¥1,000 per day; 📄 signed."
    second_bytes = INLINE_TEXTS_IN_INPUT_MAX_BYTES - len(first.encode()) + over
    documents = [{"name": "a.txt", "text": first}, {"name": "b.txt", "text": "x" * second_bytes}]
    response = submit(call_api, {**BODY, "input": {**BODY["input"], "documents": documents}})

    assert response.status == 202, response.raw_body[:500]
    job_id = response.body["job_id"]
    written = sorted(k for k in (o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) if job_id in k)
    stored = json.loads(s3.get_object(Bucket=bucket, Key=f"work/{job_id}/input.json")["Body"].read())
    if over:
        assert written == [f"work/{job_id}/input.json", f"work/{job_id}/source/inline"]
        assert "inline_texts" not in stored
    else:
        assert written == [f"work/{job_id}/input.json"]
        assert {d["key"] for d in stored["documents"]} == {f"work/{job_id}/input.json"}
        assert all(d["span"]["embedded"] for d in stored["documents"])
    store = ArtifactStore(s3, bucket)
    texts = [read_document(store, StoredDocument.model_validate(d)).decode() for d in stored["documents"]]
    assert texts == [d["text"] for d in documents]
    # a step reading several of them (a `DocumentReader`) reads the input document once
    reads: list[str] = []
    s3.meta.events.register("provide-client-params.s3.GetObject", lambda params, **_: reads.append(params["Key"]))
    reader = DocumentReader(store)
    assert [reader.read(StoredDocument.model_validate(d)).decode() for d in stored["documents"]] == texts
    assert len(reads) == (2 if over else 1)


def test_submit_accepts_the_job_and_starts_an_execution_named_after_it(
    call_api: CallApi, table: Any, s3: Any, bucket: str, sfn: Any, state_machine_arn: str
) -> None:
    # When a tenant submits a valid job
    response = submit(call_api)

    # Then 202 with the job's links, a Location header, and the job is queued
    assert response.status == 202, response.raw_body
    body = response.body
    job_id = body["job_id"]
    base = f"https://api.example.test/prod/v1/jobs/{job_id}"
    assert body == {
        "job_id": job_id,
        "status": "queued",
        "status_url": base,
        "events_url": f"{base}/events",
        "result_url": f"{base}/result",
        "estimated_sla_seconds": body["estimated_sla_seconds"],
        "estimated_start_seconds": 0,  # it started at once
    }
    assert isinstance(body["estimated_sla_seconds"], int) and body["estimated_sla_seconds"] > 0
    assert response.header("Location") == base
    correlation_id = response.header("X-Request-Id")
    assert correlation_id and len(correlation_id) == 32  # none was given: a new one, a valid trace id

    # and one execution was started whose name is the job id, with references (not text) as input (and the job's
    # correlation id) and no step outputs yet
    [execution] = executions(sfn, state_machine_arn)
    assert execution["name"] == job_id
    started = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert started == {
        "job_id": job_id,
        "tenant_id": TENANT_A,
        "workflow": "document-analysis",
        "input_key": f"work/{job_id}/input.json",
        "correlation_id": correlation_id,
        "steps": {},
        "saga": None,  # set only in a compensation lane's execution
        "review_mode": None,  # as asked for (none: the workflow's default), which the review's Choice reads
        "model_lane": "on_demand",  # a `standard` job's model fan-outs skip the batch lane (its Choice reads it)
    }

    # and the job, its input document and the inline texts are stored
    [job] = job_items(table)
    assert (job["job_id"], job["tenant_id"], job["status"]) == (job_id, TENANT_A, "queued")
    stored_input = json.loads(s3.get_object(Bucket=bucket, Key=f"work/{job_id}/input.json")["Body"].read())
    assert stored_input["question"] == BODY["input"]["question"]
    assert [d["name"] for d in stored_input["documents"]] == ["contract.md", "notes.txt"]
    assert all("text" not in d for d in stored_input["documents"])
    assert [d["media_type"] for d in stored_input["documents"]] == ["text/markdown", "text/plain"]
    # all the inline texts in one object (small: the input document itself), each document its span of it
    assert {d["key"] for d in stored_input["documents"]} == {f"work/{job_id}/input.json"}
    store = ArtifactStore(s3, bucket)
    texts = [read_document(store, StoredDocument.model_validate(d)).decode() for d in stored_input["documents"]]
    assert texts == [d["text"] for d in BODY["input"]["documents"]]


def test_the_submitted_job_is_visible_to_its_tenant(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]

    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A)
    events = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A)

    assert view.status == 200
    assert view.body["job_id"] == job_id
    assert view.body["status"] == "queued"
    assert view.body["progress"]["total"] == len(REGISTRY["document-analysis"].steps)
    assert events.status == 200
    assert [(e["seq"], e["type"], e["status"]) for e in events.body["events"]] == [(1, "job_queued", "queued")]
    assert events.body["next_cursor"] is None


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer not-a-known-key", "Basic " + KEY_A, "Bearer ", KEY_A],
    ids=["missing", "unknown-key", "wrong-scheme", "empty-token", "no-scheme"],
)
def test_submit_without_a_valid_key_is_401_and_stores_nothing(
    call_api: CallApi, nothing_stored: Any, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else None

    response = call_api("POST", "/v1/jobs", body=BODY, headers=headers)

    assert_problem(response, 401, "unauthorized")
    assert response.header("WWW-Authenticate") == 'Bearer realm="longhaul"'
    nothing_stored()


@pytest.mark.parametrize("path", ["/v1/jobs/job_x", "/v1/jobs/job_x/events", "/v1/jobs/job_x/result"])
def test_reads_without_a_key_are_401(call_api: CallApi, path: str) -> None:
    assert_problem(call_api("GET", path), 401, "unauthorized")


@pytest.mark.parametrize("body", ["{not json", json.dumps({"workflow": "nope"})], ids=["malformed", "invalid"])
def test_an_unauthenticated_request_is_401_before_its_body_is_validated(
    call_api: CallApi, body: str, nothing_stored: Any
) -> None:
    """No contract feedback (400/422) leaks to a caller without a valid key."""
    assert_problem(call_api("POST", "/v1/jobs", body=body), 401, "unauthorized")
    assert_problem(call_api("POST", "/v1/jobs", body=body, key="unknown-key"), 401, "unauthorized")
    nothing_stored()


def test_an_unknown_route_without_a_key_is_401(call_api: CallApi) -> None:
    assert_problem(call_api("GET", "/v1/nothing-here"), 401, "unauthorized")


def test_malformed_json_is_400_and_stores_nothing(call_api: CallApi, nothing_stored: Any) -> None:
    response = call_api("POST", "/v1/jobs", key=KEY_A, body='{"workflow": "document-analysis", "input": {')

    problem = assert_problem(response, 400, "malformed-json")
    assert problem["type"].endswith("malformed-json")
    assert problem["instance"] == "/v1/jobs"
    nothing_stored()


def test_an_unknown_workflow_is_422_listing_the_allowed_workflows(call_api: CallApi, nothing_stored: Any) -> None:
    response = submit(call_api, {**BODY, "workflow": "summarize-everything"})

    problem = assert_problem(response, 422, "invalid-request")
    assert problem["allowed_workflows"] == list(REGISTRY)
    assert any(e["loc"][:2] == ["body", "workflow"] for e in problem["errors"])
    nothing_stored()


def test_a_known_but_undeployed_workflow_is_422_listing_the_deployed_ones(
    call_api: CallApi, settings_env: dict[str, str], nothing_stored: Any
) -> None:
    settings_env["LONGHAUL_WORKFLOWS"] = "{}"

    problem = assert_problem(submit(call_api), 422, "invalid-request")

    assert problem["allowed_workflows"] == []
    nothing_stored()


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (body_with(documents=[]), ["body", "input", "documents"]),
        (
            body_with(documents=[{"name": "a.txt", "text": "one"}, {"name": "a.txt", "text": "two"}]),
            ["body", "input"],
        ),
        (
            body_with(documents=[{"name": "a.txt", "text": "one", "upload_id": "up_" + "0" * 32}]),
            ["body", "input", "documents", 0],
        ),
        (body_with(documents=[{"name": "a.txt"}]), ["body", "input", "documents", 0]),
        (body_with(documents=[{"name": "a.txt", "text": "  \n "}]), ["body", "input", "documents", 0]),
        (body_with(question="?"), ["body", "input", "question"]),
        ({**BODY, "extra": True}, ["body", "extra"]),
    ],
    ids=[
        "empty-documents",
        "duplicate-names",
        "text-and-upload",
        "neither-text-nor-upload",
        "blank-text",
        "short-question",
        "extra",
    ],
)
def test_invalid_input_is_422_listing_errors_and_stores_nothing(
    call_api: CallApi, nothing_stored: Any, body: dict[str, Any], where: list[Any]
) -> None:
    problem = assert_problem(submit(call_api, body), 422, "invalid-request")

    assert problem["errors"], problem
    assert any(e["loc"][: len(where)] == where for e in problem["errors"]), problem["errors"]
    assert all({"loc", "msg", "type"} <= set(e) for e in problem["errors"])
    nothing_stored()


def test_inline_text_declared_as_pdf_is_422_and_stores_nothing(call_api: CallApi, nothing_stored: Any) -> None:
    body = body_with(documents=[{"name": "a.pdf", "text": "not really a pdf", "media_type": "application/pdf"}])

    problem = assert_problem(submit(call_api, body), 422, "invalid-request")

    assert problem["errors"][0]["loc"] == ["body", "input", "documents", 0, "media_type"]  # the contract says so
    nothing_stored()


def test_an_oversized_body_is_413(call_api: CallApi, nothing_stored: Any) -> None:
    big = body_with(documents=[{"name": "big.txt", "text": "x" * (1_048_576 + 1)}])

    problem = assert_problem(submit(call_api, big), 413, "payload-too-large")

    assert "1048576" in problem["detail"]
    nothing_stored()


def test_the_body_limit_comes_from_the_settings(
    call_api: CallApi, settings_env: dict[str, str], nothing_stored: Any
) -> None:
    settings_env["LONGHAUL_MAX_BODY_BYTES"] = "100"

    assert_problem(submit(call_api), 413, "payload-too-large")
    nothing_stored()


# ---------------------------------------------------------------------- idempotency


def test_same_idempotency_key_and_equivalent_body_returns_the_same_job_and_one_execution(
    call_api: CallApi, table: Any, sfn: Any, state_machine_arn: str
) -> None:
    # Given a job submitted with an Idempotency-Key
    first = submit(call_api, **{"Idempotency-Key": "order-42"})
    # When the same payload is sent again, with different key order and whitespace
    reordered = {"input": {"documents": BODY["input"]["documents"], "question": BODY["input"]["question"]}}
    reordered["workflow"] = BODY["workflow"]
    second = call_api(
        "POST", "/v1/jobs", key=KEY_A, body=json.dumps(reordered, indent=4), headers={"Idempotency-Key": "order-42"}
    )

    # Then both get the same job, and only one job and one execution exist
    assert first.status == 202 and second.status == 202, second.raw_body
    assert second.body["job_id"] == first.body["job_id"]
    assert second.header("Location") == first.header("Location")
    assert len(job_items(table)) == 1
    assert [e["name"] for e in executions(sfn, state_machine_arn)] == [first.body["job_id"]]


def test_same_idempotency_key_with_a_different_body_is_422(call_api: CallApi, table: Any) -> None:
    first = submit(call_api, **{"Idempotency-Key": "order-42"})

    response = submit(call_api, body_with(question="Something else entirely?"), **{"Idempotency-Key": "order-42"})

    problem = assert_problem(response, 422, "idempotency-key-reused")
    assert problem["job_id"] == first.body["job_id"]
    assert len(job_items(table)) == 1


def test_idempotency_keys_are_per_tenant(call_api: CallApi, table: Any) -> None:
    a = submit(call_api, key=KEY_A, **{"Idempotency-Key": "shared"})
    b = submit(call_api, key=KEY_B, **{"Idempotency-Key": "shared"})

    assert a.status == b.status == 202
    assert a.body["job_id"] != b.body["job_id"]
    assert len(job_items(table)) == 2


def test_without_an_idempotency_key_each_submission_is_a_new_job(call_api: CallApi, table: Any) -> None:
    assert submit(call_api).body["job_id"] != submit(call_api).body["job_id"]
    assert len(job_items(table)) == 2


@pytest.mark.parametrize("key", ["has space", "slash/inside", "x" * 129, "ümlaut", ""], ids=str)
def test_a_malformed_idempotency_key_is_422_naming_the_header_and_stores_nothing(
    call_api: CallApi, nothing_stored: Any, key: str
) -> None:
    # The header's pattern is in the OpenAPI document; a key outside it is refused like any invalid parameter.
    response = submit(call_api, **{"Idempotency-Key": key})

    problem = assert_problem(response, 422, "invalid-request")
    assert [e["loc"] for e in problem["errors"]] == [["header", "idempotency-key"]]
    nothing_stored()


def test_the_longest_allowed_idempotency_key_is_accepted(call_api: CallApi) -> None:
    assert submit(call_api, **{"Idempotency-Key": "A-z0.9_:" * 16}).status == 202


# ---------------------------------------------------------------------- tenancy and reads


@pytest.mark.parametrize("suffix", ["", "/events", "/result"], ids=["job", "events", "result"])
def test_another_tenant_cannot_see_a_job(call_api: CallApi, suffix: str) -> None:
    job_id = submit(call_api, key=KEY_A).body["job_id"]

    response = call_api("GET", f"/v1/jobs/{job_id}{suffix}", key=KEY_B)

    problem = assert_problem(response, 404, "not-found")
    assert job_id in problem["detail"]
    assert "tenant" not in response.raw_body


@pytest.mark.parametrize("suffix", ["", "/events", "/result"], ids=["job", "events", "result"])
def test_an_unknown_job_is_404(call_api: CallApi, suffix: str) -> None:
    assert_problem(call_api("GET", f"/v1/jobs/job_doesnotexist{suffix}", key=KEY_A), 404, "not-found")


def test_the_result_before_completion_is_409(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]

    problem = assert_problem(call_api("GET", f"/v1/jobs/{job_id}/result", key=KEY_A), 409, "result-not-ready")

    assert problem["job_status"] == "queued"


def test_the_result_of_a_completed_job_is_returned(call_api: CallApi, table: Any, s3: Any, bucket: str) -> None:
    # Given a job that completed with a published result
    job_id = submit(call_api).body["job_id"]
    result = {
        "job_id": job_id,
        "question": BODY["input"]["question"],
        "answer": "Thirty days notice.",
        "claims": [],
        "citations": [],
        "verification": {
            "citations_checked": 0,
            "citations_verified": 0,
            "citations_dropped": 0,
            "claims_dropped": 0,
        },
        "model": "offline:test",
        "documents": [{"name": "contract.md", "media_type": "text/markdown", "pages": 1}],
    }
    s3.put_object(Bucket=bucket, Key=f"results/{job_id}/result.json", Body=json.dumps(result).encode())
    store = JobStore(table)
    store.transition(job_id, JobStatus.RUNNING, event="job_started")
    store.transition(
        job_id, JobStatus.COMPLETED, event="job_completed", set_fields={"result_key": f"results/{job_id}/result.json"}
    )

    # When its tenant asks for the result
    response = call_api("GET", f"/v1/jobs/{job_id}/result", key=KEY_A)

    # Then it is returned
    assert response.status == 200, response.raw_body
    assert response.body["answer"] == "Thirty days notice."
    assert response.body["job_id"] == job_id


def test_events_are_paged_with_the_returned_cursor(call_api: CallApi, table: Any) -> None:
    job_id = submit(call_api).body["job_id"]
    store = JobStore(table)
    store.transition(job_id, JobStatus.RUNNING, event="job_started")
    store.append_event(job_id, "step_started", step="parse_documents", attempt=1)

    seen: list[int] = []
    query: dict[str, str] = {"limit": "2"}
    for _ in range(4):
        page = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A, query=query)
        assert page.status == 200, page.raw_body
        seen += [e["seq"] for e in page.body["events"]]
        if page.body["next_cursor"] is None:
            break
        query = {"limit": "2", "cursor": page.body["next_cursor"]}

    assert seen == [1, 2, 3]


def test_a_bad_events_cursor_is_400(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]

    response = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A, query={"cursor": "not-a-number"})

    assert_problem(response, 400, "bad-request")


def test_an_unknown_route_is_a_404_problem(call_api: CallApi) -> None:
    problem = assert_problem(call_api("GET", "/v1/nothing-here", key=KEY_A), 404, "not-found")
    assert problem["instance"] == "/v1/nothing-here"


# ---------------------------------------------------------------------- uploads


def upload_ticket(call_api: CallApi, key: str = KEY_A) -> dict[str, Any]:
    response = call_api(
        "POST", "/v1/uploads", key=key, body={"filename": "report.pdf", "media_type": "application/pdf"}
    )
    assert response.status == 201, response.raw_body
    return response.body


def with_upload(upload_id: str) -> dict[str, Any]:
    return body_with(documents=[{"name": "report.pdf", "upload_id": upload_id}])


def test_create_upload_returns_a_presigned_put_for_the_tenants_upload_key(call_api: CallApi) -> None:
    ticket = upload_ticket(call_api)

    assert ticket["upload_id"].startswith("up_")
    assert ticket["method"] == "PUT"
    assert ticket["headers"] == {"Content-Type": "application/pdf"}
    assert ticket["expires_in"] == 900
    assert f"uploads/{TENANT_A}/{ticket['upload_id']}" in ticket["upload_url"]


def test_create_upload_with_an_unsupported_media_type_is_422(call_api: CallApi) -> None:
    response = call_api("POST", "/v1/uploads", key=KEY_A, body={"filename": "x.png", "media_type": "image/png"})
    assert_problem(response, 422, "invalid-request")


def test_a_job_referencing_an_upload_is_422_until_the_object_exists(
    call_api: CallApi, s3: Any, bucket: str, table: Any, sfn: Any, state_machine_arn: str
) -> None:
    # Given an upload ticket whose file was never uploaded
    upload_id = upload_ticket(call_api)["upload_id"]

    # When a job references it, Then it is refused and nothing is stored
    problem = assert_problem(submit(call_api, with_upload(upload_id)), 422, "invalid-request")
    assert problem["errors"][0]["loc"] == ["input", "documents", 0, "upload_id"]
    assert job_items(table) == []
    assert object_keys(s3, bucket) == []

    # When the file is then uploaded to the tenant's upload key
    key = f"uploads/{TENANT_A}/{upload_id}"
    s3.put_object(Bucket=bucket, Key=key, Body=b"%PDF-1.4 minimal", ContentType="application/pdf")

    # Then the job is accepted and its input points at the upload
    accepted = submit(call_api, with_upload(upload_id))
    assert accepted.status == 202, accepted.raw_body
    job_id = accepted.body["job_id"]
    stored_input = json.loads(s3.get_object(Bucket=bucket, Key=f"work/{job_id}/input.json")["Body"].read())
    assert stored_input["documents"] == [
        {"index": 0, "name": "report.pdf", "media_type": "application/pdf", "key": key}
    ]
    assert [e["name"] for e in executions(sfn, state_machine_arn)] == [job_id]


def test_another_tenants_upload_cannot_be_referenced(call_api: CallApi, s3: Any, bucket: str, table: Any) -> None:
    upload_id = upload_ticket(call_api, key=KEY_A)["upload_id"]
    s3.put_object(Bucket=bucket, Key=f"uploads/{TENANT_A}/{upload_id}", Body=b"%PDF-1.4", ContentType="application/pdf")

    assert_problem(submit(call_api, with_upload(upload_id), key=KEY_B), 422, "invalid-request")
    assert job_items(table) == []


def test_an_upload_of_an_unsupported_type_is_422(call_api: CallApi, s3: Any, bucket: str, table: Any) -> None:
    upload_id = upload_ticket(call_api)["upload_id"]
    s3.put_object(Bucket=bucket, Key=f"uploads/{TENANT_A}/{upload_id}", Body=b"\x89PNG", ContentType="image/png")

    problem = assert_problem(submit(call_api, with_upload(upload_id)), 422, "invalid-request")

    assert problem["errors"][0]["loc"] == ["input", "documents", 0, "media_type"]
    assert job_items(table) == []


def test_a_tenant_key_on_an_operator_route_is_403_before_any_validation(call_api: CallApi) -> None:
    response = call_api("POST", "/v1/ops/jobs/job_x/replay", key=KEY_A, body="{not json")
    assert_problem(response, 403, "forbidden")


def test_an_unforeseen_error_is_a_500_problem(call_api: CallApi, monkeypatch: Any) -> None:
    from longhaul.api.jobs import JobService

    def explode(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(JobService, "list", explode)
    response = call_api("GET", "/v1/jobs", key=KEY_A)
    problem = assert_problem(response, 500, "internal")
    assert "boom" not in json.dumps(problem)
