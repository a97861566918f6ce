"""The honest ETA (`longhaul.core.eta`, `Job.view`) and the history it comes from (`storage/history.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from longhaul.core.contracts import JobStatus
from longhaul.core.eta import HISTORY_JOBS, EtaSnapshot, HistoryEntry, StepTiming, estimate, snapshot
from longhaul.core.records import FanOut, Job, StepRecord
from longhaul.storage.history import HistoryStore, entry_of

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# A workflow of four steps: a plain step, a fan-out over documents, a review, a plain step.
STEPS = [("list", False), ("parse", True), ("review", False), ("publish", False)]


def entry(job: int, *, size: int = 10, parse_ms: int = 20_000, review_ms: int = 60_000, cls: str = "standard"):
    return HistoryEntry(
        job_id=f"job_{job}",
        sla_class=cls,
        size=size,
        finished_at=NOW,
        steps=[
            StepTiming(step="list", ms=1_000),
            StepTiming(step="parse", ms=parse_ms, items=size),
            StepTiming(step="review", ms=review_ms),
            StepTiming(step="publish", ms=2_000),
        ],
    )


def test_history_medians_are_per_item_and_scale_to_this_jobs_size() -> None:
    # Given three jobs of 10 documents, 2 s a document (one outlier at 10 s a document)
    entries = [entry(1), entry(2), entry(3, parse_ms=100_000)]

    # When a job of 40 documents takes its snapshot
    snap = snapshot(STEPS, entries, sla_class="standard", size=40)

    # Then its parse step is the median pace (2 s a document) times its own 40 documents
    parse = snap.steps[1]
    assert (snap.jobs, parse.ms_per_item, parse.items) == (3, 2_000, 10)
    assert snap.expected_items(parse) == 40
    assert snap.step_seconds(parse) == 80
    # and the whole job: 1 + 80 + 60 (the review's typical wait) + 2 s
    assert snap.total_seconds() == 143


def test_the_jobs_own_class_is_preferred_when_it_has_history() -> None:
    entries = [entry(1, review_ms=600_000, cls="batch"), entry(2, review_ms=10_000, cls="interactive")]

    assert snapshot(STEPS, entries, sla_class="interactive", size=10).steps[2].ms_per_item == 10_000
    assert snapshot(STEPS, entries, sla_class="standard", size=10).jobs == 2  # none of its own: every class's


def test_in_a_fan_out_the_eta_is_the_items_left_plus_the_steps_ahead_including_the_review_wait() -> None:
    snap = snapshot(STEPS, [entry(1), entry(2)], sla_class="standard", size=10)

    # 4 of 10 documents parsed: 6 left at 2 s, then the review's 60 s and publishing's 2 s
    found = estimate(
        snap,
        now=NOW,
        current_step="parse",
        started_at=NOW - timedelta(seconds=100),
        step_started_at=NOW - timedelta(seconds=8),
        items_done=4,
        items_total=10,
    )

    assert found == (12 + 60 + 2, "history")


def test_while_waiting_for_review_the_eta_is_the_rest_of_its_typical_wait() -> None:
    snap = snapshot(STEPS, [entry(1)], sla_class="standard", size=10)

    found = estimate(
        snap,
        now=NOW,
        current_step="review",
        started_at=NOW - timedelta(minutes=5),
        step_started_at=NOW - timedelta(seconds=45),
    )

    assert found == (15 + 2, "history")


def test_without_history_the_eta_covers_every_step_ahead_at_the_jobs_own_pace() -> None:
    snap = snapshot(STEPS, [], sla_class="standard", size=10)

    # 100 s into the job, its first step took 90 s; 1 of 100 documents parsed in the 10 s the fan-out has run
    found = estimate(
        snap,
        now=NOW,
        current_step="parse",
        started_at=NOW - timedelta(seconds=100),
        step_started_at=NOW - timedelta(seconds=10),
        items_done=1,
        items_total=100,
    )

    # the fan-out's own pace for its 99 items left, 90 s for each of the 2 steps ahead; never the job's elapsed time
    # over the fan-out's fraction (100 s / 1% = 9,900 s)
    assert found == (990 + 180, "current_step")


def test_a_job_view_reads_its_eta_from_its_own_record_only() -> None:
    snap = snapshot(STEPS, [entry(1), entry(2)], sla_class="standard", size=10)
    job = _job(status=JobStatus.RUNNING, eta=snap, current_step="parse", items_done={"parse": 5})

    progress = job.view(now=NOW).progress

    assert (progress.eta_seconds, progress.eta_basis) == (10 + 62, "history")
    assert progress.estimated_finish_at == NOW + timedelta(seconds=72)
    # a finished job has none
    assert _job(status=JobStatus.COMPLETED, eta=snap).view(now=NOW).progress.eta_seconds is None


def test_a_completed_jobs_steps_join_its_workflows_history_once_keeping_the_recent_ones(table: Any) -> None:
    store = HistoryStore(table)
    records = [
        _record("list", None, 0, 1),
        *(_record("parse", i, 1, 3 + i) for i in range(4)),
        _record("review", None, 7, 9),
        _record("publish", None, 9, 10),
    ]
    added = entry_of("job_a", "standard", 4, NOW, [s for s, _ in STEPS], dict(STEPS), records)

    assert [(t.step, t.ms, t.items) for t in added.steps] == [
        ("list", 1_000, 1),
        ("parse", 6_000, 4),  # from its first item's start to the next step's start (the gap between is its own)
        ("review", 2_000, 1),
        ("publish", 1_000, 1),
    ]
    assert store.record("wf", added) and store.record("wf", added)
    assert [e.job_id for e in store.entries("wf")] == ["job_a"]
    for n in range(HISTORY_JOBS + 3):
        store.record("wf", entry(n))
    kept = store.entries("wf")
    assert len(kept) == HISTORY_JOBS and kept[-1].job_id == f"job_{HISTORY_JOBS + 2}"


def _record(step: str, item: int | None, start: int, end: int) -> StepRecord:
    return StepRecord(
        step=step,
        item=item,
        status="succeeded",
        started_at=NOW + timedelta(seconds=start),
        finished_at=NOW + timedelta(seconds=end),
    )


def _job(*, status: JobStatus, eta: EtaSnapshot, current_step: str | None = None, **fields: Any) -> Job:
    return Job.model_validate(
        {
            "job_id": "job_x",
            "tenant_id": "t",
            "workflow": "wf",
            "status": status,
            "version": 1,
            "event_seq": 1,
            "input_key": "k",
            "payload_hash": "h",
            "model": "m",
            "estimated_sla_seconds": 10,
            "created_at": NOW - timedelta(minutes=1),
            "updated_at": NOW,
            "started_at": NOW - timedelta(minutes=1),
            "step_started_at": NOW - timedelta(seconds=5),
            "execution_name": "job_x",
            "current_step": current_step,
            "eta": eta,
            "fan_out": FanOut(step="parse", total=10, unit="document") if current_step == "parse" else None,
            "progress": {"completed": 0, "total": 10, "unit": "items"},
            **fields,
        }
    )
