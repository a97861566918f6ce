"""Faults in a grouped fan-out (the documents' parse: small documents run in groups, one invocation per group): each
document is still its own item — its fault index, retries, failure, dead letter and replay."""

from __future__ import annotations

from typing import Any

from local.platform import LocalPlatform
from tests.faults.helpers import artifacts, assert_consistent, dead_letters
from tests.workflows.conftest import Client

STEP = "parse_documents"


def _body(documents: int) -> dict[str, Any]:
    texts = [f"Clause {n}: the supplier's liability cap is {n + 1} million euros." for n in range(documents)]
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "What is the liability cap?",
            "documents": [{"name": f"d{n}.txt", "text": text} for n, text in enumerate(texts)],
        },
    }


def _items(events: list[dict[str, Any]], kind: str) -> list[int]:
    return sorted(e["item"] for e in events if e["type"] == kind and e.get("step") == STEP)


def test_a_document_hanging_once_in_its_group_is_retried_and_each_document_commits_once(
    platform: LocalPlatform, alpha: Client, inject, fast_timeouts
):
    inject(f"{STEP}#2=hangx1")
    job_id = alpha.submit(_body(5))
    assert alpha.wait(job_id, timeout=180)["status"] == "completed"
    events = alpha.events(job_id)
    assert _items(events, "step_finished") == [0, 1, 2, 3, 4]
    # the documents before the hang committed in the group's first attempt and were not parsed again
    assert _items(events, "step_started") == [0, 1, 2, 3, 4]
    attempts = {e["item"]: e["attempt"] for e in events if e["type"] == "step_finished" and e.get("step") == STEP}
    assert attempts == {0: 1, 1: 1, 2: 2, 3: 2, 4: 2}
    assert_consistent(events)


def test_a_document_failing_in_its_group_fails_alone_and_a_replay_reruns_only_it(
    platform: LocalPlatform, alpha: Client, ops: Client, inject
):
    inject(f"{STEP}#1=invalid-input,{STEP}#3=transientx1")
    job_id = alpha.submit(_body(5))
    job = alpha.wait(job_id)
    assert job["status"] == "failed"
    error = job["error"]
    assert (error["step"], error["items"], error["kind"]) == (STEP, [1], "invalid-input"), error
    (letter,) = dead_letters(platform, STEP, job_id, expect=1)
    assert letter["item"] == 1 and letter["item_name"] == "d1.txt"
    events = alpha.events(job_id)
    assert _items(events, "step_finished") == [0, 2, 3, 4], "the other documents ran to the end (3 after a retry)"

    inject("")
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": STEP, "reason": "document fixed"})
    assert response.status_code == 202, response.text
    assert response.json()["rerun_items"] == {STEP: [1]}
    assert alpha.wait(job_id)["status"] == "completed"
    events = alpha.events(job_id)
    replayed = max(i for i, e in enumerate(events) if e["type"] == "job_replayed")
    assert _items(events[replayed:], "step_started") == [1]
    assert_consistent(events)


def test_a_crash_after_the_groups_object_is_written_and_a_duplicate_group_leave_one_object_and_the_same_answer(
    platform: LocalPlatform, alpha: Client, inject
):
    clean = alpha.wait(alpha.submit(_body(5)))
    assert clean["status"] == "completed"
    # the group's first item writes the group's object, then its process dies before it commits; and the group is
    # delivered twice
    inject(f"{STEP}#0=crash-after-side-effectx1,{STEP}#0=duplicatex1")
    job_id = alpha.submit(_body(5))
    assert alpha.wait(job_id, timeout=180)["status"] == "completed"
    events = alpha.events(job_id)
    assert _items(events, "step_finished") == [0, 1, 2, 3, 4], "each document committed once"
    parsed = [k for k in artifacts(platform, job_id) if "/parse_documents/" in k]
    assert parsed == [f"work/{job_id}/parse_documents/group-00000.json"], "one object for the group, whatever the tries"
    assert (
        alpha.get(f"/v1/jobs/{job_id}/result").json()["answer"]
        == alpha.get(f"/v1/jobs/{clean['job_id']}/result").json()["answer"]
    )
    assert_consistent(events)
