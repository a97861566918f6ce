"""An agent's tools on the local platform: each call runs with its job's own credentials (the stack's tool role,
assumed through the local STS with a session policy scoped to the job, enforced by the local IAM check), so a tool of
one job reading another job's object is refused AccessDenied and the model is told (`access-denied`); a hung tool
fails on its own `timeout_seconds` (`timeout`), the turn goes on and the job completes, its notices sent under the
job's credentials."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from local.moto_patches import iam
from local.platform import LocalPlatform
from longhaul.engine.tools import ToolContext
from longhaul.workflows.dispute_resolution import actions
from longhaul.workflows.dispute_resolution.tools import TOOLS, Disputes, Nothing
from tests.workflows.conftest import Client
from tests.workflows.disputes import approve, dispute_request, reconcile, status_of

DRAFTING = "draft_notices"


def _turns(client: Client, job_id: str) -> list[dict[str, Any]]:
    return [e["detail"] for e in client.events(job_id) if e["type"] == "agent_turn" and e.get("step") == DRAFTING]


@pytest.fixture
def beta(platform: LocalPlatform) -> Client:
    """The tenant these jobs run for: beta, whose policy no other module of the suite changes (alpha's agent limits
    are steered elsewhere, and a policy is cached by the API function for a few seconds)."""
    return Client(platform, "beta")


@pytest.fixture
def snooping(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """`list_disputes`, whose first call of each job also reads the object named in `targets` (another job's)."""
    targets: list[str] = []
    real = actions.list_disputes
    snooped: set[str] = set()

    def list_disputes(ctx: ToolContext, request: Nothing) -> Disputes:
        if targets and ctx.job_id not in snooped:
            snooped.add(ctx.job_id)
            ctx.services.artifacts.get_json(targets[0])
        return real(ctx, request)

    monkeypatch.setattr(actions, "list_disputes", list_disputes)
    yield targets


@pytest.mark.iam_denials_expected
def test_a_tool_reading_another_jobs_object_is_refused_by_the_jobs_credentials(
    platform: LocalPlatform, beta: Client, snooping: list[str]
) -> None:
    # Given a completed reconciliation (job B) and a dispute of it (job A) whose first tool call reads B's input
    other = reconcile(beta)
    snooping.append(f"work/{other}/input.json")
    job_id = beta.submit(dispute_request(other))

    # When its drafting agent runs
    waiting = status_of(beta, job_id, "waiting_for_review", "failed", "completed")

    # Then the read was refused by the local IAM enforcement, as the job's tool session (the tool role, job A)
    assert waiting["status"] == "waiting_for_review", waiting
    refused = [(p, a, r) for p, a, r in iam.denials() if r.endswith(f"/work/{other}/input.json")]
    assert refused, iam.denials()
    principal, action, _ = refused[0]
    assert action == "s3:GetObject" and "assumed-role/" in principal and principal.endswith(f"/tool-{job_id}")
    # and the model was told (`access-denied`), the turn went on: the call's failure, not the step's
    first = _turns(beta, job_id)[0]
    assert first["failures"] == {"access-denied": 1}, first
    assert {d for _, _, d in iam.denials()} == {r for _, _, r in refused}  # nothing else of the job was refused
    assert beta.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    assert status_of(beta, job_id, "cancelled")["status"] == "cancelled"


@pytest.fixture
def list_disputes_bound(monkeypatch: pytest.MonkeyPatch) -> float:
    """`list_disputes` with a one-second bound (its spec names ten)."""
    bound = 1.0
    monkeypatch.setitem(
        TOOLS._tools, "list_disputes", dataclasses.replace(TOOLS["list_disputes"], timeout_seconds=bound)
    )
    return bound


def test_a_hung_tool_fails_on_its_own_bound_and_the_turn_goes_on(
    platform: LocalPlatform, beta: Client, inject: Any, list_disputes_bound: float
) -> None:
    reconciliation = reconcile(beta)
    inject(f"{DRAFTING}#0=tool-hangx1")  # the first drafting turn's call never answers

    job_id = beta.submit(dispute_request(reconciliation))
    job = approve(beta, Client(platform, "beta-reviewer"), job_id)

    assert job["status"] == "completed", job
    turns = _turns(beta, job_id)
    assert turns[0]["tools"] == ["list_disputes"] and turns[0]["failures"] == {"timeout": 1}
    assert turns[1]["tools"] == ["list_disputes"] and turns[1]["failures"] == {}  # asked again, answered
    started = [e for e in beta.events(job_id) if e.get("step") == DRAFTING and e.get("item") == 0]
    assert [e["type"] for e in started].count("step_started") == 1, "the turn was not retried: it went on"
    # the notices went out under the job's credentials: no call of the job was refused (the `least_privilege` check)
