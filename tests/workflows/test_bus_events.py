"""Events out, through the local platform: the status changes of jobs this test has not seen before reach a consumer on
the stack's EventBridge bus (the rule to the operators' tap, read through `GET /v1/ops/events`) once each and in the
order of each job's log, with exactly the documented detail; a review's request and decision go out too."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import requests

from local.deploy import wait_until
from local.platform import LocalPlatform
from tests.workflows.conftest import Client
from tests.workflows.test_review_and_webhooks import status_of

DETAIL_FIELDS = {"job_id", "tenant_id", "workflow", "status", "previous_status", "at", "correlation_id", "seq"}


class Tap:
    """An operator reading the bus's tap through the API, keeping everything it read."""

    def __init__(self, platform: LocalPlatform) -> None:
        self.url = f"{platform.api_url}/v1/ops/events"
        self.headers = platform.auth_header("ops")
        self.read: list[dict[str, Any]] = []

    def drain(self) -> list[dict[str, Any]]:
        while True:
            page = requests.get(self.url, headers=self.headers, params={"limit": 100}, timeout=60)
            assert page.status_code == 200, page.text
            found = page.json()["events"]
            self.read += found
            if not found:
                return self.read

    def of(self, job_id: str, detail_type: str) -> list[dict[str, Any]]:
        return [e["detail"] for e in self.read if e["detail"]["job_id"] == job_id and e["detail_type"] == detail_type]


def _changes(client: Client, job_id: str) -> list[tuple[int, str]]:
    """(seq, status) of each status change in the job's own log."""
    return [(e["seq"], e["status"]) for e in client.events(job_id) if e.get("status")]


def test_each_status_change_reaches_the_bus_once_in_order_and_reviews_go_out_too(
    platform: LocalPlatform,
    alpha: Client,
    sample_request: dict[str, Any],
    inject: Any,
) -> None:
    tap = Tap(platform)
    tap.drain()
    tap.read.clear()  # what earlier scenarios left: these jobs are new to this consumer
    reviewer = Client(platform, "alpha-reviewer")

    reviewed = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    review_id = status_of(alpha, reviewed, "waiting_for_review")["review"]["review_id"]
    decided = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"})
    assert decided.status_code == 200, decided.text
    inject("verify_citations=invalid-input")
    failing = alpha.submit(sample_request)
    finished = {job_id: alpha.wait(job_id) for job_id in (reviewed, failing)}
    assert finished[reviewed]["status"] == "completed" and finished[failing]["status"] == "failed"

    expected = {job_id: _changes(alpha, job_id) for job_id in (reviewed, failing)}

    def all_arrived() -> bool | None:
        tap.drain()
        got = {j: [(d["seq"], d["status"]) for d in tap.of(j, "Job Status Changed")] for j in expected}
        return True if all(len(got[j]) >= len(expected[j]) for j in expected) else None

    wait_until(all_arrived, timeout=60, interval=0.5, what="every status change on the bus")
    tap.drain()

    for job_id, changes in expected.items():
        details = tap.of(job_id, "Job Status Changed")
        assert [(d["seq"], d["status"]) for d in details] == changes  # once each, in the log's order
        assert [d["previous_status"] for d in details] == [None, *[s for _, s in changes[:-1]]]
        for detail in details:
            assert set(detail) == DETAIL_FIELDS
            assert detail["tenant_id"] == "alpha" and detail["workflow"] == sample_request["workflow"]
            assert detail["correlation_id"] == finished[job_id]["correlation_id"]
    assert [s for _, s in expected[reviewed]][:1] == ["queued"] and "waiting_for_review" in dict(
        expected[reviewed]
    ).values()
    assert expected[failing][-1][1] == "failed"
    (requested,) = tap.of(reviewed, "Review Requested")
    (decision,) = tap.of(reviewed, "Review Decided")
    assert requested["review_id"] == decision["review_id"] == review_id
    assert decision["decision"] == "approve" and requested["seq"] < decision["seq"]
    assert all(e["source"] == "longhaul" and e["id"] for e in tap.read)
    per_job: dict[str, list[int]] = defaultdict(list)
    for event in tap.read:
        if event["detail_type"] == "Job Status Changed":
            per_job[event["detail"]["job_id"]].append(event["detail"]["seq"])
    assert all(seqs == sorted(set(seqs)) for seqs in per_job.values())


def test_the_cli_prints_each_event_of_the_tap_as_a_line(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    from tests.workflows.test_cli import longhaul

    Tap(platform).drain()  # what earlier scenarios left
    job_id = alpha.submit(sample_request)
    changes = [s for _, s in _changes(alpha, alpha.wait(job_id)["job_id"])]

    def everything() -> list[dict[str, Any]] | None:
        ran = longhaul(platform, "ops", "events", "--wait", "1", "--output", "json", key="ops")
        assert ran.exit_code == 0, ran.output
        read.extend(json.loads(line) for line in ran.stdout.splitlines() if line.strip())
        mine = [e for e in read if e["detail"]["job_id"] == job_id and e["detail_type"] == "Job Status Changed"]
        return mine if len(mine) >= len(changes) else None

    read: list[dict[str, Any]] = []
    mine = wait_until(everything, timeout=60, interval=0.5, what="the job's events through the CLI")
    text = longhaul(platform, "ops", "events", key="ops")
    refused = longhaul(platform, "ops", "events")

    assert [e["detail"]["status"] for e in mine] == changes
    assert text.exit_code == 0
    assert refused.exit_code != 0 and "operator" in refused.output
