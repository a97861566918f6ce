"""Every recorded job runs again against the current code with its recorded model answers, and produces what it
produced when it was recorded: each step's output, field by field, and its result. A difference fails naming the
step and field; an intended change is accepted by recording again (`make record`)."""

from __future__ import annotations

import pytest

from local.platform import LocalPlatform
from local.recording import RECORDINGS, Recording, differences, reader, record, recordings, run_job
from longhaul.workflows import REGISTRY

MAX_LISTED = 10


@pytest.mark.parametrize("recording", recordings(RECORDINGS), ids=lambda r: r.name)
def test_a_recorded_job_produces_what_it_recorded(replaying: LocalPlatform, recording: Recording) -> None:
    job, job_reader = recording.run(replaying)

    assert job["status"] == "completed", (
        f"{recording.name}: the job ended {job['status']} at step {(job.get('error') or {}).get('step')}: "
        f"{(job.get('error') or {}).get('message')} (a changed model request has no recorded answer: "
        "if the change is intended, record again with `make record`)"
    )
    order = REGISTRY[recording.request["workflow"]].step_names
    changed = differences(recording.expected, job_reader.snapshot(), order)
    listed = "\n".join(f"  {d}" for d in changed[:MAX_LISTED])
    more = f"\n  … and {len(changed) - MAX_LISTED} more" if len(changed) > MAX_LISTED else ""
    assert not changed, (
        f"{recording.name}: the job's output changed ({len(changed)} fields); if intended, record again with "
        f"`make record`:\n{listed}{more}"
    )


def test_a_changed_step_fails_the_replay_naming_it_and_passes_once_recorded_again(
    replaying: LocalPlatform, recorded: list[Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the recorded document-analysis job, and a change to its last step: the result lists its citations in
    # another order
    from longhaul.workflows.document_analysis import analysis

    recording = next(r for r in recorded if r.request["workflow"] == "document-analysis")
    order = REGISTRY["document-analysis"].step_names
    unique = analysis.unique_citations
    monkeypatch.setattr(analysis, "unique_citations", lambda claims: list(reversed(unique(claims))))

    # When it runs again, then is recorded again (the change accepted), then runs once more
    changed = differences(
        recording.expected, reader(replaying, run_job(replaying, recording.request)["job_id"]).snapshot(), order
    )
    again = record(replaying, recording.name, recording.request)
    after = differences(
        again.expected, reader(replaying, run_job(replaying, recording.request)["job_id"]).snapshot(), order
    )

    # Then the replay named the step and the fields that changed, and after recording again nothing differs
    # (the draft's provisional result lists its citations alike)
    assert changed and {d.step for d in changed} == {"draft_answer", "publish_result", "result"}
    assert str(changed[0]).startswith("step draft_answer, field provisional_key.content.citations[0].")
    assert any(str(d).startswith("step publish_result, field result_key.content.citations[0].") for d in changed)
    assert after == []
