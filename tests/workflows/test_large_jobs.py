"""Scenario: a job with more documents than an inline Map carries runs its per-document parsing as a Distributed Map.

120 small documents (above `INLINE_MAP_MAX_ITEMS`, three manifest batches): the job completes, its own execution
history stays small (the batches' child executions keep theirs), its progress counts documents, a fault addressed to a
document index fails exactly that document, and a replay reruns only the failed documents.
"""

from __future__ import annotations

from typing import Any

from local.platform import LocalPlatform
from longhaul.core import limits
from tests.faults.helpers import DOCUMENT_ANALYSIS, dead_letters
from tests.workflows.conftest import Client

DOCUMENTS = 120
FAILING = (17, 45, 90)


def _request(documents: int) -> dict[str, Any]:
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "Which supplier caps the liability for service 7?",
            "documents": [
                {
                    "name": f"contract-{n + 1:04d}.txt",
                    "text": f"Contract {n + 1}. The supplier caps the liability for service {n % 10} at {n} euros.",
                }
                for n in range(documents)
            ],
        },
    }


def _started(events: list[dict[str, Any]], step: str) -> list[int]:
    return sorted(e["item"] for e in events if e["type"] == "step_started" and e["step"] == step)


def test_a_job_above_the_inline_threshold_parses_per_document_and_replays_only_the_failed_documents(
    platform: LocalPlatform, alpha: Client, inject
):
    assert DOCUMENTS > limits.INLINE_MAP_MAX_ITEMS
    ops = Client(platform, "ops")
    # Given 120 documents, three of which fail to parse every time
    inject(",".join(f"parse_documents#{n}=invalid-input" for n in FAILING))
    job_id = alpha.submit(_request(DOCUMENTS))

    # Then the job fails once, after every other document was parsed
    job = alpha.wait(job_id, timeout=300)
    assert job["status"] == "failed", job
    assert job["error"]["step"] == "parse_documents" and job["error"]["items"] == list(FAILING)
    assert job["progress"]["unit"] == "documents"
    assert job["progress"]["total"] == DOCUMENTS and job["progress"]["completed"] == DOCUMENTS - len(FAILING)
    done = DOCUMENTS - len(FAILING)
    assert job["progress"]["message"] == f"failed: {done} of {DOCUMENTS} documents done (at parse_documents)"
    first = alpha.events(job_id)
    assert _started(first, "parse_documents") == list(range(DOCUMENTS)), "each document once, in its own item"
    # And each failed document has its own dead letter, naming it
    letters = dead_letters(platform, "parse_documents", job_id, expect=len(FAILING))
    assert sorted((m["item"], m["item_name"]) for m in letters) == [(n, f"contract-{n + 1:04d}.txt") for n in FAILING]
    # And the parent execution's history grew by the batches, not by the documents
    history = platform.execution_history(DOCUMENT_ANALYSIS, job_id)
    assert len(history) < 200, len(history)
    print(f"parent execution history: {len(history)} events for {DOCUMENTS} documents")

    # When the cause is fixed and an operator replays from parse_documents
    inject("")
    response = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"from_step": "parse_documents", "reason": "fixed parser"})
    assert response.status_code == 202, response.text
    replay = response.json()
    assert replay["rerun_items"] == {"parse_documents": list(FAILING)}
    assert [(n["item"], n["unit"], n["name"]) for n in replay["rerun_named"]] == [
        (n, "document", f"contract-{n + 1:04d}.txt") for n in FAILING
    ]

    # Then only those three documents are parsed again, and the job completes
    job = alpha.wait(job_id, timeout=300)
    assert job["status"] == "completed", job
    events = alpha.events(job_id)
    replayed_at = max(i for i, e in enumerate(events) if e["type"] == "job_replayed")
    assert _started(events[replayed_at:], "parse_documents") == list(FAILING)
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert len(result["documents"]) == DOCUMENTS
    assert dead_letters(platform, "parse_documents", job_id) == []
