"""The fault spec of the local runtime: parsed strictly, fired as many times as asked, for each job."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from longhaul.core import faults as faults_module
from longhaul.core.errors import InvalidInputError, TransientError
from longhaul.core.faults import CrashFault, FaultInjector
from longhaul.workflows import REGISTRY

JOB = "job_1"


def test_a_counted_fault_fires_that_many_times_then_stops():
    faults = FaultInjector("draft_answer=transientx2")
    for _ in range(2):
        with pytest.raises(TransientError):
            faults.check("draft_answer", None, job_id=JOB)
    faults.check("draft_answer", None, job_id=JOB)
    faults.check("parse_documents", None, job_id=JOB)


def test_a_count_is_per_job_each_job_meets_the_fault_that_many_times():
    faults = FaultInjector("draft_answer=transientx2,parse_documents#1=invalid-inputx1")
    for job in ("job_a", "job_b"):  # one after the other: the first job does not use up the second's
        for _ in range(2):
            with pytest.raises(TransientError):
                faults.check("draft_answer", None, job_id=job)
        faults.check("draft_answer", None, job_id=job)
    with pytest.raises(TransientError):  # interleaved: a third job's count is its own too
        faults.check("draft_answer", None, job_id="job_c")
    faults.check("draft_answer", None, job_id="job_a")
    with pytest.raises(TransientError):
        faults.check("draft_answer", None, job_id="job_c")
    faults.check("draft_answer", None, job_id="job_c")
    for job in ("job_a", "job_b"):  # an item's count is the job's item's
        faults.check("parse_documents", 0, job_id=job)
        with pytest.raises(InvalidInputError):
            faults.check("parse_documents", 1, job_id=job)
        faults.check("parse_documents", 1, job_id=job)


def test_counts_are_exact_under_concurrent_attempts_of_many_jobs():
    faults = FaultInjector("draft_answer=transientx3")
    jobs = [f"job_{n}" for n in range(20)]

    def attempt(job: str) -> bool:
        try:
            faults.check("draft_answer", None, job_id=job)
        except TransientError:
            return True
        return False

    with ThreadPoolExecutor(max_workers=8) as pool:
        fired = list(pool.map(attempt, [job for job in jobs for _ in range(5)]))
    per_job = Counter(job for job, hit in zip([job for job in jobs for _ in range(5)], fired, strict=True) if hit)
    assert per_job == dict.fromkeys(jobs, 3)


def test_the_counts_kept_are_bounded_the_least_recently_faulted_job_forgotten(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(faults_module, "MAX_COUNTED_JOBS", 2)
    faults = FaultInjector("draft_answer=transientx1")
    for job in ("job_a", "job_b", "job_c"):
        with pytest.raises(TransientError):
            faults.check("draft_answer", None, job_id=job)
    faults.check("draft_answer", None, job_id="job_c")  # kept: it met its fault
    with pytest.raises(TransientError):  # forgotten: it meets its fault again
        faults.check("draft_answer", None, job_id="job_a")


def test_an_item_fault_fires_for_that_item_only_and_forever_without_a_count():
    faults = FaultInjector("extract_evidence#3=invalid-input")
    faults.check("extract_evidence", 2, job_id=JOB)
    for _ in range(3):
        with pytest.raises(InvalidInputError):
            faults.check("extract_evidence", 3, job_id=JOB)


def test_runtime_kinds_are_taken_by_the_runtime_not_raised_by_check():
    faults = FaultInjector("publish_result=duplicatex1,draft_answer=crash-after-side-effect")
    faults.check("publish_result", None, job_id=JOB)
    assert faults.take("publish_result", None, ("duplicate",), job_id=JOB) == "duplicate"
    assert faults.take("publish_result", None, ("duplicate",), job_id=JOB) is None
    with pytest.raises(CrashFault) as crash:
        faults.crash_point("draft_answer", None, job_id=JOB)
    assert crash.value.error_type == "Runtime.ExitError"


@pytest.mark.parametrize("spec", ["draft_answer", "draft_answer=explode", "Draft=transient", "x#y=transient"])
def test_a_bad_spec_is_rejected_with_the_expected_form(spec):
    with pytest.raises(ValueError, match=r"<step>\[#<item>\]=<kind>"):
        FaultInjector(spec)


def test_an_unknown_step_or_an_item_of_a_step_without_items_is_rejected():
    """Checked against the deployed steps (the registry), as the local runtime does with LONGHAUL_FAULTS."""
    with pytest.raises(ValueError, match=r"unknown step 'draft_answers'.*draft_answer"):
        FaultInjector("draft_answers=transient", REGISTRY)
    with pytest.raises(ValueError, match="only fan-out steps have items"):
        FaultInjector("draft_answer#2=transient", REGISTRY)
