"""Search the local AWS for strings: every table's items, every bucket's objects (every version), every queue's
visible messages and every log group's events. What an erasure is checked with (`tests/workflows/test_erasure.py`,
`bench/erasure.py`): after a job's erasure, its marker and its id must be found nowhere but where they may stay.

`Place.allowed` says where a job's id may stay after its erasure (never content): its tombstone (the job's item with
`erased_at`), the audit trail's entries (who erased which job: the target path and the job's id), and the usage day
files (`analytics-daily/`: the billing rows, ids and costs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

AUDIT_PARTITION = "AUDIT"
BILLING_PREFIXES = ("analytics-daily/",)


@dataclass(frozen=True)
class Place:
    """Where a needle was found: `kind` (dynamodb, s3, sqs, logs), the container, and the item's key or object key."""

    kind: str
    container: str
    key: str
    needle: str
    keeps_ids: bool  # a tombstone, an audit entry or a billing row: may hold a job's id (never its content)

    def __str__(self) -> str:
        return f"{self.kind} {self.container} {self.key}: {self.needle}"


def search(client: Any, needles: tuple[str, ...]) -> Iterator[Place]:
    """Every place of the local AWS where one of `needles` occurs; `client(service)` makes a boto3 client of it."""
    dynamodb = client("dynamodb")
    for table in dynamodb.list_tables()["TableNames"]:
        for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            for item in page["Items"]:
                text = json.dumps(item)
                pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
                keeps = (sk == "JOB" and "erased_at" in item) or pk == AUDIT_PARTITION
                yield from (Place("dynamodb", table, f"{pk}/{sk}", n, keeps) for n in needles if n in text)
    s3 = client("s3")
    for bucket in (b["Name"] for b in s3.list_buckets()["Buckets"]):
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for version in page.get("Versions", []):
                key = version["Key"]
                body = s3.get_object(Bucket=bucket, Key=key, VersionId=version["VersionId"])["Body"].read()
                text = key + body.decode("utf-8", "replace")
                keeps = key.startswith(BILLING_PREFIXES)
                yield from (Place("s3", bucket, key, n, keeps) for n in needles if n in text)
    sqs = client("sqs")
    for url in sqs.list_queues().get("QueueUrls", []):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
        yield from (Place("sqs", url, m["MessageId"], n, False) for m in messages for n in needles if n in m["Body"])
    logs = client("logs")
    for group in logs.describe_log_groups().get("logGroups", []):
        name = group["logGroupName"]
        for event in logs.filter_log_events(logGroupName=name).get("events", []):
            yield from (
                Place("logs", name, str(event.get("timestamp")), n, False) for n in needles if n in event["message"]
            )


def left_after_erasure(client: Any, *, markers: tuple[str, ...], job_ids: tuple[str, ...]) -> list[str]:
    """Where a marker (content) is found anywhere, or a job's id anywhere but its tombstone, the audit trail and the
    billing rows: an erasure leaves this empty."""
    return [
        str(place) for place in search(client, (*markers, *job_ids)) if place.needle in markers or not place.keeps_ids
    ]
