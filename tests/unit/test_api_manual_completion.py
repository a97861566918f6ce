"""The manual completion's routes through `handlers.api.handler`: who may hand a job to a person and when, one review
per failed attempt, and a review of kind `complete` takes only a `complete` decision, whose refused result leaves the
review open and the job failed."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.core.auth import api_key_item
from longhaul.core.contracts import JobStatus
from longhaul.storage.jobs import JobStore
from tests.unit.api_helpers import assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, KEY_OPS, CallApi

pytestmark = pytest.mark.usefixtures("api_keys", "operator_key")
REVIEWER, OTHER_REVIEWER = "key-reviewer-a-0123456789", "key-reviewer-b-0123456789"
ASK = {"assignee_group": "analysts", "note": "the last step failed; write the answer"}


@pytest.fixture
def reviewers(table: Any) -> None:
    table.put_item(Item=api_key_item(REVIEWER, "tenant-a", role="reviewer"))
    table.put_item(Item=api_key_item(OTHER_REVIEWER, "tenant-b", role="reviewer"))


def _failed(call_api: CallApi, table: Any) -> str:
    job_id: str = submit(call_api, key=KEY_A).body["job_id"]
    JobStore(table).transition(job_id, JobStatus.FAILED, event="job_failed")
    return job_id


def test_only_an_operator_hands_only_a_failed_job_to_a_person(call_api: CallApi, table: Any) -> None:
    queued = submit(call_api, key=KEY_B).body["job_id"]
    path = f"/v1/ops/jobs/{queued}/manual-completion"

    assert_problem(call_api("POST", path, key=KEY_B, body=ASK), 403, "forbidden")
    assert_problem(call_api("POST", path, key=KEY_OPS, body=ASK), 409, "job-status-conflict")
    assert_problem(call_api("POST", "/v1/ops/jobs/job_x/manual-completion", key=KEY_OPS, body=ASK), 404, "not-found")
    missing = call_api("POST", path, key=KEY_OPS, body={"assignee_group": "analysts"})
    assert assert_problem(missing, 422, "invalid-request")["errors"][0]["loc"] == ["body", "note"]


@pytest.mark.usefixtures("reviewers")
def test_a_complete_review_is_opened_once_and_decided_only_by_a_result_that_passes(
    call_api: CallApi, table: Any
) -> None:
    job_id = _failed(call_api, table)
    path = f"/v1/ops/jobs/{job_id}/manual-completion"

    opened, again = call_api("POST", path, key=KEY_OPS, body=ASK), call_api("POST", path, key=KEY_OPS, body=ASK)

    assert opened.status == 201 and again.status == 200, opened.raw_body
    review_id = opened.body["review_id"]
    assert again.body["review_id"] == review_id and opened.header("Location") == f"/v1/reviews/{review_id}"
    review = call_api("GET", f"/v1/reviews/{review_id}", key=REVIEWER).body
    assert review["kind"] == "complete" and review["note"] == ASK["note"] and review["job_status"] == "failed"
    assert_problem(call_api("GET", f"/v1/reviews/{review_id}", key=OTHER_REVIEWER), 404, "not-found")
    decide = f"/v1/reviews/{review_id}/decision"
    assert_problem(call_api("POST", decide, key=REVIEWER, body={"decision": "approve"}), 422, "invalid-request")
    answer = {"answer": "a", "claims": [{"text": "t", "citations": [{"chunk_id": "d0-p1-c0", "quote": "q"}]}]}
    refused = call_api("POST", decide, key=REVIEWER, body={"decision": "complete", "result": answer})
    # (this job never ran: nothing of its documents was indexed to verify a citation against)
    assert assert_problem(refused, 422, "invalid-request")["errors"][0]["loc"] == ["body", "result", "claims"]
    assert call_api("GET", f"/v1/reviews/{review_id}", key=REVIEWER).body["status"] == "pending"
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["status"] == "failed"
    events = [e["type"] for e in call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"]]
    assert events.count("manual_completion_requested") == 1


@pytest.mark.usefixtures("reviewers")
def test_the_decision_complete_is_only_for_a_complete_review(call_api: CallApi) -> None:
    wrong = call_api(
        "POST", "/v1/reviews/rev_000000000000000000000000/decision", key=REVIEWER,
        body={"decision": "approve", "result": {"answer": "a"}},
    )  # fmt: skip

    assert_problem(wrong, 422, "invalid-request")
