"""What the fault scenarios assert about a job's end state."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from local.deploy import wait_until
from local.platform import LocalPlatform

TERMINAL = {"completed", "failed", "cancelled", "expired"}
# The workflow the fault scenarios run, as its resources' logical ids spell it (`Workflows/DocumentAnalysis/...`).
DOCUMENT_ANALYSIS = "DocumentAnalysis"


def assert_consistent(events: list[dict[str, Any]]) -> None:
    """Sequence numbers are unique and ordered; a finished job never runs again except through a replay;
    no (step, item) commits twice within one attempt."""
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "events are duplicated or out of order"
    finished = False
    commits: Counter[tuple[str, int | None, int]] = Counter()
    attempt = 1
    for event in events:
        if event["type"] == "job_replayed":
            finished, attempt = False, event["detail"]["attempt"]
            continue
        status = event.get("status")
        if finished and status is not None:
            raise AssertionError(f"status moved after the job finished: {event}")
        if status in TERMINAL:
            finished = True
        if event["type"] == "step_finished":
            commits[(event["step"], event.get("item"), attempt)] += 1
    repeated = {k: n for k, n in commits.items() if n > 1}
    assert not repeated, f"steps committed twice: {repeated}"


def dead_letters(
    platform: LocalPlatform, step: str, job_id: str, *, expect: int = 0, workflow: str = DOCUMENT_ANALYSIS
) -> list[dict[str, Any]]:
    """The messages for `job_id` in `step`'s dead-letter queue of `workflow` (left visible for other readers).

    The job is marked failed a moment before its dead letter is sent: with `expect`, wait for that many."""
    if expect:
        wait_until(lambda: True if len(_read(platform, workflow, step, job_id)) >= expect else None, timeout=15)
    return _read(platform, workflow, step, job_id)


def _read(platform: LocalPlatform, workflow: str, step: str, job_id: str) -> list[dict[str, Any]]:
    sqs = platform.client("sqs")
    fragment = (workflow + step.replace("_", "") + "dlq").lower()  # workflows share step names, not queues
    queue = next(url for lid, url in platform.deployment.queues.items() if fragment in lid.lower())
    found = []
    for _ in range(5):
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
        found.extend(json.loads(m["Body"]) for m in messages)
        if len(messages) < 10:
            break
    unique = {(m["job_id"], m["step"], m.get("item"), m["failed_at"]): m for m in found}
    return [m for m in unique.values() if m["job_id"] == job_id]


def artifacts(platform: LocalPlatform, job_id: str) -> dict[str, tuple[str, Any]]:
    """Every artifact of a job: key → (ETag, LastModified)."""
    s3 = platform.client("s3")
    bucket = platform.deployment.bucket_name
    listed: dict[str, tuple[str, Any]] = {}
    for prefix in (f"work/{job_id}/", f"results/{job_id}/"):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                listed[obj["Key"]] = (obj["ETag"], obj["LastModified"])
    return listed


def charges(platform: LocalPlatform, job_id: str) -> list[dict[str, Any]]:
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    response = table.query(
        KeyConditionExpression="pk = :pk AND begins_with(sk, :c)",
        ExpressionAttributeValues={":pk": f"JOB#{job_id}", ":c": "CHARGE#"},
    )
    return list(response["Items"])


def step_records(platform: LocalPlatform, job_id: str) -> list[dict[str, Any]]:
    """The job's step (and fan-out item) records, as stored."""
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    response = table.query(
        KeyConditionExpression="pk = :pk AND begins_with(sk, :s)",
        ExpressionAttributeValues={":pk": f"JOB#{job_id}", ":s": "STEP#"},
        ConsistentRead=True,
    )
    return list(response["Items"])
