"""Scenarios: a person reviews a job's draft before it is published, or nobody does and the ladder ends it; signed
webhooks reach a receiver on 127.0.0.1, once per event, and a failing receiver ends in the dead-letter queue while
the job stays as it was. Waits are time-scaled (the interpreter's), never slept here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from local.deploy import wait_until
from local.platform import DEFAULT_WEBHOOK_SECRETS, LocalPlatform
from longhaul.webhooks.signing import verify
from tests.unit.receiver import Receiver, receiver
from tests.workflows.conftest import Client, wait_quiet

# The delivery's retry ladder (about 3 h of capped, jittered gaps) in under a minute; Task timeouts shrink with it, down
# to the runtime's real-time floor (`TASK_TIMEOUT_FLOOR_SECONDS`).
FAST = 0.005


@pytest.fixture
def reviewer(platform: LocalPlatform) -> Client:
    return Client(platform, "alpha-reviewer")


@pytest.fixture
def other_reviewer(platform: LocalPlatform) -> Client:
    return Client(platform, "beta-reviewer")


@pytest.fixture
def allow(platform: LocalPlatform) -> Iterator[Any]:
    """Allow-list local receivers for callbacks (as `LONGHAUL_CALLBACK_ALLOWLIST` does), and restore afterwards."""
    scale = platform.time_scale

    def add(*receivers: Receiver) -> None:
        platform.set_function_environment(LONGHAUL_CALLBACK_ALLOWLIST=",".join(r.origin for r in receivers))

    yield add
    platform.set_function_environment(LONGHAUL_CALLBACK_ALLOWLIST="")
    platform.set_time_scale(scale)


def status_of(client: Client, job_id: str, wanted: str, timeout: float = 120) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        return job if job["status"] == wanted else None

    return wait_until(reached, timeout=timeout, interval=0.2, what=f"job {job_id} to be {wanted}")


def task_tokens(platform: LocalPlatform) -> list[str]:
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    tokens: list[str] = []
    page: dict[str, Any] = {"ExclusiveStartKey": None}
    while "ExclusiveStartKey" in page:  # every page: a scan stops at 1 MB, and the table holds every test's items
        start = {"ExclusiveStartKey": page["ExclusiveStartKey"]} if page["ExclusiveStartKey"] else {}
        answer = table.scan(FilterExpression="sk = :token", ExpressionAttributeValues={":token": "TOKEN"}, **start)
        tokens += [str(i["token"]) for i in answer["Items"] if "token" in i]  # a finished review's is dropped
        page = {"ExclusiveStartKey": answer["LastEvaluatedKey"]} if "LastEvaluatedKey" in answer else {}
    return tokens


def test_a_reviewer_approves_and_the_job_completes(
    platform: LocalPlatform, alpha: Client, reviewer: Client, other_reviewer: Client, sample_request: dict[str, Any]
) -> None:
    job_id = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    waiting = status_of(alpha, job_id, "waiting_for_review")
    review_id = waiting["review"]["review_id"]
    tokens = task_tokens(platform)

    pending = reviewer.get("/v1/reviews", status="pending")
    detail = reviewer.get(f"/v1/reviews/{review_id}")
    as_tenant = alpha.get("/v1/reviews", status="pending")
    as_other = other_reviewer.get(f"/v1/reviews/{review_id}")
    decided = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve", "comment": "looks right"})
    finished = alpha.wait(job_id)
    after = reviewer.get(f"/v1/reviews/{review_id}").json()
    again = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "reject"})

    assert waiting["review"]["assignee_group"] == "analysts" and waiting["review"]["reminders"] == 0
    assert review_id in [r["review_id"] for r in pending.json()["reviews"]]
    assert detail.status_code == 200 and detail.json()["draft"]["answer"] and detail.json()["reasons"]
    assert all(e["document"] and "verified" in e for e in detail.json()["evidence"])
    assert detail.json()["job_status"] == "waiting_for_review" and detail.json()["rung"] == 0
    assert after["status"] == "decided" and after["job_status"] == "completed"  # what a reviewer sees of the job
    assert as_tenant.status_code == 403 and as_other.status_code == 404
    assert decided.status_code == 200 and decided.json()["decision"] == "approve"
    assert finished["status"] == "completed" and alpha.get(f"/v1/jobs/{job_id}/result").status_code == 200
    assert again.status_code == 409
    types = [e["type"] for e in alpha.events(job_id)]
    assert types.index("review_requested") < types.index("review_decided") < types.index("job_completed")
    seen = [r.text for r in (pending, detail, decided, again)] + [
        json.dumps(alpha.events(job_id)),
        json.dumps(finished),
    ]
    assert tokens and not any(t in text for t in tokens for text in seen)


def test_an_unanswered_review_is_reminded_reassigned_and_expires(alpha: Client, sample_request: dict[str, Any]) -> None:
    job_id = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 30}})

    finished = alpha.wait(job_id)

    assert finished["status"] == "expired" and finished["error"]["message"] == "review not answered in time"
    events = alpha.events(job_id)
    types = [e["type"] for e in events]
    assert types.index("review_reminder") < types.index("review_reassigned") < types.index("job_expired")
    reassigned = next(e for e in events if e["type"] == "review_reassigned")
    assert reassigned["detail"]["to"] == "analysis-leads"
    assert finished["review"]["status"] == "expired"
    # never before the deadline it showed (on the local clock, time-scaled as the lane's waits are)
    expired = next(e for e in events if e["type"] == "job_expired")
    assert expired["at"] >= finished["review"]["deadline"], (expired["at"], finished["review"]["deadline"])


def test_cancel_during_a_review_stops_the_wait(alpha: Client, reviewer: Client, sample_request: dict[str, Any]) -> None:
    job_id = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    waiting = status_of(alpha, job_id, "waiting_for_review")
    review_id = waiting["review"]["review_id"]

    cancelled = alpha.post(f"/v1/jobs/{job_id}/cancel")
    late = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"})

    # While it waited, the job said it waits for a review until its deadline, its ETA counted the review's typical
    # wait, and the progress said who it waits for (not "review finished")
    assert waiting["waiting"]["reason"] == "review" and waiting["waiting"]["until"] == waiting["review"]["deadline"]
    assert waiting["progress"]["eta_seconds"] is not None
    assert waiting["progress"]["message"].startswith("review: waiting for a reviewer (analysts)")
    # After the cancel the job and its review agree
    finished = alpha.wait(job_id, timeout=10)
    assert cancelled.status_code == 202 and finished["status"] == "cancelled"
    assert late.status_code == 409 and reviewer.get(f"/v1/reviews/{review_id}").json()["status"] == "cancelled"
    assert finished["review"]["status"] == "cancelled"


def test_a_callback_arrives_once_per_event_signed_with_the_tenants_secret(
    alpha: Client, allow: Any, sample_request: dict[str, Any]
) -> None:
    with receiver() as hook:
        allow(hook)
        job_id = alpha.submit({**sample_request, "callback_url": f"{hook.origin}/longhaul"})
        finished = alpha.wait(job_id)
        delivered = wait_until(
            lambda: ((j := alpha.get(f"/v1/jobs/{job_id}").json())["callback"]["status"] == "delivered" and j) or None,
            timeout=60,
            what="the webhook to be delivered",
        )

    # one webhook per event: its draft's provisional result and its completion
    by_type = {json.loads(r.body)["type"]: r for r in hook.received}
    assert len(hook.received) == 2 and set(by_type) == {"job.provisional", "job.completed"}
    provisional, request = by_type["job.provisional"], by_type["job.completed"]
    assert json.loads(provisional.body)["data"]["as_of_step"] == "draft_answer"
    body = json.loads(request.body)
    assert finished["status"] == "completed"
    assert verify(request.body, request.headers, DEFAULT_WEBHOOK_SECRETS["alpha"]) == request.headers["webhook-id"]
    assert (
        body["type"] == "job.completed" and body["data"]["job_id"] == job_id and "answer" not in request.body.decode()
    )
    assert body["data"]["links"]["result"].endswith(f"/v1/jobs/{job_id}/result")
    assert (
        delivered["callback"]["attempts"] == 1 and delivered["callback"]["webhook_id"] == request.headers["webhook-id"]
    )


def test_a_failing_receiver_gets_retries_then_the_webhook_is_dead_lettered(
    platform: LocalPlatform, alpha: Client, allow: Any, sample_request: dict[str, Any]
) -> None:
    operator = {"Authorization": f"Bearer {platform.key_for('ops')}"}
    with receiver(status=500) as hook:
        allow(hook)
        job_id = alpha.submit({**sample_request, "callback_url": f"{hook.origin}/longhaul"})
        assert alpha.wait(job_id)["status"] == "completed"
        platform.set_time_scale(FAST)
        try:
            dead = wait_until(
                lambda: ((j := alpha.get(f"/v1/jobs/{job_id}").json())["callback"]["status"] == "dead" and j) or None,
                timeout=120,
                what="the webhook to be dead-lettered",
            )
            # The machine marks the webhook dead, then sends its dead letter: still fast, so that a recording whose
            # Task timed out on a busy machine is retried at once, not after a real-time interval.
            letter = _dead_letter_of(platform, dead["callback"]["webhook_id"])
            # Its other webhook (job.provisional, to the same failing receiver) is dead-lettered too, still fast
            wait_quiet(platform, what="the job's other webhook deliveries to end")
        finally:
            platform.set_time_scale(1.0)

    attempts = dead["callback"]["attempts"]  # recorded after each answer: never more than the receiver saw
    completion = [r for r in hook.received if json.loads(r.body)["type"] == "job.completed"]
    assert 2 <= attempts <= len(completion) <= 10
    assert {r.headers["webhook-id"] for r in completion} == {dead["callback"]["webhook_id"]}
    assert dead["status"] == "completed" and dead["callback"]["last_error"] == "HTTP 500"
    listed = requests.get(f"{platform.api_url}/v1/ops/webhooks/dead-letters", headers=operator, timeout=30).json()
    assert dead["callback"]["webhook_id"] in [w["webhook_id"] for w in listed["webhooks"]]
    assert letter["webhook_id"] == dead["callback"]["webhook_id"]


def _dead_letter_of(platform: LocalPlatform, webhook_id: str) -> dict[str, Any]:
    """Poll the webhooks' dead-letter queue for `webhook_id`'s letter. Each receive hides what it returned for a
    while, so successive receives walk past other tests' letters."""
    queue = platform.client("sqs")
    url = next(u for u in queue.list_queues()["QueueUrls"] if "WebhooksDeadLetters" in u)
    seen: dict[str, dict[str, Any]] = {}

    def letter_arrived() -> dict[str, Any] | None:
        for message in queue.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            body = json.loads(message["Body"])
            seen[body["webhook_id"]] = body
        return seen.get(webhook_id)

    letter: dict[str, Any] = wait_until(letter_arrived, timeout=120, what="the dead letter in the webhooks' DLQ")
    return letter


def test_a_redirect_to_an_internal_address_is_not_followed(
    platform: LocalPlatform, alpha: Client, allow: Any, sample_request: dict[str, Any]
) -> None:
    with receiver() as internal, receiver(status=302) as hook:
        hook.location = f"{internal.origin}/latest/meta-data/"
        allow(hook, internal)
        job_id = alpha.submit({**sample_request, "callback_url": f"{hook.origin}/longhaul"})
        alpha.wait(job_id)
        platform.set_time_scale(FAST)
        dead = wait_until(
            lambda: ((j := alpha.get(f"/v1/jobs/{job_id}").json())["callback"]["status"] == "dead" and j) or None,
            timeout=120,
            what="the webhook to give up",
        )

    assert internal.received == [] and len(hook.received) >= dead["callback"]["attempts"] >= 2
    assert "redirects are not followed" in dead["callback"]["last_error"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "https://2130706433/",
        "https://0x7f.1/",
        "https://0177.0.0.1/",
        "https://[::ffff:127.0.0.1]/",
        "https://169.254.169.254/latest/meta-data/",
        "https://100.64.0.1/",
        "https://10.0.0.1/",
        "https://[fe80::1]/",
        "https://224.0.0.1/",
        "https://0.0.0.0/",
        "https://user:pw@hooks.example.com/",
        "file:///etc/passwd",
        "https://localhost/",
    ],
)
def test_a_hostile_callback_url_is_422_at_submit(alpha: Client, sample_request: dict[str, Any], url: str) -> None:
    response = alpha.post("/v1/jobs", {**sample_request, "callback_url": url})

    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "callback_url"]
