"""The API surface through the real front door: one 413 at every layer, 415 for bodies that are not JSON,
and the routes that need no key."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from local.frontdoor import MAX_BODY_BYTES
from local.platform import LocalPlatform
from longhaul.core import limits
from tests.workflows.conftest import Client

TOO_LARGE = "payload-too-large"


def stored_jobs(platform: LocalPlatform) -> int:
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    return sum(1 for item in table.scan(ConsistentRead=True)["Items"] if item["sk"] == "JOB")


def job_with_text(size: int) -> dict[str, Any]:
    return {
        "workflow": "document-analysis",
        "input": {"question": "What is in it?", "documents": [{"name": "big.txt", "text": "x" * size}]},
    }


@pytest.mark.parametrize(
    "size", [limits.MAX_BODY_BYTES + 1, MAX_BODY_BYTES + 1], ids=["over-the-platform-limit", "over-api-gateway"]
)
def test_an_oversized_body_gets_the_same_413_from_every_layer(platform: LocalPlatform, alpha: Client, size: int):
    before = stored_jobs(platform)

    response = alpha.post("/v1/jobs", data=json.dumps(job_with_text(size)))

    assert response.status_code == 413
    assert response.headers["Content-Type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["type"] == f"https://longhaul.dev/problems/{TOO_LARGE}"
    assert problem["title"] == "The request body is too large"
    assert problem["detail"] == limits.body_too_large(limits.MAX_BODY_BYTES)
    assert stored_jobs(platform) == before


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "application/octet-stream", "application/x-www-form-urlencoded"]
)
def test_a_body_that_is_not_json_is_415_through_the_front_door(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any], content_type: str
):
    before = stored_jobs(platform)

    response = alpha.post("/v1/jobs", sample_request, **{"Content-Type": content_type})

    assert response.status_code == 415, response.text
    assert response.json()["type"].endswith("/unsupported-media-type")
    assert response.json()["accepted"] == ["application/json"]
    assert stored_jobs(platform) == before


def test_health_openapi_and_docs_need_no_key(platform: LocalPlatform):
    health = requests.get(f"{platform.api_url}/v1/health", timeout=30)
    spec = requests.get(f"{platform.api_url}/v1/openapi.json", timeout=30)
    docs = requests.get(f"{platform.api_url}/v1/docs", timeout=30)

    assert health.status_code == 200 and health.json()["status"] == "ok", health.text
    assert spec.status_code == 200 and spec.json()["servers"][0]["url"] == platform.api_url
    assert docs.status_code == 200 and "SwaggerUIBundle" in docs.text
