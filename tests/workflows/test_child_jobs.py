"""Scenarios: jobs that start jobs. A reconciliation asked to resolve disputes starts a `dispute-resolution` child when
it finds discrepancies, waits for it and completes after it, the child's usage in its own; one that finds none skips
the step (recorded skipped, no child); cancelling the parent cancels the child; a request's `then` chains a second
job, submitted when the first completes."""

from __future__ import annotations

from typing import Any

from local.deploy import wait_until
from local.platform import LocalPlatform
from tests.workflows.conftest import Client
from tests.workflows.disputes import CONTACTS, DEFAULT_CONTACT, approve, reconciliation_request, status_of

RESOLVE = {"contacts": CONTACTS, "default_contact": DEFAULT_CONTACT}


def _with_disputes(**options: Any) -> dict[str, Any]:
    request = reconciliation_request(**options)
    request["input"]["resolve_disputes"] = RESOLVE
    return request


def _child_of(client: Client, job_id: str) -> dict[str, Any]:
    def started() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] not in ("failed", "completed", "cancelled"), job
        return job if job["children"] else None

    return wait_until(started, timeout=120, interval=0.2, what=f"job {job_id} to start its child")


def test_a_reconciliation_with_discrepancies_waits_for_its_dispute_child_and_completes_after_it(
    platform: LocalPlatform, alpha: Client
) -> None:
    reviewer = Client(platform, "alpha-reviewer")
    # Given a reconciliation that finds discrepancies and asks for them to be disputed
    parent_id = alpha.submit(_with_disputes())

    # When its child starts, then the parent waits for it: its view names the child, the child its parent
    waiting = _child_of(alpha, parent_id)
    (child,) = waiting["children"]
    assert child["workflow"] == "dispute-resolution" and child["step"] == "resolve_disputes"
    assert alpha.get(f"/v1/jobs/{child['job_id']}").json()["parent"] == parent_id
    # (the child's review is decided: the parent is still not done meanwhile)
    done_child = approve(alpha, reviewer, child["job_id"])
    assert done_child["status"] == "completed", done_child

    # Then the parent completes after it, with the reconciliation's result, the child's usage and cost in its own
    parent = alpha.wait(parent_id)
    assert parent["status"] == "completed", parent
    assert parent["children"] == [{**child, "status": "completed", "progress": None}]
    assert alpha.get(f"/v1/jobs/{parent_id}/result").json()["invoices"], "the reconciliation's own result"
    assert parent["usage"]["output_tokens"] >= done_child["usage"]["output_tokens"] > 0
    assert float(parent["usage"]["cost_usd"]) >= float(done_child["usage"]["cost_usd"])
    types = [e["type"] for e in alpha.events(parent_id)]
    assert types.index("child_started") < types.index("child_finished") < types.index("job_completed")
    graph = alpha.get(f"/v1/jobs/{parent_id}/graph").json()
    linked = [n for n in graph["nodes"] if n.get("child_job_id")]
    assert linked and {n["child_job_id"] for n in linked} == {child["job_id"]}


def test_a_reconciliation_without_discrepancies_skips_the_child_step(alpha: Client) -> None:
    # Given a reconciliation asking for disputes whose one invoice matches the contract
    job = alpha.wait(alpha.submit(_with_disputes(vendors=("lumen",))))

    # Then it completes without a child, the step recorded skipped (not failed)
    assert job["status"] == "completed" and job["children"] == [], job
    skipped = [e for e in alpha.events(job["job_id"]) if e["type"] == "step_skipped"]
    assert [e["step"] for e in skipped] == ["resolve_disputes"]
    graph = alpha.get(f"/v1/jobs/{job['job_id']}/graph").json()
    states = {n["name"]: n["status"] for n in graph["nodes"]}
    assert states["resolve_disputes: skipped"] == "done" and states["resolve_disputes: wait for child"] == "skipped"


def test_cancelling_the_parent_cancels_its_child(platform: LocalPlatform, alpha: Client) -> None:
    # Given a parent waiting for its dispute child, which waits for its review
    parent_id = alpha.submit(_with_disputes())
    (child,) = _child_of(alpha, parent_id)["children"]
    status_of(alpha, child["job_id"], "waiting_for_review")

    # When the parent is cancelled
    response = alpha.post(f"/v1/jobs/{parent_id}/cancel")
    assert response.status_code == 202, response.text

    # Then both end cancelled
    assert alpha.wait(parent_id)["status"] == "cancelled"
    assert alpha.wait(child["job_id"])["status"] == "cancelled"
    child_events = [e for e in alpha.events(child["job_id"]) if e["type"] == "cancel_requested"]
    assert child_events and child_events[0]["detail"]["reason"] == "parent_cancelled"


def test_then_chains_a_second_job_with_values_from_the_first_ones_result(
    platform: LocalPlatform, alpha: Client
) -> None:
    reviewer = Client(platform, "alpha-reviewer")
    # Given a reconciliation whose request chains a dispute of its own result
    request = reconciliation_request()
    request["then"] = {
        "workflow": "dispute-resolution",
        "input": {"reconciliation_job_id": {"$result": "/job_id"}, **RESOLVE},
    }
    first_id = alpha.submit(request)

    # When it completes, then the chained job was submitted for the same tenant and named on the first (just after
    # the completion: its function submits it once the status has changed)
    assert alpha.wait(first_id)["status"] == "completed"
    first = wait_until(
        lambda: job if (job := alpha.get(f"/v1/jobs/{first_id}").json())["then_job_id"] else None,
        timeout=60,
        interval=0.2,
        what="the chained job",
    )
    assert approve(alpha, reviewer, first["then_job_id"])["status"] == "completed"
    assert any(e["type"] == "then_submitted" for e in alpha.events(first_id))


def test_an_invalid_then_is_refused_at_submission_naming_its_paths(alpha: Client) -> None:
    request = reconciliation_request()
    request["then"] = {"workflow": "dispute-resolution", "input": {"contacts": {"x": "not an address"}}}
    response = alpha.post("/v1/jobs", request)
    assert response.status_code == 422, response.text
    paths = {tuple(e["loc"]) for e in response.json()["errors"]}
    assert ("body", "then", "input", "reconciliation_job_id") in paths
    assert ("body", "then", "input", "contacts", "x") in paths
