"""Comparing a recorded job with a new run of it (`local.recording.differences`): a change is named by its step and
the path of the field inside the step's output (through the artifacts the output names), a missing step is one
difference, and equal runs have none."""

from __future__ import annotations

import copy

from local.recording import Difference, Snapshot, differences

RECORDED = Snapshot(
    steps={
        "draft_answer": {
            "draft_key": {
                "key": "work/{job}/draft_answer/draft.json",
                "content": {"answer": "The cap is 12 months of fees.", "claims": [{"text": "cap", "pages": [3]}]},
            }
        },
        "extract_evidence#0": {"evidence_key": "work/{job}/extract_evidence/0.json"},
    },
    result={"answer": "The cap is 12 months of fees.", "citations": 2},
)


def test_equal_runs_have_no_difference() -> None:
    assert differences(RECORDED, copy.deepcopy(RECORDED)) == []


def test_a_changed_field_is_named_by_its_step_and_path() -> None:
    now = copy.deepcopy(RECORDED)
    now.steps["draft_answer"]["draft_key"]["content"]["claims"][0]["pages"] = [4]
    now.result["citations"] = 1

    found = differences(RECORDED, now)

    assert found == [
        Difference("draft_answer", "draft_key.content.claims[0].pages[0]", 3, 4),
        Difference("result", "citations", 2, 1),
    ]
    assert str(found[0]) == "step draft_answer, field draft_key.content.claims[0].pages[0]: recorded 3, now 4"


def test_a_step_or_item_that_no_longer_runs_or_now_runs_is_one_difference() -> None:
    now = Snapshot(
        steps={"draft_answer": RECORDED.steps["draft_answer"], "extract_evidence#1": {}}, result=RECORDED.result
    )

    found = differences(RECORDED, now)

    assert [(d.step, d.field) for d in found] == [("extract_evidence#0", ""), ("extract_evidence#1", "")]
    assert "(the whole output)" in str(found[0])
