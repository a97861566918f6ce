"""The review lane and the reviewer's use cases over the stores on moto, with the clock and task tokens faked.

Time is skipped: the interpreter ends each rung's wait with a timeout and calls `advance`; here the test calls it.
The task token never appears in anything a caller, an event or a listing gets.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from longhaul.api.jobs import JobService
from longhaul.api.reviews import ReviewService
from longhaul.core.auth import Principal
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import InternalError
from longhaul.core.problems import ApiProblem
from longhaul.core.records import ReviewRecord
from longhaul.core.step_events import WorkflowState
from longhaul.engine.spec import ReviewPolicy, registry
from longhaul.operations import sweep as sweeping
from longhaul.review import lane
from longhaul.review.contracts import DecisionRequest, ReviewMaterial
from longhaul.services import Services
from tests.unit.conftest import FakeClock
from tests.unit.fakes import FakeTokens
from tests.unit.test_sweep import create, events, read

S = JobStatus
TOKEN = "AQCEAAAAKgAAAAMAAAAAAAAAAc2tva2VuLXNlY3JldC12YWx1ZS0wMDEx"  # shaped like a real one
REVIEWER_A = Principal(tenant_id="tenant-a", role="reviewer", key_id="abc123")
REVIEWER_B = Principal(tenant_id="tenant-b", role="reviewer", key_id="def456")
TENANT_A = Principal(tenant_id="tenant-a", role="tenant")


@pytest.fixture
def tokens() -> FakeTokens:
    return FakeTokens()


@pytest.fixture
def lane_services(services: Services, tokens: FakeTokens) -> Services:
    return dataclasses.replace(services, tokens=tokens)


@pytest.fixture
def opened(lane_services: Services) -> Iterator[tuple[str, ReviewRecord]]:
    """A running job whose review step opened a review of 90 s (three rungs of 30 s)."""
    jid = create(lane_services, to=[S.RUNNING])
    job = read(lane_services.jobs, jid)
    material = lane_services.artifacts.put_json(
        f"work/{jid}/review/material.json", ReviewMaterial(draft={"answer": "42"}, evidence=[])
    )
    now = lane_services.now()
    review = lane_services.reviews.open(
        ReviewRecord(
            review_id=lane.review_id_for(job, "review"),
            job_id=jid,
            tenant_id="tenant-a",
            workflow="document-analysis",
            step="review",
            since=now,
            deadline=now + timedelta(seconds=90),
            deadline_seconds=90,
            assignee_group="analysts",
            secondary_group="analysis-leads",
            reasons=["asked for"],
            material_key=material,
        )
    )
    yield jid, review


def event(jid: str, review: ReviewRecord, action: str, token: str | None = None) -> dict[str, Any]:
    state = WorkflowState(
        job_id=jid,
        tenant_id="tenant-a",
        workflow="document-analysis",
        input_key=f"work/{jid}/input.json",
        steps={"review": {"review_id": review.review_id, "next": "wait", "wait_seconds": 30}},
    )
    return {"action": action, "step": "review", "token": token, "input": state.model_dump()}


def wait(services: Services, tokens: FakeTokens, jid: str, review: ReviewRecord, token: str = TOKEN) -> None:
    tokens.waiting.add(token)
    lane.wait(event(jid, review, "wait", token), services)


def test_the_wait_stores_the_token_and_the_job_waits_for_review(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened

    wait(lane_services, tokens, jid, review)

    job = read(lane_services.jobs, jid)
    assert job.status == S.WAITING_FOR_REVIEW
    assert job.review is not None and job.review.review_id == review.review_id
    assert lane_services.reviews.token(review.review_id) == TOKEN
    assert "review_requested" in events(lane_services.jobs, jid)


def test_a_job_waiting_for_review_says_so_and_has_no_eta(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened
    steps = registry()["document-analysis"].step_names

    wait(lane_services, tokens, jid, review)

    view = read(lane_services.jobs, jid).view(now=lane_services.now() + timedelta(seconds=60))
    assert view.progress.message.startswith("review: waiting for a reviewer (analysts) until ")
    assert view.progress.completed == steps.index("review") and view.progress.eta_seconds is None

    # a decision moves it on: the review step is done
    ReviewService(lane_services).decide(REVIEWER_A, review.review_id, DecisionRequest(decision="approve"))
    lane.advance(event(jid, review, "advance"), lane_services)
    resumed = read(lane_services.jobs, jid)
    assert resumed.status == S.RUNNING and resumed.progress.message == "review: approve"
    assert resumed.progress.completed == steps.index("review") + 1


@pytest.mark.parametrize("by", ["the tenant", "the sweep"])
def test_a_job_cancelled_in_review_and_its_review_agree(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord], by: str
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)

    if by == "the tenant":
        JobService(lane_services).cancel(TENANT_A, jid)
    else:  # a cancel whose execution could not be stopped at the time: the sweep finishes it
        lane_services.jobs.transition(jid, S.CANCEL_REQUESTED, event="cancel_requested")
        sweeping.sweep(lane_services, lane_services.now())

    job, closed = read(lane_services.jobs, jid), lane_services.reviews.get(review.review_id)
    assert job.status == S.CANCELLED and closed is not None and closed.status == "cancelled"
    assert job.review is not None and job.review.status == "cancelled"
    assert lane_services.reviews.token(review.review_id) is None
    # its progress says what was done and that it stopped: nobody waits for a reviewer any more
    steps = registry()["document-analysis"].step_names
    progress = job.view(now=lane_services.now()).progress
    assert progress.message == f"cancelled: {steps.index('review')} of {len(steps)} steps done (at review)"
    assert progress.completed == steps.index("review") and progress.eta_seconds is None


def test_an_unanswered_review_climbs_the_ladder_then_the_job_expires(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord], clock: FakeClock
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)

    rungs = []
    for n in range(3):  # each rung's wait times out (time skipped), then the lane advances
        clock.advance(timedelta(seconds=lane.rung_seconds(review.deadline_seconds)))
        outcome = lane.advance(event(jid, review, "advance"), lane_services)
        rungs.append(outcome["next"])
        if outcome["next"] == "wait":
            wait(lane_services, tokens, jid, review, token=f"{TOKEN}-{n}")

    job = read(lane_services.jobs, jid)
    closed = lane_services.reviews.get(review.review_id)
    types = events(lane_services.jobs, jid)
    assert rungs == ["wait", "wait", "stop"]
    assert types.index("review_reminder") < types.index("review_reassigned") < types.index("job_expired")
    assert job.status == S.EXPIRED and job.error is not None
    assert job.error.message == lane.EXPIRED_REASON and job.error.kind == "review-expired"
    assert closed is not None and closed.status == "expired" and closed.reminders == 1
    assert closed.assignee_group == "analysis-leads"
    assert job.review is not None and job.review.assignee_group == "analysis-leads" and job.review.reminders == 1
    assert lane_services.reviews.token(review.review_id) is None
    with pytest.raises(ApiProblem) as late:  # a decision after expiry
        ReviewService(lane_services).decide(REVIEWER_A, review.review_id, DecisionRequest(decision="approve"))
    assert late.value.status == 409


def test_a_policy_may_approve_an_unanswered_review(
    lane_services: Services,
    tokens: FakeTokens,
    opened: tuple[str, ReviewRecord],
    monkeypatch: pytest.MonkeyPatch,
    clock: FakeClock,
) -> None:
    jid, review = opened
    approving = ReviewPolicy("analysts", "analysis-leads", edits_model=ReviewMaterial, final_action="approve")
    monkeypatch.setattr(lane, "_policy", lambda workflow, step: approving)
    wait(lane_services, tokens, jid, review)

    outcomes = []
    for _ in range(3):
        clock.advance(timedelta(seconds=lane.rung_seconds(review.deadline_seconds)))
        outcomes.append(lane.advance(event(jid, review, "advance"), lane_services)["next"])

    assert outcomes == ["wait", "wait", "continue"]
    assert read(lane_services.jobs, jid).status == S.RUNNING
    assert "review_auto_approved" in events(lane_services.jobs, jid)


def test_a_decision_resumes_the_wait_and_the_job_goes_on(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)
    service = ReviewService(lane_services)

    outcome = service.decide(REVIEWER_A, review.review_id, DecisionRequest(decision="approve", comment="fine"))
    resumed = lane.advance(event(jid, review, "advance"), lane_services)

    assert outcome.decision == "approve"
    assert tokens.succeeded == [(TOKEN, {"decided": True})]
    assert resumed["next"] == "continue" and resumed["decision"] == "approve"
    assert read(lane_services.jobs, jid).status == S.RUNNING
    assert lane_services.checkpoints.get_step(jid, "review").output == resumed  # a replay reuses the decision
    with pytest.raises(ApiProblem) as second:
        service.decide(REVIEWER_A, review.review_id, DecisionRequest(decision="reject"))
    assert second.value.status == 409


def test_a_rejection_fails_the_job_as_review_rejected(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)

    ReviewService(lane_services).decide(REVIEWER_A, review.review_id, DecisionRequest(decision="reject", comment="no"))
    stopped = lane.advance(event(jid, review, "advance"), lane_services)

    job = read(lane_services.jobs, jid)
    assert stopped["next"] == "stop"
    assert job.status == S.FAILED and job.error is not None and job.error.kind == "review-rejected"


def test_edits_are_validated_by_the_workflows_edits_model(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    _, review = opened
    service = ReviewService(lane_services)

    with pytest.raises(ApiProblem) as invalid:
        service.decide(REVIEWER_A, review.review_id, DecisionRequest(decision="edit", edits={"answer": ""}))
    with pytest.raises(ValidationError, match="needs `edits`"):  # the contract itself: `edit` goes with edits
        DecisionRequest(decision="edit")
    edited = service.decide(REVIEWER_A, review.review_id, DecisionRequest(decision="edit", edits={"answer": "43"}))

    assert invalid.value.status == 422
    stored = lane_services.reviews.get(review.review_id)
    assert edited.decision == "edit" and stored is not None and stored.edits_key
    assert lane_services.artifacts.get_json(stored.edits_key) == {"answer": "43", "claims": None}


def test_only_the_tenants_reviewers_see_a_review(lane_services: Services, opened: tuple[str, ReviewRecord]) -> None:
    _, review = opened
    service = ReviewService(lane_services)

    pending = service.list(REVIEWER_A, "pending", 10, None)
    with pytest.raises(ApiProblem) as other_tenant:
        service.detail(REVIEWER_B, review.review_id)
    with pytest.raises(ApiProblem) as tenant_key:
        service.detail(TENANT_A, review.review_id)

    assert [r.review_id for r in pending.reviews] == [review.review_id]
    assert service.list(REVIEWER_B, "pending", 10, None).reviews == []
    assert other_tenant.value.status == 404 and tenant_key.value.status == 403


def test_the_token_is_in_no_response_event_or_listing(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)
    service = ReviewService(lane_services)

    seen = [
        service.list(REVIEWER_A, "pending", 10, None).model_dump_json(),
        service.detail(REVIEWER_A, review.review_id).model_dump_json(),
        read(lane_services.jobs, jid).view().model_dump_json(),
        json.dumps([e.model_dump(mode="json") for e in lane_services.jobs.list_events(jid)[0]]),
        service.decide(REVIEWER_A, review.review_id, DecisionRequest(decision="approve")).model_dump_json(),
        json.dumps(lane.advance(event(jid, review, "advance"), lane_services)),
    ]

    assert all(TOKEN not in text for text in seen)
    assert lane_services.reviews.token(review.review_id) is None  # spent


@pytest.mark.parametrize("deadline_seconds", [1, 2, 10, 11, 90, 3601])
def test_the_rungs_never_end_a_review_before_its_deadline(deadline_seconds: int) -> None:
    # (a 10 s review took three rungs of 3 s and expired a second before the deadline it showed)
    assert lane.RUNGS * lane.rung_seconds(deadline_seconds) >= deadline_seconds


def test_a_final_rung_reached_before_the_deadline_waits_for_the_rest_of_it(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord], clock: FakeClock
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)
    for n in range(2):  # reminded, reassigned
        lane.advance(event(jid, review, "advance"), lane_services)
        wait(lane_services, tokens, jid, review, token=f"{TOKEN}-{n}")

    # the rungs' waits ended early (cut short, or a clock ahead of them): 5 s before the deadline the job shows
    clock.advance(timedelta(seconds=(review.deadline - lane_services.now()).total_seconds() - 5))
    early = lane.advance(event(jid, review, "advance"), lane_services)
    clock.advance(timedelta(seconds=early["wait_seconds"]))
    final = lane.advance(event(jid, review, "advance"), lane_services)

    assert early["next"] == "wait" and early["wait_seconds"] == 5
    assert final["next"] == "stop" and read(lane_services.jobs, jid).status == S.EXPIRED
    assert lane_services.now() >= review.deadline


def test_a_review_closed_under_a_live_job_is_a_recorded_failure_not_a_silent_stop(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    # Given a review that was closed without a decision (as a cancel closes it) while its job still runs (a replay)
    jid, review = opened
    wait(lane_services, tokens, jid, review)
    lane_services.reviews.change(review, {}, status="cancelled")

    # When the lane advances, Then it fails with a typed error the step's failure path records (an execution ending
    # through JobStopped would leave the job with nothing recorded)
    with pytest.raises(InternalError, match="is cancelled while its job is waiting_for_review"):
        lane.advance(event(jid, review, "advance"), lane_services)


def test_a_review_of_an_earlier_attempt_is_refused(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened
    lane_services.jobs.update_job(jid, {"attempts": 2})  # a replay's attempt: its review is another one

    with pytest.raises(InternalError, match="earlier attempt"):
        lane.advance(event(jid, review, "advance"), lane_services)


# ---------------------------------------------------------------- reviewer groups

ANALYST = Principal(tenant_id="tenant-a", role="reviewer", key_id="an4lyst", groups=["analysts"])
LEAD = Principal(tenant_id="tenant-a", role="reviewer", key_id="le4d", groups=["analysis-leads"])
OUTSIDER = Principal(tenant_id="tenant-a", role="reviewer", key_id="0uts1der", groups=["finance"])


def _sees(services: Services, reviewer: Principal, review_id: str) -> bool:
    service = ReviewService(services)
    listed = [r.review_id for r in service.list(reviewer, "pending", 50, None).reviews]
    try:
        service.detail(reviewer, review_id)
    except ApiProblem as refused:
        assert refused.status == 404 and review_id not in listed
        return False
    assert review_id in listed
    return True


def test_a_review_of_a_group_is_seen_and_decided_by_its_members_only(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord]
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)
    service = ReviewService(lane_services)

    seen = {p.key_id: _sees(lane_services, p, review.review_id) for p in (ANALYST, LEAD, OUTSIDER, REVIEWER_A)}
    with pytest.raises(ApiProblem) as outside:
        service.decide(OUTSIDER, review.review_id, DecisionRequest(decision="approve"))
    service.decide(ANALYST, review.review_id, DecisionRequest(decision="approve", comment="fine"))
    lane.advance(event(jid, review, "advance"), lane_services)

    # REVIEWER_A has no groups: a reviewer of every group of its tenant, as keys made without groups are
    assert seen == {"an4lyst": True, "le4d": False, "0uts1der": False, "abc123": True}
    assert outside.value.status == 404
    decided = lane_services.reviews.get(review.review_id)
    assert decided is not None and decided.decided_by == "tenant-a/reviewer/an4lyst"
    assert decided.decided_group == "analysts"
    (applied,) = [e for e in lane_services.jobs.list_events(jid)[0] if e.type == "review_decided"]
    assert applied.detail["decided_by"] == "tenant-a/reviewer/an4lyst" and applied.detail["decided_group"] == "analysts"


def test_once_reassigned_the_next_group_may_decide_too(
    lane_services: Services, tokens: FakeTokens, opened: tuple[str, ReviewRecord], clock: FakeClock
) -> None:
    jid, review = opened
    wait(lane_services, tokens, jid, review)
    for n in range(2):  # reminded, then reassigned to the secondary group
        clock.advance(timedelta(seconds=lane.rung_seconds(review.deadline_seconds)))
        lane.advance(event(jid, review, "advance"), lane_services)
        wait(lane_services, tokens, jid, review, token=f"{TOKEN}-{n}")

    seen = {p.key_id: _sees(lane_services, p, review.review_id) for p in (ANALYST, LEAD, OUTSIDER)}
    outcome = ReviewService(lane_services).decide(LEAD, review.review_id, DecisionRequest(decision="approve"))

    assert seen == {"an4lyst": True, "le4d": True, "0uts1der": False}
    decided = lane_services.reviews.get(review.review_id)
    assert outcome.decision == "approve" and decided is not None
    assert decided.assignee_group == "analysis-leads" and decided.first_group == "analysts"
    assert decided.decided_group == "analysis-leads"


def test_a_reviewers_page_is_filled_with_its_groups_reviews_across_reads(lane_services: Services) -> None:
    now = lane_services.now()
    for n in range(7):
        lane_services.reviews.open(
            ReviewRecord(
                review_id=f"rev_{n:024d}",
                job_id=f"job_{n}",
                tenant_id="tenant-a",
                workflow="document-analysis",
                step="review",
                since=now + timedelta(seconds=n),
                deadline=now + timedelta(hours=1),
                deadline_seconds=3600,
                assignee_group="analysts" if n % 3 == 0 else "finance",
                secondary_group="analysis-leads",
                material_key="unused",
            )
        )
    service = ReviewService(lane_services)

    first = service.list(ANALYST, "pending", 2, None)
    assert first.next_cursor is not None
    rest = service.list(ANALYST, "pending", 2, first.next_cursor)

    assert [r.review_id for r in first.reviews + rest.reviews] == [f"rev_{n:024d}" for n in (6, 3, 0)]
    assert rest.next_cursor is None
    assert len(service.list(REVIEWER_A, "pending", 50, None).reviews) == 7
