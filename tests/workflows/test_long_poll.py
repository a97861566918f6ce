"""The events long-poll on the local runtime, over HTTP as a client sees it: `GET …/events?wait=` answers once there
is a new event, not at the end of its wait, and with an empty page after `wait` seconds when there is none (how soon
it answers is a figure of `bench/long_poll.py`, not an assertion here).

The job waits for review (nothing happens until the reviewer decides; its reminders are minutes away), so the only new
event is the one the decision causes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import requests

from local import lambda_runtime
from local.platform import LocalPlatform
from tests.workflows.conftest import Client
from tests.workflows.test_review_and_webhooks import status_of


def _quiet_cursor(client: Client, job_id: str) -> str:
    """The seq of the job's last event once its log has stopped growing (one second without a new event)."""
    cursor = "0"
    while True:
        page = client.get(f"/v1/jobs/{job_id}/events", cursor=cursor, wait=1).json()
        if not page["events"]:
            return cursor
        cursor = str(page["events"][-1]["seq"])


def test_a_long_poll_answers_on_a_new_event_and_after_its_wait_without_one(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    reviewer = Client(platform, "alpha-reviewer")
    job_id = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    review_id = status_of(alpha, job_id, "waiting_for_review")["review"]["review_id"]
    cursor = _quiet_cursor(alpha, job_id)

    started = time.monotonic()
    idle = alpha.get(f"/v1/jobs/{job_id}/events", cursor=cursor, wait=2)
    idle_seconds = time.monotonic() - started

    answered: dict[str, Any] = {}

    def long_poll() -> None:
        response = requests.get(
            f"{alpha.base}/v1/jobs/{job_id}/events",
            headers=alpha.headers,
            params={"cursor": cursor, "wait": 20},
            timeout=30,
        )
        answered.update(at=datetime.now(UTC), page=response.json(), status=response.status_code)

    polling = threading.Event()

    def note_the_long_poll(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        query = invocation.event.get("queryStringParameters") if isinstance(invocation.event, dict) else None
        if (query or {}).get("wait") == "20":
            polling.set()
        return call_next()

    with lambda_runtime.middleware(note_the_long_poll):
        poller = threading.Thread(target=long_poll)
        poller.start()
        assert polling.wait(timeout=30), "the long-poll never reached the API function"
    decided = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"})
    poller.join(timeout=30)
    finished = alpha.wait(job_id)

    assert idle.status_code == 200 and idle.json() == {"events": [], "next_cursor": None}
    # Bounds that say what happened, not how fast this machine is (`bench/long_poll.py` prints the latencies): the
    # empty page came after its 2 s wait and not at a longer one's end; the event's page long before the 20 s wait.
    assert 2 <= idle_seconds < 10, f"an empty page after the 2 s wait, not before ({idle_seconds:.2f} s)"
    assert decided.status_code == 200, decided.text
    assert answered["status"] == 200 and answered["page"]["events"], answered
    first = answered["page"]["events"][0]
    assert first["seq"] == int(cursor) + 1
    latency = (answered["at"] - datetime.fromisoformat(first["at"])).total_seconds()
    assert latency < 5, f"answered {latency:.2f} s after the event was written, as if at the wait's end"
    assert finished["status"] == "completed"
