"""Erasure in the table, the bucket and the queues: each deletion of one store of a job's data, and the tombstone.

Every deletion is idempotent (what is gone is not counted again) and counts what it deleted. Objects are deleted
with every version and delete marker (the artifacts bucket is versioned: a plain DELETE would only hide them).
The tombstone is the job's own item: `begin` marks it erasing (`erased_at`, out of every listing, on the by_state
index's `ERASURE#pending` partition, which the sweep reads); `record` adds a store's count as each is done; `finish`
replaces the item by the tombstone alone (usage and cost, the `job_erased` event).
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.erasure import JOB_ERASED_EVENT, ErasureReason
from longhaul.storage.dynamo import plain

DELETES_AT_ONCE = 16  # object versions deleted at once (within the S3 client's connection pool)
UPLOAD_ID = re.compile(r"\bup_[0-9a-f]{32}\b")
REVIEW_STATUSES = ("pending", "decided", "expired", "cancelled")
OUTBOX_STATUSES = ("pending", "retrying", "delivered", "dead")
QUEUE_READS = 10  # receives per queue (10 messages each) when looking for a job's messages
# What the tombstone keeps of the job's item: who, what, when, and what it used and cost (billing).
KEPT = (
    "job_id",
    "tenant_id",
    "workflow",
    "created_at",
    "finished_at",
    "attempts",
    "usage_input_tokens",
    "usage_output_tokens",
    "usage_cache_read_tokens",
    "usage_cache_write_tokens",
    "cost_micro",
    "model_list_cost_micro",
    "sla_class",
)
USAGE = tuple(k for k in KEPT if k.startswith("usage_") or k.endswith("_micro"))
_INDEX_KEYS = (schema.GSI1_PK, schema.GSI1_SK, schema.GSI3_PK, schema.GSI3_SK)


class ErasureStore:
    def __init__(self, table: Any, s3: Any, bucket: str, *, clock: Clock | None = None) -> None:
        self.table = table
        self.s3 = s3
        self.bucket = bucket
        self.clock = clock or SystemClock()

    # ------------------------------------------------------------------ the tombstone

    def item(self, job_id: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key=schema.job_key(job_id), ConsistentRead=True).get("Item")
        return plain(item) if item else None

    def begin(self, job_id: str, *, reason: ErasureReason, by: str) -> dict[str, Any] | None:
        """Mark the job erasing (once: an erasure begun keeps its time and reason); its item after, or None when there
        is no such job. From now on the job store reads it as gone and every listing leaves it out."""
        now = iso(self.clock.now())
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression=f"SET erased_at = :now, erasure_reason = :reason, erased_by = :by, "
                f"erasure_done = :done, {schema.GSI2_PK} = :pending, {schema.GSI2_SK} = :now "
                f"REMOVE {', '.join(_INDEX_KEYS)}",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(erased_at)",
                ExpressionAttributeValues={
                    ":now": now,
                    ":reason": reason,
                    ":by": by,
                    ":done": {},
                    ":pending": schema.ERASURE_PENDING,
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        return self.item(job_id)

    def record(self, job_id: str, store: str, deleted: int) -> None:
        """A store is done: its count on the tombstone (an erasure asked again skips it)."""
        self.table.update_item(
            Key=schema.job_key(job_id),
            UpdateExpression="SET erasure_done.#store = :n",
            ExpressionAttributeNames={"#store": store},
            ExpressionAttributeValues={":n": deleted},
            ConditionExpression="attribute_exists(erased_at)",
        )

    def finish(self, item: dict[str, Any]) -> dict[str, Any]:
        """Replace the job's item by its tombstone: what `KEPT` names, the erasure's time, reason and report, and the
        `job_erased` event (the job's events are gone with its records)."""
        tombstone = {k: item[k] for k in KEPT if item.get(k) is not None}
        tombstone |= {k: item.get(k) or 0 for k in USAGE}  # what billing reads, zero when the job used nothing
        tombstone |= {
            **schema.job_key(item["job_id"]),
            "erased_at": item["erased_at"],
            "erasure_reason": item["erasure_reason"],
            "erased_by": item.get("erased_by", ""),
            "erasure_done": item.get("erasure_done", {}),
            "erasure_complete": True,
            "events": [
                {
                    "type": JOB_ERASED_EVENT,
                    "at": item["erased_at"],
                    "detail": {"reason": item["erasure_reason"], "by": item.get("erased_by", "")},
                }
            ],
        }
        self.table.put_item(Item=tombstone)
        return tombstone

    def pending(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Erasures begun and not finished, oldest first (the sweep finishes them)."""
        response = self.table.query(
            IndexName=schema.BY_STATE,
            KeyConditionExpression=Key(schema.GSI2_PK).eq(schema.ERASURE_PENDING),
            Limit=limit,
        )
        return [plain(i) for i in response.get("Items", [])]

    def due(self, now: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The retention calendar's entries whose time has come (their jobs are to be erased), oldest first."""
        response = self.table.query(
            KeyConditionExpression=Key(schema.PK).eq(schema.RETENTION_PARTITION) & Key(schema.SK).lte(f"{now}~"),
            Limit=limit,
            ConsistentRead=True,
        )
        return [plain(i) for i in response.get("Items", [])]

    def tenant_jobs(self, tenant_id: str) -> Iterator[str]:
        """The ids of the tenant's jobs not erased (the by_tenant index), and of those whose erasure is unfinished."""
        kwargs: dict[str, Any] = {
            "IndexName": schema.BY_TENANT,
            "KeyConditionExpression": Key(schema.GSI1_PK).eq(schema.tenant_partition(tenant_id))
            & Key(schema.GSI1_SK).gt(" "),
            "ProjectionExpression": "job_id",
        }
        while True:
            response = self.table.query(**kwargs)
            for item in response.get("Items", []):
                if "job_id" in item:
                    yield str(item["job_id"])
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        kwargs = {
            "IndexName": schema.BY_STATE,
            "KeyConditionExpression": Key(schema.GSI2_PK).eq(schema.ERASURE_PENDING),
            "FilterExpression": Attr("tenant_id").eq(tenant_id),
        }
        while True:
            response = self.table.query(**kwargs)
            yield from (str(i["job_id"]) for i in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ------------------------------------------------------------------ objects

    def _versions(self, prefix: str) -> Iterator[dict[str, str]]:
        """Every version and delete marker under `prefix` (`{"Key", "VersionId"}`)."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        while True:
            page = self.s3.list_object_versions(**kwargs)
            for entry in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
                yield {"Key": entry["Key"], "VersionId": entry["VersionId"]}
            if not page.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")

    def delete_prefix(self, prefix: str, *, only: re.Pattern[str] | None = None) -> int:
        """Delete every version of every object under `prefix` (whose key `only` matches, if given); how many."""
        found = [v for v in self._versions(prefix) if only is None or only.search(v["Key"])]
        return self.delete_versions(found)

    def delete_versions(self, versions: Sequence[dict[str, str]]) -> int:
        """Delete each version, `DELETES_AT_ONCE` at a time. One DeleteObject per version, not DeleteObjects: that is
        authorized per key on AWS but needs `Content-MD5` and answers errors per key inside a 200; single deletes are
        authorized and fail as any call does."""

        def delete(version: dict[str, str]) -> None:
            self.s3.delete_object(Bucket=self.bucket, Key=version["Key"], VersionId=version["VersionId"])

        if len(versions) < 2:
            for version in versions:
                delete(version)
            return len(versions)
        with ThreadPoolExecutor(max_workers=min(DELETES_AT_ONCE, len(versions))) as pool:
            done = [pool.submit(contextvars.copy_context().run, delete, v) for v in versions]
            for each in done:
                each.result()
        return len(versions)

    def upload_ids(self, job_id: str, tenant_id: str) -> set[str]:
        """The uploads the job's input versions name (`up_<hex>` ids), read before the inputs are deleted."""
        ids: set[str] = set()
        for version in self._versions(f"{schema.WORK_PREFIX}{job_id}/input"):
            body = self.s3.get_object(Bucket=self.bucket, Key=version["Key"], VersionId=version["VersionId"])
            ids |= set(UPLOAD_ID.findall(body["Body"].read().decode("utf-8", "replace")))
        return ids

    # ------------------------------------------------------------------ items

    def delete_keys(self, keys: Sequence[dict[str, str]]) -> int:
        with self.table.batch_writer() as batch:
            for key in keys:
                batch.delete_item(Key={schema.PK: key[schema.PK], schema.SK: key[schema.SK]})
        return len(keys)

    def partition(self, pk: str, *, filter_expression: Any = None, keep_sk: str | None = None) -> list[dict[str, str]]:
        """The keys of a partition's items (those `filter_expression` matches), but `keep_sk`."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(schema.PK).eq(pk),
            "ProjectionExpression": "#pk, #sk",
            "ExpressionAttributeNames": {"#pk": schema.PK, "#sk": schema.SK},
            "ConsistentRead": True,
        }
        if filter_expression is not None:
            kwargs["FilterExpression"] = filter_expression
        keys: list[dict[str, str]] = []
        while True:
            response = self.table.query(**kwargs)
            keys += [
                {schema.PK: str(i[schema.PK]), schema.SK: str(i[schema.SK])}
                for i in response.get("Items", [])
                if i[schema.SK] != keep_sk
            ]
            if "LastEvaluatedKey" not in response:
                return keys
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def indexed(self, partitions: Sequence[str], job_id: str) -> list[dict[str, str]]:
        """The keys of the items on the by_state or by_tenant index partitions `partitions` that name `job_id`."""
        keys: list[dict[str, str]] = []
        for index, pk_name, partition in partitions_of(partitions):
            kwargs: dict[str, Any] = {
                "IndexName": index,
                "KeyConditionExpression": Key(pk_name).eq(partition),
                "FilterExpression": Attr("job_id").eq(job_id),
            }
            while True:
                response = self.table.query(**kwargs)
                keys += [{schema.PK: str(i[schema.PK]), schema.SK: str(i[schema.SK])} for i in response["Items"]]
                if "LastEvaluatedKey" not in response:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return keys

    def drop_history_entry(self, workflow: str, job_id: str) -> int:
        """Take the job out of its workflow's ETA history (a conditional rewrite of the one item)."""
        for _ in range(8):
            item = self.table.get_item(Key=schema.history_key(workflow), ConsistentRead=True).get("Item")
            if item is None:
                return 0
            found = plain(item)
            entries = found.get("entries") or []
            kept = [e for e in entries if e.get("job_id") != job_id]
            if len(kept) == len(entries):
                return 0
            try:
                self.table.put_item(
                    Item={**found, "entries": kept, "version": int(found.get("version", 0)) + 1},
                    ConditionExpression="version = :v",
                    ExpressionAttributeValues={":v": int(found.get("version", 0))},
                )
                return len(entries) - len(kept)
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
        return 0


def partitions_of(partitions: Sequence[str]) -> Iterator[tuple[str, str, str]]:
    """(index, its partition key's name, partition) of each of `partitions`: REVIEWS#… are on by_tenant, the rest
    (OUTBOX#…) on by_state."""
    for partition in partitions:
        if partition.startswith("REVIEWS#"):
            yield schema.BY_TENANT, schema.GSI1_PK, partition
        else:
            yield schema.BY_STATE, schema.GSI2_PK, partition


def drop_messages(sqs: Any, queue_url: str, needle: str) -> int:
    """Delete the queue's messages whose body names `needle` (a job id); the others are made visible again at once.
    SQS cannot delete a message without receiving it: `QUEUE_READS` receives of up to 10 messages each."""
    dropped, others = 0, []
    for _ in range(QUEUE_READS):
        answer = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=0
        )
        messages = answer.get("Messages", [])
        if not messages:
            break
        for message in messages:
            if needle in message.get("Body", "") or needle in json.dumps(message.get("MessageAttributes", {})):
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                dropped += 1
            else:
                others.append(message["ReceiptHandle"])
    for handle in others:  # hidden while the queue was read: visible again at once
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    return dropped
