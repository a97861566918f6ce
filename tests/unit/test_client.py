"""The Python client (`longhaul_client`) against a scripted API (httpx's MockTransport, no network): what it retries
and what it never sends twice, problems as typed exceptions with their RFC 9457 fields, pages as iterators, following
a job through the long-poll to its end, uploads to a presigned URL without the API key, results typed by workflow."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from longhaul.core.contracts import JobResult, JobStatus
from longhaul_client import (
    Conflict,
    InvalidRequest,
    LonghaulClient,
    RetryPolicy,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
)

URL = "http://api.test"
KEY = "lh_test_key"
JOB = "job_" + "0" * 28
AT = "2025-01-02T03:04:05.000Z"
PROBLEM = "application/problem+json"
Handler = Callable[[httpx.Request], httpx.Response]


class Script:
    """The API's answers, one per request in order; records every request."""

    def __init__(self, *answers: httpx.Response | Exception | Handler) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer


def client(script: Script, sleeps: list[float] | None = None) -> LonghaulClient:
    record = sleeps if sleeps is not None else []
    return LonghaulClient(URL, KEY, transport=httpx.MockTransport(script), retry=RetryPolicy(sleep=record.append))


def problem(status: int, slug: str, detail: str, **extra: Any) -> httpx.Response:
    body = {"type": f"https://longhaul.dev/problems/{slug}", "title": slug.replace("-", " "), "status": status}
    return httpx.Response(status, json={**body, "detail": detail, **extra}, headers={"Content-Type": PROBLEM})


def job_view(status: str = "running", **fields: Any) -> dict[str, Any]:
    return {
        "job_id": JOB,
        "tenant_id": "alpha",
        "workflow": "document-analysis",
        "status": status,
        "progress": {"completed": 1, "total": 12},
        "model": "offline:test",
        "created_at": AT,
        "updated_at": AT,
        **fields,
    }


def event(seq: int, kind: str = "step_started", status: str | None = None) -> dict[str, Any]:
    return {"seq": seq, "type": kind, "at": AT, "status": status}


def accepted(request: httpx.Request) -> httpx.Response:
    url = f"{URL}/v1/jobs/{JOB}"
    body = {"job_id": JOB, "status": "queued", "status_url": url, "events_url": url, "result_url": url}
    return httpx.Response(202, json={**body, "estimated_sla_seconds": 40})


REQUEST = {"workflow": "document-analysis", "input": {"question": "Why?", "documents": [{"name": "a", "text": "b"}]}}


# ---------------------------------------------------------------------- retries


def test_a_submission_always_carries_an_idempotency_key_and_keeps_it_on_a_retry() -> None:
    script = Script(problem(503, "unavailable", "the engine did not answer"), httpx.ReadTimeout("lost"), accepted)
    sleeps: list[float] = []

    job = client(script, sleeps).submit(REQUEST)

    keys = [r.headers.get("Idempotency-Key") for r in script.requests]
    assert job.job_id == JOB and len(keys) == 3
    assert keys[0] and len(set(keys)) == 1, "one made-up key, the same on every attempt: the API answers one job"
    assert [r.headers["Authorization"] for r in script.requests] == [f"Bearer {KEY}"] * 3
    assert json.loads(script.requests[0].content) == REQUEST
    assert len(sleeps) == 2


def test_the_callers_idempotency_key_is_the_one_sent() -> None:
    script = Script(accepted)

    client(script).submit(REQUEST, idempotency_key="order-17")

    assert script.requests[0].headers["Idempotency-Key"] == "order-17"


def test_a_review_decision_is_never_sent_twice() -> None:
    """A decision whose answer was lost may have been taken: a second one would be a 409, so it is not retried."""
    for failure in (problem(503, "unavailable", "busy"), httpx.ReadTimeout("lost")):
        script = Script(failure)
        with pytest.raises((ServerError, Unreachable)):
            client(script).decide("rev_1", {"decision": "approve"})
        assert len(script.requests) == 1


def test_a_request_that_never_reached_the_api_is_sent_again_whatever_it_is() -> None:
    decided = httpx.Response(200, json={"review_id": "rev_1", "job_id": JOB, "decision": "approve"})
    script = Script(httpx.ConnectError("refused"), decided)

    outcome = client(script).decide("rev_1", {"decision": "approve"})

    assert outcome.decision == "approve" and len(script.requests) == 2


def test_retry_after_is_honoured_and_a_long_one_is_raised_as_the_problem() -> None:
    limited = problem(429, "rate-limited", "600 a minute", retry_after_seconds=3)
    limited.headers["Retry-After"] = "3"
    sleeps: list[float] = []
    script = Script(limited, accepted)

    client(script, sleeps).submit(REQUEST)

    assert sleeps == [3.0]
    renews = problem(429, "daily-allowance-exhausted", "spent", retry_after_seconds=7200, renews_at=AT)
    with pytest.raises(TooManyRequests) as raised:
        client(Script(renews)).submit(REQUEST)
    assert raised.value.extra == {"retry_after_seconds": 7200, "renews_at": AT}


def test_an_unreachable_api_is_tried_a_few_times_then_reported() -> None:
    script = Script(*[httpx.ConnectError("[Errno 111] Connection refused")] * 4)
    sleeps: list[float] = []

    with pytest.raises(Unreachable, match="Connection refused"):
        client(script, sleeps).job(JOB)

    assert len(script.requests) == RetryPolicy().attempts and len(sleeps) == RetryPolicy().attempts - 1
    assert all(0 <= s <= RetryPolicy().cap for s in sleeps)


# ---------------------------------------------------------------------- problems


def test_a_problem_is_a_typed_exception_with_its_rfc_9457_fields() -> None:
    errors = [{"loc": ["body", "input", "question"], "msg": "too short", "type": "string_too_short"}]
    script = Script(problem(422, "invalid-request", "see `errors`", errors=errors, instance="/v1/jobs"))

    with pytest.raises(InvalidRequest) as raised:
        client(script).submit(REQUEST)

    found = raised.value
    assert (found.status, found.slug, found.detail, found.instance) == (
        422,
        "invalid-request",
        "see `errors`",
        "/v1/jobs",
    )
    assert found.errors == errors and len(script.requests) == 1, "a 422 is an answer: never retried"
    assert found.document()["type"] == "https://longhaul.dev/problems/invalid-request"


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (problem(401, "unauthorized", "A valid API key is required"), Unauthorized),
        (problem(409, "result-not-ready", "job is running", job_status="running"), Conflict),
        (httpx.Response(504, json={"message": "Endpoint request timed out"}), ServerError),
    ],
)
def test_every_error_answer_is_a_problem_even_from_in_front_of_the_api(answer: httpx.Response, kind: type) -> None:
    with pytest.raises(kind) as raised:
        client(Script(answer, answer, answer, answer)).result(JOB)

    assert raised.value.title and raised.value.status == answer.status_code
    if answer.status_code == 504:
        assert raised.value.detail == "Endpoint request timed out"


# ---------------------------------------------------------------------- pages and following a job


def test_a_listing_is_an_iterator_that_fetches_pages_as_it_goes() -> None:
    pages = [
        httpx.Response(200, json={"jobs": [job_view(), job_view()], "next_cursor": "c1"}),
        httpx.Response(200, json={"jobs": [job_view()], "next_cursor": "c2"}),
    ]
    script = Script(*pages)

    found = list(client(script).jobs(status=JobStatus.FAILED, limit=3))

    assert len(found) == 3 and len(script.requests) == 2, "no page after the limit"
    assert [r.url.params.get("cursor") for r in script.requests] == [None, "c1"]
    assert [r.url.params["status"] for r in script.requests] == ["failed", "failed"]


def test_following_a_job_long_polls_its_events_until_it_has_ended() -> None:
    script = Script(
        httpx.Response(200, json={"events": [event(1, "job_queued", "queued"), event(2)]}),
        httpx.Response(200, json=job_view("running")),
        httpx.Response(200, json={"events": []}),  # the wait ran out: nothing new
        httpx.Response(200, json=job_view("running")),
        httpx.Response(200, json={"events": [event(3, "step_finished")]}),
        httpx.Response(200, json=job_view("completed", finished_at=AT)),
        httpx.Response(200, json={"events": [event(4, "job_completed", "completed")]}),  # written meanwhile
    )
    seen: list[int] = []

    job = client(script).wait(JOB, on_event=lambda e: seen.append(e.seq))

    assert job.status == JobStatus.COMPLETED and seen == [1, 2, 3, 4]
    polls = [r for r in script.requests if r.url.path.endswith("/events")]
    assert [p.url.params.get("wait") for p in polls] == ["20", "20", "20", None]
    assert [p.url.params.get("cursor") for p in polls] == [None, "2", "2", "3"]


def test_events_without_follow_are_those_there_now() -> None:
    script = Script(
        httpx.Response(200, json={"events": [event(1), event(2)], "next_cursor": "2"}),
        httpx.Response(200, json={"events": [event(3)]}),
    )

    assert [e.seq for e in client(script).events(JOB, follow=False)] == [1, 2, 3]
    assert all("wait" not in r.url.params for r in script.requests)


# ---------------------------------------------------------------------- uploads and results


def test_an_upload_puts_the_file_to_its_presigned_url_without_the_api_key(tmp_path: Path) -> None:
    document = tmp_path / "msa.pdf"
    document.write_bytes(b"%PDF-1.4 test")
    ticket = {
        "upload_id": "up_" + "1" * 32,
        "upload_url": "http://storage.test/bucket/key?X-Amz-Signature=s",
        "headers": {"Content-Type": "application/pdf"},
        "expires_in": 900,
    }
    script = Script(httpx.Response(201, json=ticket), httpx.Response(503), httpx.Response(200))

    found = client(script).upload(document)

    create, *puts = script.requests
    assert found.upload_id == ticket["upload_id"]
    assert json.loads(create.content) == {"filename": "msa.pdf", "media_type": "application/pdf"}
    assert [str(p.url) for p in puts] == [ticket["upload_url"]] * 2, "a PUT is idempotent: retried"
    assert all(p.content == b"%PDF-1.4 test" and "Authorization" not in p.headers for p in puts)
    with pytest.raises(ValueError, match="extension"):
        client(Script()).upload(tmp_path / "notes.docx")


def test_a_result_is_the_workflows_result_model_with_its_budget() -> None:
    verification = {"citations_checked": 1, "citations_verified": 1, "citations_dropped": 0, "claims_dropped": 0}
    body = {
        "job_id": JOB,
        "question": "Why?",
        "answer": "Because.",
        "claims": [],
        "citations": [],
        "verification": verification,
        "model": "offline:test",
        "documents": [],
        "budget": {
            "max_tokens": 10,
            "max_cost_usd": "1",
            "held_tokens": 1,
            "held_cost_usd": "0",
            "remaining_tokens": 9,
            "remaining_cost_usd": "1",
        },
    }

    found = client(Script(httpx.Response(200, json=body))).result(JOB)

    assert isinstance(found.result, JobResult) and found.result.answer == "Because."
    assert found.budget is not None and found.budget.remaining_tokens == 9


# ---------------------------------------------------------------------- steering


def test_an_update_is_a_patch_of_the_fields_given_sent_again_when_lost() -> None:
    updated = job_view(instructions="Be brief.", deadline_at=AT)
    script = Script(httpx.ReadTimeout("lost"), httpx.Response(200, json=updated))

    job = client(script).update(JOB, {"instructions": "Be brief.", "deadline_seconds": 600})

    assert [(r.method, r.url.path) for r in script.requests] == [("PATCH", f"/v1/jobs/{JOB}")] * 2
    assert json.loads(script.requests[-1].content) == {"instructions": "Be brief.", "deadline_seconds": 600}
    assert job.instructions == "Be brief."


def test_an_operators_update_goes_to_the_operators_route_and_a_refusal_is_typed() -> None:
    errors = [{"loc": ["body", "budget", "max_tokens"], "msg": "exceeds the tenant's ceiling"}]
    script = Script(problem(422, "invalid-request", "see errors", errors=errors))

    with pytest.raises(InvalidRequest) as refused:
        client(script).update(JOB, {"budget": {"max_tokens": 10**9}}, operator=True)

    assert script.requests[0].url.path == f"/v1/ops/jobs/{JOB}"
    assert refused.value.errors is not None and refused.value.errors[0]["loc"] == ["body", "budget", "max_tokens"]


def test_a_submission_may_name_the_job_it_supersedes() -> None:
    script = Script(accepted)

    client(script).submit(REQUEST, supersedes=JOB)

    assert json.loads(script.requests[0].content) == {**REQUEST, "supersedes": JOB}
