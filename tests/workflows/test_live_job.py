"""A job you can watch, on the local platform: its provisional result before it completes, its wait state while a
provider's 429 holds it back, and ETAs that converge on its workflow's history."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from local import lambda_runtime
from local.deploy import wait_until
from tests.workflows.conftest import Client

PROBLEMS = "https://longhaul.dev/problems/"


class _Gate:
    """Holds the invocations of `step` (at `attempt`, if given) until released; says when one entered."""

    def __init__(self, step: str, *, attempt: int | None = None) -> None:
        self.step, self.attempt = step, attempt
        self.entered, self.released = threading.Event(), threading.Event()

    def __call__(self, invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        event = invocation.event
        ours = lambda_runtime.is_step_event(event) and event.get("step") == self.step
        if ours and (self.attempt is None or event.get("attempt") == self.attempt):
            self.entered.set()
            self.released.wait(60)
        return call_next()


def _without(result: dict[str, Any], *fields: str) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in fields}


def test_the_provisional_result_is_readable_before_completion_and_differs_from_the_final_only_by_verification(
    alpha: Client, sample_request: dict[str, Any]
) -> None:
    # Given a job held before its draft, then before its citations are verified
    before_draft, before_verify = _Gate("draft_answer"), _Gate("verify_citations")
    with lambda_runtime.middleware(before_draft), lambda_runtime.middleware(before_verify):
        job_id = alpha.submit(sample_request)
        assert before_draft.entered.wait(60)
        # Then without a draft there is nothing provisional: a clear 409; and without the parameter, 409 as ever
        none_yet = alpha.get(f"/v1/jobs/{job_id}/result", provisional="true")
        not_ready = alpha.get(f"/v1/jobs/{job_id}/result")
        before_draft.released.set()
        assert before_verify.entered.wait(60)
        # When the draft is done: its provisional result, marked, and the job's view says so
        provisional = alpha.get(f"/v1/jobs/{job_id}/result", provisional="true")
        view = alpha.get(f"/v1/jobs/{job_id}").json()
        before_verify.released.set()
    assert none_yet.status_code == 409 and none_yet.json()["type"] == PROBLEMS + "no-provisional-result"
    assert not_ready.status_code == 409 and not_ready.json()["type"] == PROBLEMS + "result-not-ready"
    assert provisional.status_code == 200, provisional.text
    draft = provisional.json()
    assert (draft["provisional"], draft["as_of_step"], draft["verification"]) == (True, "draft_answer", None)
    assert view["status"] == "running" and view["provisional"]["as_of_step"] == "draft_answer"

    # And once it completes, the same route answers the final result, which differs only by its verification
    assert alpha.wait(job_id)["status"] == "completed"
    final = alpha.get(f"/v1/jobs/{job_id}/result", provisional="true").json()
    assert (final["provisional"], final["as_of_step"]) == (False, None)
    assert final["verification"]["citations_verified"] == final["verification"]["citations_checked"] > 0
    unmarked = ("verification", "provisional", "as_of_step", "budget", "markdown_key")
    assert _without(final, *unmarked) == _without(draft, *unmarked)
    assert "provisional_result" in [e["type"] for e in alpha.events(job_id)]
    assert alpha.get(f"/v1/jobs/{job_id}").json()["provisional"] is None


def test_a_job_held_back_by_a_providers_429_says_rate_limited_with_its_until(
    alpha: Client, sample_request: dict[str, Any], inject: Callable[[str], None]
) -> None:
    # Given a provider that answers 429 to the draft's first attempt, and its retry held until the wait is seen
    inject("draft_answer=rate-limitedx1")
    retry = _Gate("draft_answer", attempt=1)
    with lambda_runtime.middleware(retry):
        job_id = alpha.submit(sample_request)
        assert retry.entered.wait(60), "the draft was not retried"
        # Then the job says what holds it back, and until when
        view = alpha.get(f"/v1/jobs/{job_id}").json()
        retry.released.set()
    waiting = view["waiting"]
    assert view["status"] == "retrying" and waiting is not None, view
    assert waiting["reason"] == "rate_limited" and waiting["step"] == "draft_answer"
    until = datetime.fromisoformat(waiting["until"])
    assert datetime.now(UTC).timestamp() - 60 < until.timestamp() < datetime.now(UTC).timestamp() + 60
    assert "attempt 2" in waiting["detail"]

    # And when the retry runs it waits on nothing any more
    assert alpha.wait(job_id)["status"] == "completed"
    assert alpha.get(f"/v1/jobs/{job_id}").json()["waiting"] is None


def test_etas_converge_as_history_accrues(alpha: Client, sample_request: dict[str, Any]) -> None:
    # Given four completed jobs of the same shape, of a class of their own (the history prefers a job's own class:
    # other scenarios' jobs of the session do not count once there is one)
    request = {**sample_request, "sla_class": "batch"}
    took = []
    for _ in range(4):
        started = time.monotonic()
        assert alpha.wait(alpha.submit(request))["status"] == "completed"
        took.append(time.monotonic() - started)

    # When a fifth is submitted
    accepted = alpha.post("/v1/jobs", request).json()
    basis = wait_until(lambda: _basis(alpha, accepted["job_id"]), timeout=60, interval=0.05, what="an ETA")
    alpha.wait(accepted["job_id"])

    # Then its ETA comes from history, and the submission's estimate is close to what the jobs took
    assert basis == "history"
    typical = sorted(took)[len(took) // 2]
    assert 0.4 * typical <= accepted["estimated_sla_seconds"] <= 2.5 * typical + 1, (accepted, took)


def _basis(alpha: Client, job_id: str) -> str | None:
    progress = alpha.get(f"/v1/jobs/{job_id}").json()["progress"]
    return progress.get("eta_basis") if progress.get("eta_seconds") is not None else None
