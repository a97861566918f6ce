"""A segment that overruns: document analysis bounds OCR and indexing together (`ocr_and_index`, 1200 s by
`LONGHAUL_OCR_INDEX_SEGMENT_SECONDS`). Run at a small time scale, the bound passes while `plan_ocr` (each step well
within its own timeout) still works: the job fails with error kind `timeout` and `detail.segment`, and its steps after
the segment never run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from local import lambda_runtime
from local.platform import LocalPlatform
from longhaul.core import limits
from tests.workflows.conftest import Client

# At this scale the segment's 1200 s are 2.4 s of real time; a step's own Task timeout never fires before
# `lambda_runtime.TASK_TIMEOUT_FLOOR_SECONDS` of real time, so a step of 3.5 s overruns the segment, not itself.
SCALE = 0.002
SLOW_SECONDS = 3.5


@pytest.fixture
def small_scale(platform: LocalPlatform) -> Iterator[None]:
    assert SLOW_SECONDS < lambda_runtime.TASK_TIMEOUT_FLOOR_SECONDS
    assert limits.OCR_INDEX_SEGMENT_SECONDS * SCALE < SLOW_SECONDS
    before = platform.time_scale
    platform.set_time_scale(SCALE)
    yield
    platform.set_time_scale(before)


def test_a_segment_that_overruns_fails_the_job_with_its_name(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any], small_scale: None
) -> None:
    invoked: list[str] = []

    def slow_planning(invocation: Any, call_next: Any) -> Any:
        event = invocation.event if isinstance(invocation.event, dict) else {}
        if isinstance(event.get("step"), str):
            invoked.append(event["step"])
        if event.get("step") == "plan_ocr":
            time.sleep(SLOW_SECONDS)
        return call_next()

    body = {**sample_request, "deadline_seconds": limits.MAX_DEADLINE_SECONDS}  # the job's own deadline is scaled too
    with lambda_runtime.middleware(slow_planning):
        job_id = alpha.submit(body)
        job = alpha.wait(job_id, timeout=90)
        time.sleep(SLOW_SECONDS)  # the cut-off step's invocation ends meanwhile: nothing after the segment runs
    assert job["status"] == "failed", job
    error = job["error"]
    assert error["kind"] == "timeout" and error["error"] == "SegmentTimedOut", error
    assert error["detail"] == {"segment": "ocr_and_index", "timeout_seconds": limits.OCR_INDEX_SEGMENT_SECONDS}
    events = alpha.events(job_id)
    (timed_out,) = [e for e in events if e["type"] == "segment_timed_out"]
    assert timed_out["detail"]["segment"] == "ocr_and_index" and timed_out["detail"]["on_timeout"] == "fail"
    failed = [e for e in events if e["type"] == "job_failed"]
    assert len(failed) == 1 and failed[0]["detail"]["segment"] == "ocr_and_index"
    assert "plan_ocr" in invoked and not {"retrieve_passages", "draft_answer"} & set(invoked), invoked
