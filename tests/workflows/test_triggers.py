"""Jobs that start themselves, on the local platform: a schedule fires on the time-scaled clock (and a fire delivered
twice in the same minute starts one job), an object dropped in an S3 trigger's inbox starts one job (a batch window
one job for several), an event matching an EventBridge trigger's pattern starts one, and a bad pattern or template is
refused at creation with the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from local.deploy import wait_until
from local.platform import LocalPlatform
from tests.workflows.conftest import Client

QUESTION = "What does this document say about termination and notice periods?"
FAST = 0.02  # a minute of a schedule's clock in 1.2 s


@pytest.fixture
def fast(platform: LocalPlatform):
    before = platform.time_scale
    platform.set_time_scale(FAST)
    yield
    platform.set_time_scale(before)


def _jobs_of(client: Client, trigger_id: str) -> list[dict[str, Any]]:
    jobs = client.get("/v1/jobs", limit=100).json()["jobs"]
    return [j for j in jobs if (j.get("trigger") or {}).get("id") == trigger_id]


def _fire(platform: LocalPlatform, schedule: dict[str, Any], tenant: str, scheduled_time: str) -> dict[str, Any]:
    """Deliver a fire as EventBridge Scheduler does: invoke the API function with the schedule's target input."""
    function = platform.deployment.functions[
        next(lid for lid in platform.deployment.functions if lid.startswith("ApiHandler"))
    ]
    payload = {
        "longhaul_trigger": "schedule",
        "tenant_id": tenant,
        "schedule_id": schedule["schedule_id"],
        "scheduled_time": scheduled_time,
    }
    response = platform.client("lambda", read_timeout=120).invoke(FunctionName=function, Payload=json.dumps(payload))
    assert "FunctionError" not in response, response["Payload"].read()
    return dict(json.loads(response["Payload"].read()))


def test_a_schedule_fires_on_the_scaled_clock_and_a_duplicate_fire_starts_one_job(platform, alpha, fast):
    # Given a schedule every minute (a minute is 1.2 s here)
    document = {"name": "a.txt", "text": "Either party may terminate."}
    body = {"workflow": "document-analysis", "schedule": "rate(1 minute)", "timezone": "Europe/Paris",
            "input": {"question": QUESTION, "documents": [document]}}  # fmt: skip
    created = alpha.post("/v1/schedules", body)
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["enabled"] and schedule["next_run_at"] and schedule["sla_class"] == "batch"
    assert alpha.get(f"/v1/schedules/{schedule['schedule_id']}").json()["schedule"] == "rate(1 minute)"

    # When it fires, a job is queued naming it
    def started() -> list[dict[str, Any]] | None:
        return _jobs_of(alpha, schedule["schedule_id"]) or None

    jobs = wait_until(started, timeout=30, interval=0.2, what="the schedule's first job")
    trigger = jobs[0]["trigger"]
    assert trigger["type"] == "schedule" and trigger["scheduled_at"].endswith(":00Z")

    # Then pausing it stops its fires
    paused = requests.patch(
        f"{alpha.base}/v1/schedules/{schedule['schedule_id']}",
        json={"enabled": False},
        headers=alpha.headers,
        timeout=30,
    )
    assert paused.status_code == 200 and paused.json()["next_run_at"] is None

    # And a fire delivered twice in the same minute (at second 5 and 41) starts one job
    first = _fire(platform, schedule, "alpha", "2031-01-01T02:00:05Z")
    assert first["job_id"] is None  # a paused schedule's fire starts nothing
    alpha_resumed = requests.patch(
        f"{alpha.base}/v1/schedules/{schedule['schedule_id']}",
        json={"enabled": True, "schedule": "rate(1 day)"},
        headers=alpha.headers,
        timeout=30,
    )
    assert alpha_resumed.status_code == 200, alpha_resumed.text
    one = _fire(platform, schedule, "alpha", "2031-01-01T02:00:05Z")["job_id"]
    two = _fire(platform, schedule, "alpha", "2031-01-01T02:00:41Z")["job_id"]
    three = _fire(platform, schedule, "alpha", "2031-01-01T02:01:00Z")["job_id"]
    assert one and one == two and three not in (None, one)
    view = alpha.get(f"/v1/jobs/{one}").json()
    assert view["trigger"] == {
        "type": "schedule",
        "id": schedule["schedule_id"],
        "scheduled_at": "2031-01-01T02:00:00Z",
    }

    assert (
        requests.delete(
            f"{alpha.base}/v1/schedules/{schedule['schedule_id']}", headers=alpha.headers, timeout=30
        ).status_code
        == 204
    )
    assert alpha.get(f"/v1/schedules/{schedule['schedule_id']}").status_code == 404


def _put(upload: dict[str, Any], data: bytes) -> None:
    response = requests.put(upload["upload_url"], data=data, headers=upload["headers"], timeout=30)
    assert response.status_code == 200, response.text


def test_an_s3_drop_starts_one_job_per_object_and_a_window_one_for_several(platform, alpha, fast):
    # Given an S3 trigger
    created = alpha.post(
        "/v1/triggers", {"type": "s3", "workflow": "document-analysis", "input_template": {"question": QUESTION}}
    )
    assert created.status_code == 201, created.text
    trigger = created.json()
    assert trigger["inbox"] == f"inbox/alpha/{trigger['trigger_id']}/"

    # When two files are uploaded to its inbox (upload tickets), and the first one again
    for name, text in (("notice.txt", b"Termination needs 30 days notice."), ("terms.md", b"# Terms\nNo refunds.")):
        ticket = alpha.post(
            "/v1/uploads", {"filename": name, "media_type": "text/plain", "trigger_id": trigger["trigger_id"]}
        )
        assert ticket.status_code == 201, ticket.text
        _put(ticket.json(), text)
    s3 = platform.client("s3")
    s3.put_object(
        Bucket=platform.deployment.bucket_name,
        Key=f"{trigger['inbox']}notice.txt",
        Body=b"Termination needs 30 days notice.",
        ContentType="text/plain",
    )

    # Then one job per object (the same object again is the same job), each with the object as its document
    def two_jobs() -> list[dict[str, Any]] | None:
        found = _jobs_of(alpha, trigger["trigger_id"])
        return found if len(found) >= 2 else None

    jobs = wait_until(two_jobs, timeout=30, interval=0.2, what="a job per object")
    assert sorted(j["trigger"]["key"].rsplit("/", 1)[1] for j in jobs) == ["notice.txt", "terms.md"]
    done = alpha.wait(jobs[0]["job_id"])
    assert done["status"] == "completed", done
    assert len(_jobs_of(alpha, trigger["trigger_id"])) == 2

    # Given a trigger with a batch window, when three objects land in it, then one job takes all three
    batched = alpha.post(
        "/v1/triggers",
        {"type": "s3", "workflow": "document-analysis", "input_template": {"question": QUESTION}, "batch_seconds": 60},
    ).json()
    for n in range(3):
        s3.put_object(
            Bucket=platform.deployment.bucket_name,
            Key=f"{batched['inbox']}part-{n}.txt",
            Body=f"Part {n}: termination on notice.".encode(),
        )

    def window_job() -> list[dict[str, Any]] | None:
        return _jobs_of(alpha, batched["trigger_id"]) or None

    (job,) = wait_until(window_job, timeout=30, interval=0.2, what="the window's job")
    assert job["trigger"]["objects"] == 3
    assert alpha.wait(job["job_id"])["status"] == "completed"


def test_an_event_matching_a_pattern_starts_a_job_and_bad_patterns_and_templates_are_refused(platform, alpha):
    document = {"name": "order.txt", "text": {"$event": "detail.text"}}
    template = {"question": {"$event": "detail.question"}, "documents": [document]}
    bad_pattern = alpha.post(
        "/v1/triggers",
        {"type": "eventbridge", "workflow": "document-analysis", "input_template": template,
         "event_pattern": {"source": "acme.orders", "detail": {"total": [{"numeric": [">", "zero"]}]}}},
    )  # fmt: skip
    assert bad_pattern.status_code == 422
    assert {tuple(e["loc"]) for e in bad_pattern.json()["errors"]} == {
        ("body", "event_pattern", "source"),
        ("body", "event_pattern", "detail", "total", 0),
    }
    bad_template = alpha.post(
        "/v1/triggers",
        {"type": "eventbridge", "workflow": "document-analysis", "input_template": {"documents": template["documents"]},
         "event_pattern": {"source": ["acme.orders"]}},
    )  # fmt: skip
    assert bad_template.status_code == 422
    assert ["body", "input_template", "question"] in [e["loc"] for e in bad_template.json()["errors"]]

    created = alpha.post(
        "/v1/triggers",
        {"type": "eventbridge", "workflow": "document-analysis", "input_template": template,
         "event_pattern": {"source": ["acme.orders"], "detail-type": ["Order Placed"]}},
    )  # fmt: skip
    assert created.status_code == 201, created.text
    trigger = created.json()
    events = platform.client("events")
    entry = {"Source": "acme.orders", "EventBusName": trigger["event_bus"]}
    sent = events.put_events(
        Entries=[
            {
                **entry,
                "DetailType": "Order Placed",
                "Detail": json.dumps({"question": QUESTION, "text": "Refunds: none."}),
            },
            {**entry, "DetailType": "Order Shipped", "Detail": json.dumps({"question": QUESTION, "text": "x"})},
        ]
    )
    assert sent["FailedEntryCount"] == 0

    def started() -> list[dict[str, Any]] | None:
        return _jobs_of(alpha, trigger["trigger_id"]) or None

    (job,) = wait_until(started, timeout=30, interval=0.2, what="the event's job")
    assert job["trigger"]["type"] == "eventbridge" and job["trigger"]["event_id"]
    assert alpha.wait(job["job_id"])["status"] == "completed"
    assert (
        requests.delete(
            f"{alpha.base}/v1/triggers/{trigger['trigger_id']}", headers=alpha.headers, timeout=30
        ).status_code
        == 204
    )
    assert not [
        r for r in events.list_rules(EventBusName=trigger["event_bus"])["Rules"] if trigger["trigger_id"] in r["Name"]
    ]
