"""Failure classes: transient failures are retried; deterministic ones fail the job at once with one dead letter."""

from __future__ import annotations

from local.platform import LocalPlatform
from tests.faults.helpers import dead_letters
from tests.workflows.conftest import Client


def test_transient_failure_is_retried_and_the_job_completes(alpha: Client, sample_request, inject):
    # Given draft_answer fails transiently twice
    inject("draft_answer=transientx2")
    job_id = alpha.submit(sample_request)
    # Then the job completes after two retries, visible in the events
    job = alpha.wait(job_id)
    assert job["status"] == "completed", job
    events = [e for e in alpha.events(job_id) if e.get("step") == "draft_answer"]
    failures = [e for e in events if e["type"] == "step_attempt_failed"]
    assert len(failures) == 2
    assert all(f["detail"]["kind"] == "transient" and f["detail"]["will_retry"] for f in failures)
    assert [e["attempt"] for e in events if e["type"] == "step_started"] == [1, 2, 3]


def test_deterministic_failure_fails_the_job_once_with_one_dead_letter(
    platform: LocalPlatform, alpha: Client, sample_request, inject
):
    # Given verify_citations rejects its input
    inject("verify_citations=invalid-input")
    job_id = alpha.submit(sample_request)
    # Then the job fails at once, with a clear error
    job = alpha.wait(job_id)
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "invalid-input"
    assert job["error"]["step"] == "verify_citations"
    assert job["error"]["message"]
    starts = [e for e in alpha.events(job_id) if e["type"] == "step_started" and e["step"] == "verify_citations"]
    assert len(starts) == 1, "a deterministic error must not be retried"
    # And the step's dead-letter queue holds one message naming job, step and error
    ours = dead_letters(platform, "verify_citations", job_id, expect=1)
    assert len(ours) == 1
    assert ours[0]["step"] == "verify_citations" and ours[0]["error"] == "InvalidInputError"


def test_a_failing_fan_out_item_fails_the_job_with_one_dead_letter(
    platform: LocalPlatform, alpha: Client, sample_request, inject
):
    inject("extract_evidence#0=output-invalid")
    job_id = alpha.submit(sample_request)
    job = alpha.wait(job_id)
    assert job["status"] == "failed"
    assert job["error"]["step"] == "extract_evidence" and job["error"]["item"] == 0
    (letter,) = dead_letters(platform, "extract_evidence", job_id, expect=1)
    assert letter["item"] == 0 and letter["kind"] == "output-invalid"
    for field in ("job_id", "tenant_id", "workflow", "trace_id", "message", "attempts", "replay"):
        assert letter[field] is not None, field
