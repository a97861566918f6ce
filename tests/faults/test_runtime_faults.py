"""Runtime faults: a crash after a side effect, a hang past the Task timeout, a duplicate delivery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from local import lambda_runtime
from local.platform import LocalPlatform
from tests.faults.helpers import artifacts, assert_consistent, charges, dead_letters
from tests.workflows.conftest import Client

RECORDER = "handlers.steps.record_failure"


def _step_events(events: list[dict], step: str, kind: str) -> list[dict]:
    return [e for e in events if e.get("step") == step and e["type"] == kind]


def test_a_crash_after_the_side_effect_and_before_the_checkpoint_leaves_exactly_one_artifact(
    platform: LocalPlatform, alpha: Client, sample_request, inject
):
    inject("draft_answer=crash-after-side-effectx1")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    drafts = [k for k in artifacts(platform, job_id) if "/draft_answer/" in k]
    # one of each (the draft and its provisional result, under keys of their own), never one per attempt
    assert sorted(drafts) == [f"work/{job_id}/draft_answer/{name}.json" for name in ("draft", "provisional")]
    events = alpha.events(job_id)
    assert len(_step_events(events, "draft_answer", "step_started")) == 2, "the crashed attempt was retried"
    assert len(_step_events(events, "draft_answer", "step_finished")) == 1
    assert not _step_events(events, "draft_answer", "step_attempt_failed"), "a crash records nothing"
    assert len([c for c in charges(platform, job_id) if "/draft_answer/" in c["sk"]]) == 1, "charged once"
    assert_consistent(events)


def test_a_duplicate_delivery_commits_once(platform: LocalPlatform, alpha: Client, sample_request, inject):
    inject("extract_evidence#0=duplicate,publish_result=duplicate")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    assert len([e for e in _step_events(events, "extract_evidence", "step_finished") if e["item"] == 0]) == 1
    assert len(_step_events(events, "publish_result", "step_finished")) == 1
    assert [e["type"] for e in events].count("job_completed") == 1
    assert len([c for c in charges(platform, job_id) if c["sk"].endswith("/extract_evidence/0")]) == 1
    assert_consistent(events)


def test_a_step_hanging_past_its_timeout_is_retried_once_and_the_job_completes(
    platform: LocalPlatform, alpha: Client, sample_request, inject, fast_timeouts
):
    inject("verify_citations=hangx1")
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    assert len(_step_events(events, "verify_citations", "step_finished")) == 1
    assert_consistent(events)


def test_a_step_that_always_hangs_fails_the_job_with_a_timeout(
    platform: LocalPlatform, alpha: Client, sample_request, inject, fast_timeouts
):
    inject("verify_citations=hang")
    job_id = alpha.submit(sample_request)
    job = alpha.wait(job_id)
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "timeout" and job["error"]["step"] == "verify_citations"
    # told plainly, with the real attempt count: the Task's 75 s (60 s function + 15 s), one retry of a timeout
    told = "timed out after 75 s on each of 2 attempts"
    assert job["error"]["message"] == told
    events = alpha.events(job_id)
    failed = next(e for e in events if e["type"] == "job_failed")
    assert failed["detail"]["attempts"] == 2 and failed["detail"]["message"] == told
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    step = table.get_item(Key={"pk": f"JOB#{job_id}", "sk": "STEP#verify_citations"})["Item"]
    assert step["attempts"] == 2 and step["error"]["message"] == told
    (letter,) = dead_letters(platform, "verify_citations", job_id, expect=1)
    assert letter["attempts"] == 2 and letter["message"] == told
    assert_consistent(events)


def test_fan_out_items_timing_out_together_fail_the_job_with_a_timeout_naming_them(
    platform: LocalPlatform, alpha: Client, inject, fast_timeouts
):
    """Four documents whose items all hang, and recorders slower than their Task timeout (as they are on a busy machine
    under a compressed clock, all four items' recorders appending to one job at once): every item and every item's
    recorder times out. The job still fails once, `timeout`, naming the four items (it ended `internal`: an
    iteration failing with `States.Timeout` broke the Map)."""
    inject("parse_documents=hang")
    recorder_timeout = 60 + 15  # the recorder's Task timeout, in the platform's (scaled) seconds

    def slow_item_recorders(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        event = invocation.event
        if invocation.handler == RECORDER and isinstance(event, dict) and event.get("item") is not None:
            lambda_runtime.scaled_wait(recorder_timeout * 1.5)
        return call_next()

    documents = [{"name": f"d{n}.txt", "text": f"Clause {n}: the liability cap is {n} pounds."} for n in range(4)]
    body = {
        "workflow": "document-analysis",
        "input": {"question": "What is the liability cap?", "documents": documents},
    }
    with lambda_runtime.middleware(slow_item_recorders):
        job_id = alpha.submit(body)
        job = alpha.wait(job_id, timeout=180)

    assert job["status"] == "failed", job
    error = job["error"]
    assert (error["kind"], error["error"], error["step"]) == ("timeout", "States.Timeout", "parse_documents"), error
    assert error["items"] == [0, 1, 2, 3], error
    events = alpha.events(job_id)
    assert [e["type"] for e in events].count("job_failed") == 1
    assert_consistent(events)
