"""Comparing a recorded job with a new run of it (`local.recording.differences`): a change is named by its step and
the path of the field inside the step's output (through the artifacts the output names), a missing step is one
difference, and equal runs have none."""

from __future__ import annotations

import copy

import pytest

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


def test_a_prompt_carrying_its_runs_ids_is_answered_in_another_run_with_that_runs_ids(tmp_path) -> None:
    """An agent's prompt names its job's artifacts and effects (`job_…`, `op_…`): recorded under its masked key, it is
    answered in another run, whose ids differ, with that run's ids put back; a prompt that differs otherwise is not."""
    import json

    from longhaul.adapters.models.recording import Fixtures, ReplayModel, apply_mask, masked
    from longhaul.core.errors import InternalError
    from longhaul.core.llm import ModelRequest, ModelResponse, Usage

    def asked(job: str, op: str, vendor: str = "Orion") -> ModelRequest:
        prompt = f"Draft for {vendor}: read work/{job}/draft.json; sent as {op}."
        return ModelRequest(task="agent", system="s", prompt=prompt, context={})

    first = asked("job_" + "a" * 28, "op_" + "1" * 24)
    key, mask = masked(first)
    answer = '{"final": {"draft_key": "work/job_' + "a" * 28 + '/draft.json", "operation_id": "op_' + "1" * 24 + '"}}'
    response = ModelResponse(text=apply_mask(answer, mask), usage=Usage(input_tokens=1, output_tokens=1),
                             model_id="m", stop_reason="end_turn")  # fmt: skip
    (tmp_path / "calls.json").write_text(json.dumps({key: {"task": "agent", "response": response.model_dump()}}))
    replay = ReplayModel("m", Fixtures(tmp_path / "calls.json"))

    again = replay.generate(asked("job_" + "b" * 28, "op_" + "2" * 24))

    assert json.loads(again.text)["final"] == {
        "draft_key": f"work/job_{'b' * 28}/draft.json",
        "operation_id": "op_" + "2" * 24,
    }
    with pytest.raises(InternalError):
        replay.generate(asked("job_" + "b" * 28, "op_" + "2" * 24, vendor="Vega"))
