"""Repair on the local platform: a job that failed on a wrong document reference has its input fixed by an operator,
is replayed from the first step the fix invalidated, and completes on the fixed input."""

from __future__ import annotations

import json
from typing import Any

import requests

from local.platform import LocalPlatform
from tests.faults.helpers import assert_consistent
from tests.workflows.conftest import Client

NOT_A_PDF = b"%PDF-1.7\nthis upload is not the contract: its bytes are no PDF at all\n"


def upload(client: Client, name: str, media_type: str, data: bytes) -> str:
    ticket = client.post("/v1/uploads", {"filename": name, "media_type": media_type}).json()
    put = requests.put(ticket["upload_url"], data=data, headers=ticket["headers"], timeout=30)
    assert put.status_code == 200, put.text
    return str(ticket["upload_id"])


def test_a_job_that_failed_on_a_wrong_document_is_fixed_and_replayed_from_the_first_invalidated_step(
    platform: LocalPlatform, alpha: Client, ops: Client, sample_request: dict[str, Any]
) -> None:
    # Given a job whose second document names the wrong upload (bytes no parser reads): it fails parsing it
    letter = sample_request["input"]["documents"][1]
    wrong = upload(alpha, "supplier_letter.pdf", "application/pdf", NOT_A_PDF)
    documents = [sample_request["input"]["documents"][0], {"name": letter["name"], "upload_id": wrong}]
    job_id = alpha.submit({**sample_request, "input": {**sample_request["input"], "documents": documents}})
    failed = alpha.wait(job_id)
    assert failed["status"] == "failed" and failed["error"]["step"] == "parse_documents", failed

    # When an operator points it at the right upload (a merge patch of the documents, sent as one)
    right = upload(alpha, letter["name"], "text/plain", letter["text"].encode())
    current = ops.get(f"/v1/ops/jobs/{job_id}/input").json()
    fixed_documents = current["input"]["documents"]
    fixed_documents[1] = {"name": letter["name"], "upload_id": right, "media_type": "text/plain"}
    fixed = requests.patch(
        f"{platform.api_url}/v1/ops/jobs/{job_id}/input",
        data=json.dumps({"patch": {"documents": fixed_documents}, "reason": "the tenant uploaded the wrong letter"}),
        headers={**ops.headers, "Content-Type": "application/merge-patch+json"},
        timeout=30,
    )
    assert fixed.status_code == 200, fixed.text
    assert fixed.json()["invalidated_steps"] == ["list_documents", "plan_ocr"]

    # and replays it without naming a step
    replay = ops.post(f"/v1/ops/jobs/{job_id}/replay", {"reason": "input fixed"})

    # Then the replay starts at the first invalidated step, reads the fixed input and the job completes
    assert replay.status_code == 202, replay.text
    assert replay.json()["from_step"] == "list_documents" and replay.json()["input_version"] == 2
    job = alpha.wait(job_id)
    assert job["status"] == "completed" and job["input_version"] == 2, job
    result = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert [d["name"] for d in result["documents"]] == [documents[0]["name"], letter["name"]]
    assert {d["media_type"] for d in result["documents"] if d["name"] == letter["name"]} == {"text/plain"}
    events = alpha.events(job_id)
    assert_consistent(events)
    fix = next(e for e in events if e["type"] == "input_fixed")
    assert fix["detail"]["by"] == "ops" and fix["detail"]["reason"] == "the tenant uploaded the wrong letter"
    assert [c["path"] for c in fix["detail"]["diff"]] == ["documents/1/upload_id", "documents/1/media_type"]
    after = events[max(i for i, e in enumerate(events) if e["type"] == "job_replayed") :]
    assert next(e["step"] for e in after if e["type"] == "step_started") == "list_documents"

    # And an escalation (published to the alarm topic with the operator function's own grants) is on the job
    escalated = ops.post(f"/v1/ops/jobs/{job_id}/escalate", {"note": "uploads of the wrong type pass the intake"})
    assert escalated.status_code == 200, escalated.text
    assert alpha.get(f"/v1/jobs/{job_id}").json()["escalation"]["note"] == "uploads of the wrong type pass the intake"
    published = [json.loads(sent[1]) for sent in alarm_notifications()]
    assert [(p["job_id"], p["escalation"]["note"]) for p in published if p["job_id"] == job_id] == [
        (job_id, "uploads of the wrong type pass the intake")
    ]


def alarm_notifications() -> list[tuple[Any, ...]]:
    """What the in-memory SNS keeps of every message published to a topic (the stack has one: its alarm topic)."""
    from moto.sns.models import sns_backends

    return [
        sent
        for regions in sns_backends.values()
        for backend in regions.values()
        for topic in backend.topics.values()
        for sent in topic.sent_notifications
    ]
