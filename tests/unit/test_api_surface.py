"""The API's surface: media types (415), names (422), one set of limits (413), and the routes without a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handlers import api
from longhaul.core import limits
from longhaul.core.settings import Settings, function_environment
from longhaul.workflows import REQUEST_MODELS
from tests.unit.api_helpers import (
    BODY,
    assert_problem,
    body_with,
    executions,
    job_items,
    submit,
)
from tests.unit.conftest import KEY_A, TABLE_NAME, ApiResponse, CallApi, LambdaContext, rest_event

pytestmark = pytest.mark.usefixtures("api_keys")


def call_without_content_type(settings_env: dict[str, str], path: str, body: str) -> ApiResponse:
    """What `curl --data-binary @file` without `-H Content-Type` (and some HTTP clients) send."""
    event = rest_event("POST", path, body=body, headers={"Authorization": f"Bearer {KEY_A}"})
    for headers in (event["headers"], event["multiValueHeaders"]):
        headers.pop("Content-Type")
    with function_environment(settings_env):
        raw = api.handler(event, LambdaContext())
    headers = dict(raw.get("headers") or {})
    headers.update({k: v[-1] for k, v in (raw.get("multiValueHeaders") or {}).items() if v})
    return ApiResponse(status=raw["statusCode"], headers=headers, raw_body=raw.get("body") or "")


# ---------------------------------------------------------------------- media types


NOT_JSON = ["text/plain", "application/xml", "application/octet-stream", "application/x-www-form-urlencoded"]


@pytest.mark.parametrize("content_type", NOT_JSON)
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/uploads"])
def test_a_body_that_is_not_json_is_415_naming_what_is_accepted(
    call_api: CallApi, nothing_stored: Any, content_type: str, path: str
) -> None:
    response = call_api("POST", path, key=KEY_A, body=json.dumps(BODY), headers={"Content-Type": content_type})

    problem = assert_problem(response, 415, "unsupported-media-type")
    assert problem["accepted"] == ["application/json"]
    assert "application/json" in problem["detail"] and content_type in problem["detail"]
    nothing_stored()


def test_a_non_json_media_type_without_a_body_is_415_too(call_api: CallApi, nothing_stored: Any) -> None:
    response = call_api("POST", "/v1/jobs", key=KEY_A, body="", headers={"Content-Type": "text/plain"})

    assert_problem(response, 415, "unsupported-media-type")
    nothing_stored()


def test_a_replay_body_that_is_not_json_is_415(call_api: CallApi, operator_key: str) -> None:
    body = json.dumps({"from_step": "draft_answer", "reason": "fixed"})

    response = call_api(
        "POST", "/v1/ops/jobs/job_x/replay", key=operator_key, body=body, headers={"Content-Type": "text/xml"}
    )

    assert_problem(response, 415, "unsupported-media-type")


def test_json_with_a_charset_is_accepted(call_api: CallApi) -> None:
    response = call_api(
        "POST",
        "/v1/jobs",
        key=KEY_A,
        body=json.dumps(BODY),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status == 202, response.raw_body


def test_a_json_body_without_a_content_type_is_read_as_json(
    settings_env: dict[str, str], table: Any, sfn: Any, state_machine_arn: str
) -> None:
    response = call_without_content_type(settings_env, "/v1/jobs", json.dumps(BODY))

    assert response.status == 202, response.raw_body
    assert len(job_items(table)) == 1 and len(executions(sfn, state_machine_arn)) == 1


def test_a_malformed_body_without_a_content_type_is_400_never_a_field_error(
    settings_env: dict[str, str], nothing_stored: Any
) -> None:
    response = call_without_content_type(settings_env, "/v1/jobs", "workflow=document-analysis")

    problem = assert_problem(response, 400, "malformed-json")
    assert [e["loc"] for e in problem["errors"]] == [["body"]]  # the body as a whole, not a form's fields
    nothing_stored()


# ---------------------------------------------------------------------- names


UNSAFE_NAMES = {
    "slash": "reports/q3.txt",
    "backslash": "reports\\q3.txt",
    "dot-dot": "..",
    "dot-dot-inside": "a..b.txt",
    "absolute": "/etc/passwd",
    "windows-drive": "C:notes.txt",
    "nul": "a\x00.txt",
    "newline": "a\nb.txt",
    "escape": "a\x1b[31m.txt",
    "delete": "a\x7f.txt",
    "bidi-override": "invoice\u202etxt.exe",
    "line-separator": "a\u2028b.txt",
    "only-dots": "...",
    "only-spaces": "   ",
    "leading-space": " a.txt",
    "too-long": "x" * (limits.MAX_NAME_CHARS + 1),
}


@pytest.mark.parametrize("name", list(UNSAFE_NAMES.values()), ids=list(UNSAFE_NAMES))
def test_an_unsafe_document_name_is_422_naming_the_field(call_api: CallApi, nothing_stored: Any, name: str) -> None:
    body = body_with(documents=[{"name": name, "text": "Termination requires notice."}])

    problem = assert_problem(submit(call_api, body), 422, "invalid-request")

    assert [e["loc"] for e in problem["errors"]] == [["body", "input", "documents", 0, "name"]]
    assert name not in json.dumps(problem["detail"])
    nothing_stored()


@pytest.mark.parametrize("name", list(UNSAFE_NAMES.values()), ids=list(UNSAFE_NAMES))
def test_an_unsafe_upload_filename_is_422_naming_the_field(call_api: CallApi, s3: Any, bucket: str, name: str) -> None:
    response = call_api("POST", "/v1/uploads", key=KEY_A, body={"filename": name, "media_type": "application/pdf"})

    problem = assert_problem(response, 422, "invalid-request")
    assert [e["loc"] for e in problem["errors"]] == [["body", "filename"]]
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


@pytest.mark.parametrize(
    "name", ["Q3 report (final).pdf", "Vertrag_über_Leistungen.md", "契約書.txt", "Board-Minutes_v2.final.txt"]
)
def test_plain_names_are_accepted_and_never_become_storage_keys(
    call_api: CallApi, s3: Any, bucket: str, name: str
) -> None:
    response = submit(call_api, body_with(documents=[{"name": name, "text": "Termination requires notice."}]))

    assert response.status == 202, response.raw_body
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys and not any(name in key or name.split(".")[0] in key for key in keys)
    upload = call_api("POST", "/v1/uploads", key=KEY_A, body={"filename": name, "media_type": "text/plain"})
    assert upload.status == 201 and name not in upload.body["upload_url"]


# ---------------------------------------------------------------------- limits


def test_the_413_detail_is_the_shared_one_and_the_default_limit_is_the_stated_one(
    call_api: CallApi, settings_env: dict[str, str], nothing_stored: Any
) -> None:
    big = body_with(documents=[{"name": "big.txt", "text": "x" * limits.MAX_BODY_BYTES}])

    problem = assert_problem(submit(call_api, big), 413, "payload-too-large")

    assert problem["detail"] == limits.body_too_large(limits.MAX_BODY_BYTES)
    assert Settings.model_validate(settings_env).max_body_bytes == limits.MAX_BODY_BYTES
    nothing_stored()


def test_the_openapi_document_states_every_limit() -> None:
    spec = json.loads(api.openapi_json())
    text = json.dumps(spec)
    for figure in (
        limits.MAX_BODY_BYTES,
        limits.MAX_DOCUMENTS,
        limits.MAX_PASSAGES,
        limits.MAX_UPLOAD_BYTES,
        limits.MAX_ARCHIVE_BYTES,
        limits.MAX_ARCHIVE_EXPANDED_BYTES,
        limits.MIN_DEADLINE_SECONDS,
        limits.MAX_DEADLINE_SECONDS,
    ):
        assert str(figure) in spec["info"]["description"], figure
    schemas = spec["components"]["schemas"]
    documents = schemas["DocumentAnalysisInput"]["properties"]["documents"]["anyOf"][0]  # or `archive`
    assert documents["maxItems"] == limits.MAX_DOCUMENTS
    for request in REQUEST_MODELS:  # every workflow's request states the deadline's bounds
        deadline = schemas[request.__name__]["properties"]["deadline_seconds"]["anyOf"][0]
        assert (deadline["minimum"], deadline["maximum"]) == (limits.MIN_DEADLINE_SECONDS, limits.MAX_DEADLINE_SECONDS)
    assert "415" in spec["paths"]["/v1/jobs"]["post"]["responses"]
    assert str(limits.MAX_UPLOAD_BYTES) in text


# ---------------------------------------------------------------------- without a key


def test_health_answers_version_and_readiness_without_a_key_and_nothing_secret(call_api: CallApi) -> None:
    response = call_api("GET", "/v1/health")

    assert response.status == 200, response.raw_body
    assert response.body == {
        "status": "ok",
        "version": api.API_VERSION,
        "checks": {"configuration": "ok", "table": "ok"},
    }
    assert TABLE_NAME not in response.raw_body and "arn:" not in response.raw_body


def test_health_is_503_when_the_table_does_not_answer(call_api: CallApi, table: Any) -> None:
    table.delete()

    response = call_api("GET", "/v1/health")

    assert response.status == 503
    assert response.body["status"] == "unavailable" and response.body["checks"]["table"] == "failed"
    assert TABLE_NAME not in response.raw_body


def test_the_openapi_document_is_served_without_a_key_naming_this_deployment(call_api: CallApi) -> None:
    response = call_api("GET", "/v1/openapi.json")

    assert response.status == 200 and response.content_type.startswith("application/json")
    spec = response.body
    assert spec["servers"][0]["url"] == "https://api.example.test/prod"
    assert "/v1/jobs" in spec["paths"] and "/v1/ops/jobs/{job_id}" in spec["paths"]
    assert spec["paths"]["/v1/health"]["get"]["security"] == []


def test_swagger_ui_is_served_without_a_key(call_api: CallApi) -> None:
    response = call_api("GET", "/v1/docs")

    assert response.status == 200 and response.content_type.startswith("text/html")
    assert "SwaggerUIBundle" in response.raw_body and "/v1/jobs/{job_id}/events" in response.raw_body


def test_swagger_ui_shows_the_documents_sections_and_order(call_api: CallApi) -> None:
    """Swagger UI orders its sections as the document's `tags`, and a section's operations as the document's paths."""
    shown = json.loads(call_api("GET", "/v1/docs", query={"format": "json"}).raw_body)
    document = json.loads(api.openapi_json())

    assert shown["tags"] == document["tags"]
    assert list(shown["paths"]) == list(document["paths"])
    # the very document the API describes itself with: submitting comes before listing, no key for the health
    # check, and none of Powertools' own 422 shapes (the API answers problems)
    assert {**shown, "servers": None} == {**document, "servers": None}  # (served from its own stage)
    assert list(shown["paths"]["/v1/jobs"]) == ["post", "get"]
    assert shown["paths"]["/v1/health"]["get"]["security"] == []
    assert "HTTPValidationError" not in json.dumps(shown)


def test_other_routes_still_need_a_key(call_api: CallApi) -> None:
    assert_problem(call_api("GET", "/v1/jobs"), 401, "unauthorized")
    assert_problem(call_api("GET", "/v1/healthz"), 401, "unauthorized")


def test_the_limits_page_states_the_same_limits() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operating" / "limits.md").read_text()
    section = page[page.index("## The platform's own") : page.index("## Step Functions")]
    for figure in (
        f"{limits.MAX_BODY_BYTES} bytes",
        f"1–{limits.MAX_DOCUMENTS}",
        f"1–{limits.MAX_NAME_CHARS} characters",
        f"1–{limits.MAX_PASSAGES}",
        f"{limits.MAX_UPLOAD_BYTES} bytes",
        f"{limits.MIN_DEADLINE_SECONDS}–{limits.MAX_DEADLINE_SECONDS}",
        f"{limits.UPLOAD_URL_SECONDS} s",
        f"{limits.MAX_ARCHIVE_BYTES} bytes",
        f"{limits.MAX_ARCHIVE_EXPANDED_BYTES} bytes",
        f"{limits.MAX_ARCHIVE_NAME_CHARS} characters",
        f"{limits.MAX_ARCHIVE_RATIO}:1",
    ):
        assert figure in section, figure
