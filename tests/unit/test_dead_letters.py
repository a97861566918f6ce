"""The dead-letter adapter (`longhaul.adapters.dead_letters.QueueDeadLetters`) against moto's DynamoDB and SQS: the
index operators list (newest first, filtered), and a purge that removes a job's letters and only its messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from longhaul.adapters.dead_letters import QueueDeadLetters
from longhaul.core.contracts import DeadLetter
from tests.unit.aws_env import REGION

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def letter(
    job_id: str, step: str = "parse_documents", *, item: int | None = None, minutes: int = 0, **fields: Any
) -> DeadLetter:
    values: dict[str, Any] = {
        "job_id": job_id,
        "tenant_id": "tenant-a",
        "workflow": "document-analysis",
        "step": step,
        "item": item,
        "error": "InvalidInputError",
        "kind": "invalid-input",
        "message": "document 1 is not a readable PDF",
        "attempts": 1,
        "failed_at": T0 + timedelta(minutes=minutes),
        "replay": {"method": "POST", "path": f"/v1/ops/jobs/{job_id}/replay"},
        **fields,
    }
    return DeadLetter.model_validate(values)


@pytest.fixture
def sqs(aws: None) -> Any:
    return boto3.client("sqs", region_name=REGION)


@pytest.fixture
def queues(sqs: Any) -> dict[str, str]:
    return {
        step: sqs.create_queue(QueueName=f"dlq-{step}")["QueueUrl"] for step in ("parse_documents", "extract_evidence")
    }


@pytest.fixture
def letters(table: Any, sqs: Any, queues: dict[str, str]) -> QueueDeadLetters:
    return QueueDeadLetters(table, sqs, {"document-analysis": queues})


def send(sqs: Any, queue: str, dead: DeadLetter) -> None:
    """What the state machine does besides calling the recorder: the letter to the step's queue."""
    sqs.send_message(QueueUrl=queue, MessageBody=dead.model_dump_json())


def queued_jobs(sqs: Any, queue: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
    return sorted(json.loads(m["Body"]).get("job_id", "?") for m in messages)


def test_a_recorded_letter_reads_back_as_it_was(letters: QueueDeadLetters) -> None:
    dead = letter("job_1", "extract_evidence", item=3, execution="exec-1", trace_id="t-1")

    letters.record(dead)

    assert letters.of_job("job_1") == [dead]
    assert letters.of_job("job_2") == []


def test_recording_the_same_step_and_item_again_keeps_one_letter(letters: QueueDeadLetters) -> None:
    letters.record(letter("job_1", attempts=1))
    letters.record(letter("job_1", attempts=2, minutes=5))

    [kept] = letters.of_job("job_1")
    assert kept.attempts == 2
    assert [d.attempts for d in letters.find()] == [2]


def test_find_is_newest_first_and_filters_by_step_workflow_and_tenant(letters: QueueDeadLetters) -> None:
    letters.record(letter("job_1", minutes=1))
    letters.record(letter("job_2", "extract_evidence", item=0, minutes=3))
    letters.record(letter("job_3", minutes=2, tenant_id="tenant-b"))
    letters.record(letter("job_4", minutes=4, workflow="invoice-reconciliation"))

    assert [d.job_id for d in letters.find()] == ["job_4", "job_2", "job_3", "job_1"]
    assert [d.job_id for d in letters.find(limit=2)] == ["job_4", "job_2"]
    assert [d.job_id for d in letters.find(step="parse_documents")] == ["job_4", "job_3", "job_1"]
    assert [d.job_id for d in letters.find(workflow="document-analysis")] == ["job_2", "job_3", "job_1"]
    assert [d.job_id for d in letters.find(tenant="tenant-b")] == ["job_3"]
    assert [d.job_id for d in letters.find(step="extract_evidence", tenant="tenant-b")] == []


def test_purge_removes_the_jobs_letters_and_only_its_messages(
    letters: QueueDeadLetters, sqs: Any, queues: dict[str, str]
) -> None:
    # Given job_1 with letters on two steps' queues, and job_2 with one on the same queue
    mine = [letter("job_1"), letter("job_1", "extract_evidence", item=0), letter("job_1", "extract_evidence", item=4)]
    other = letter("job_2", minutes=1)
    for dead in [*mine, other]:
        letters.record(dead)
        send(sqs, queues[dead.step], dead)

    # When job_1's letters are purged
    removed = letters.purge("job_1")

    # Then its three messages are gone from the queues and its letters from the index; job_2's stay, visible
    assert removed == 3
    assert letters.of_job("job_1") == []
    assert [d.job_id for d in letters.find()] == ["job_2"]
    assert queued_jobs(sqs, queues["parse_documents"]) == ["job_2"]
    assert queued_jobs(sqs, queues["extract_evidence"]) == []


def test_purging_a_job_without_letters_removes_nothing(
    letters: QueueDeadLetters, sqs: Any, queues: dict[str, str]
) -> None:
    other = letter("job_2")
    letters.record(other)
    send(sqs, queues[other.step], other)

    assert letters.purge("job_1") == 0

    assert queued_jobs(sqs, queues["parse_documents"]) == ["job_2"]
    assert letters.of_job("job_2") == [other]
