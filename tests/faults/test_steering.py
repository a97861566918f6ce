"""Steering running jobs on the local platform: an update that extends a deadline the sweep would otherwise expire
the job at, a budget raise (and one refused above the ceiling) with instructions that reach only the later calls'
kept prompts, agent limits pinned at submission whatever the tenant's policy becomes, and a job superseded by a
corrected submission."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import requests

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS
from tests.faults.helpers import assert_consistent
from tests.faults.test_deadlines import _sweep_schedule
from tests.workflows.conftest import Client
from tests.workflows.disputes import dispute_request, reconcile


class Hold:
    """Invocations of a step held before they run until `release()`: the job is running and that step has not
    started. `first_only`: only the first invocation is held (a second job's pass)."""

    def __init__(self) -> None:
        self.released, self.reached = threading.Event(), threading.Event()

    def release(self) -> None:
        self.released.set()

    def wait_reached(self) -> None:
        assert self.reached.wait(120), "the held step was never reached"


@contextmanager
def held(step: str, item: int | None = None, *, first_only: bool = False) -> Iterator[Hold]:
    hold = Hold()

    def middleware(invocation: Any, call_next: Any) -> Any:
        event = invocation.event
        ours = isinstance(event, dict) and event.get("step") == step and (item is None or event.get("item") == item)
        if ours and not (first_only and hold.reached.is_set()):
            hold.reached.set()
            hold.released.wait(120)
        return call_next()

    with lambda_runtime.middleware(middleware):
        try:
            yield hold
        finally:
            hold.release()


def patch(platform: LocalPlatform, who: str, path: str, body: Any) -> requests.Response:
    return requests.patch(
        f"{platform.api_url}{path}",
        json=body,
        headers={**platform.auth_header(who), "Content-Type": "application/json"},
        timeout=30,
    )


def test_an_extended_deadline_keeps_a_job_alive_past_its_first_one(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    before = platform.time_scale
    platform.set_time_scale(0.01)  # a 600 s deadline falls after 6 s, an hour after 36 s
    try:
        with held("draft_answer") as hold:
            job_id = alpha.submit({**sample_request, "deadline_seconds": 600})
            first = datetime.fromisoformat(alpha.get(f"/v1/jobs/{job_id}").json()["deadline_at"])
            # When the tenant gives it an hour from now, before its first deadline passes
            updated = patch(platform, "alpha", f"/v1/jobs/{job_id}", {"deadline_seconds": 3600})
            assert updated.status_code == 200, updated.text
            assert datetime.fromisoformat(updated.json()["deadline_at"]) > first
            hold.wait_reached()
            wait_until(lambda: datetime.now(UTC) > first or None, timeout=30, what="the first deadline")
            # Then the sweep, which would have expired it at its first deadline, leaves it running
            assert platform.scheduler is not None
            platform.scheduler.fire(_sweep_schedule(platform))
            assert alpha.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
        job = alpha.wait(job_id)
    finally:
        platform.set_time_scale(before)
    assert job["status"] == "completed", job
    events = alpha.events(job_id)
    (update,) = [e for e in events if e["type"] == "job_updated"]
    assert update["detail"]["fields"] == ["deadline_seconds"] and update["detail"]["requested_by"] == "tenant"
    assert_consistent(events)


def test_a_budget_raise_lets_the_job_go_on_and_instructions_reach_only_later_prompts(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request: dict[str, Any]
) -> None:
    instructions = "Name the clause numbers you rely on."
    with held("draft_answer") as hold:
        job_id = alpha.submit(sample_request)
        hold.wait_reached()
        view = alpha.get(f"/v1/jobs/{job_id}").json()
        spent = view["budget"]["held_tokens"]
        assert spent > 0, "the evidence was extracted with model calls"
        # Given a job whose budget is all spent (lowered to what it has used: no next call would fit)
        exhausted = patch(platform, "alpha", f"/v1/jobs/{job_id}", {"budget": {"max_tokens": spent}})
        assert exhausted.status_code == 200, exhausted.text
        assert exhausted.json()["budget"]["remaining_tokens"] == 0
        # A raise above the tenant's ceiling is refused, and changes nothing
        ceiling = 2_000_000
        refused = patch(platform, "alpha", f"/v1/jobs/{job_id}", {"budget": {"max_tokens": ceiling + 1}})
        assert refused.status_code == 422 and refused.json()["errors"][0]["loc"] == ["body", "budget", "max_tokens"]
        assert alpha.get(f"/v1/jobs/{job_id}").json()["budget"]["max_tokens"] == spent
        # When the budget is raised within the ceiling, with instructions for the steps to come
        raised = patch(
            platform, "alpha", f"/v1/jobs/{job_id}", {"budget": {"max_tokens": ceiling}, "instructions": instructions}
        )
        assert raised.status_code == 200, raised.text
    # Then its next model calls are admitted and it completes
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    assert job["budget"]["max_tokens"] == ceiling and job["instructions"] == instructions
    calls = ops.get(f"/v1/ops/jobs/{job_id}/calls").json()["calls"]
    kept = {c["prompt_hash"]: ops.get(f"/v1/ops/jobs/{job_id}/prompts/{c['prompt_hash']}").json() for c in calls}
    steps = {c["step"] for c in calls}
    assert {"extract_evidence", "draft_answer"} <= steps
    for call in calls:
        prompt = kept[call["prompt_hash"]]
        if call["step"] == "extract_evidence":  # started before the update
            assert prompt["instructions"] is None and instructions not in prompt["prompt"]
        else:
            assert prompt["instructions"] == instructions and prompt["prompt"].endswith(instructions)
    assert_consistent(alpha.events(job_id))


def test_raising_the_tenants_agent_ceiling_does_not_change_a_running_jobs_limits(
    platform: LocalPlatform, alpha: Client
) -> None:
    reconciliation = reconcile(alpha)
    policy = "/v1/ops/tenants/alpha/policy"
    assert patch(platform, "ops", policy, {"agent_max_turns": 2}).status_code == 200
    time.sleep(LOOKUP_CACHE_SECONDS + 0.5)  # what a submission reads: the policy as cached at most this long ago
    job_id = None
    try:
        with held("draft_notices", item=0) as hold:
            job_id = alpha.submit(dispute_request(reconciliation))  # no limits of its own: the tenant's, pinned
            hold.wait_reached()
            assert alpha.get(f"/v1/jobs/{job_id}").json()["agent"]["max_turns"] == 2
            # When the tenant's ceiling is raised while the job runs
            assert patch(platform, "ops", policy, {"agent_max_turns": 50}).status_code == 200
        job = alpha.wait(job_id)
    finally:
        patch(platform, "ops", policy, {"agent_max_turns": None})
        if job_id is not None:
            alpha.post(f"/v1/jobs/{job_id}/cancel")  # (a job that failed to stop does not outlive the test)
    # Then the job keeps the limit it was admitted with
    assert job["status"] == "failed" and job["error"]["kind"] == "agent-limit", job
    assert job["error"]["message"].startswith("max_turns") and job["agent"]["max_turns"] == 2
    turns = [e for e in alpha.events(job_id) if e["type"] == "agent_turn"]
    assert len(turns) == 2


def test_a_superseded_job_stops_and_its_successor_completes(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    with held("draft_answer", first_only=True) as hold:  # the first job's draft waits; its successor's does not
        first = alpha.submit(sample_request)
        hold.wait_reached()
        corrected = {**sample_request, "input": {**sample_request["input"], "question": "What are the fees?"}}
        second = alpha.submit({**corrected, "supersedes": first}, **{"Idempotency-Key": f"fix-{first}"})
        again = alpha.submit({**corrected, "supersedes": first}, **{"Idempotency-Key": f"fix-{first}"})
        assert again == second
    old = alpha.get(f"/v1/jobs/{first}").json()
    assert old["status"] == "cancelled" and old["superseded_by"] == second
    events = alpha.events(first)
    assert [e["detail"] for e in events if e["type"] == "job_superseded"] == [{"by": second}]
    assert [e["detail"]["reason"] for e in events if e["type"] == "job_cancelled"] == ["superseded"]
    assert_consistent(events)
    job = alpha.wait(second)
    assert job["status"] == "completed" and job["supersedes"] == first
    # A finished job that is superseded keeps its result, which then names its successor
    third = alpha.submit({**corrected, "supersedes": second})
    result = alpha.get(f"/v1/jobs/{second}/result")
    assert result.status_code == 200 and result.json()["superseded_by"] == third
    assert alpha.get(f"/v1/jobs/{second}").json()["status"] == "completed"
    alpha.post(f"/v1/jobs/{third}/cancel")
