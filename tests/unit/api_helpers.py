"""What the API tests share: a valid request, problem assertions, and what a rejected request must not leave."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from boto3.dynamodb.conditions import Attr

from tests.unit.conftest import KEY_A, ApiResponse, CallApi

PROBLEM_JSON = "application/problem+json"
PROBLEM_BASE = "https://longhaul.dev/problems/"

BODY: dict[str, Any] = {
    "workflow": "document-analysis",
    "input": {
        "question": "What does the contract say about termination?",
        "documents": [
            {"name": "contract.md", "text": "# Contract\nEither party may terminate with 30 days notice."},
            {"name": "notes.txt", "text": "Termination requires written notice."},
        ],
    },
}


def body_with(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["input"].update(changes)
    return body


def job_items(table: Any) -> list[dict[str, Any]]:
    return table.scan(FilterExpression=Attr("sk").eq("JOB"), ConsistentRead=True)["Items"]


def object_keys(s3: Any, bucket: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def executions(sfn: Any, arn: str) -> list[dict[str, Any]]:
    return sfn.list_executions(stateMachineArn=arn)["executions"]


def assert_problem(response: ApiResponse, status: int, slug: str) -> dict[str, Any]:
    assert response.status == status, response.raw_body
    assert response.content_type.startswith(PROBLEM_JSON)
    problem = response.body
    assert problem["type"] == PROBLEM_BASE + slug
    assert problem["status"] == status
    assert problem["title"]
    return problem


def stored_nothing(table: Any, s3: Any, bucket: str, sfn: Any, state_machine_arn: str) -> Callable[[], None]:
    """A check that no job, no artifact and no execution exist (the `nothing_stored` fixture)."""

    def check() -> None:
        assert job_items(table) == []
        assert object_keys(s3, bucket) == []
        assert executions(sfn, state_machine_arn) == []

    return check


def submit(call_api: CallApi, body: Any = None, *, key: str = KEY_A, **headers: str) -> ApiResponse:
    return call_api("POST", "/v1/jobs", key=key, body=BODY if body is None else body, headers=headers or None)
