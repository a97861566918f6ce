"""A job's stream records in DynamoDB (`core.streams`): partition `STREAM#<job id>`, one item per record, TTL'd.

Numbering works as the event log's does (`storage.jobs`), in a partition of its own: a record's id is reserved from
the stream's counter (an atomic ADD: no read, no conflict between the items of a fan-out writing at once), then the
record is written. A reader returns the records in id order and stops before an id that is not written yet (its
writer is between the two requests), unless a later record is older than `GAP_GRACE_SECONDS` (the writer died: the
id is passed). So a reader that resumes after the last id it has misses nothing and repeats nothing.

Records expire after the stream's TTL (`expires_at`, DynamoDB's TTL attribute); DynamoDB deletes expired items
within a day or two, and moto never does, so readers skip expired records themselves.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.streams import MAX_STREAM_TTL_SECONDS, STREAM_TTL_SECONDS, NewRecord, StreamRecord
from longhaul.storage.dynamo import plain

#: How long after a later record was written a missing id is taken for lost and passed by readers (seconds).
GAP_GRACE_SECONDS = 5
#: The most records one read returns.
PAGE_MAX = 500


class StreamStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, ttl_seconds: int = STREAM_TTL_SECONDS) -> None:
        if not 0 < ttl_seconds <= MAX_STREAM_TTL_SECONDS:
            raise ValueError(f"a stream record lives at most {MAX_STREAM_TTL_SECONDS} s, not {ttl_seconds}")
        self.table = table
        self.clock = clock or SystemClock()
        self.ttl_seconds = ttl_seconds

    def append(self, job_id: str, record: NewRecord) -> int:
        """Number the record in the job's stream and write it; returns its id."""
        got = self.table.update_item(
            Key={schema.PK: schema.stream_pk(job_id), schema.SK: schema.STREAM_SEQ_SK},
            UpdateExpression="ADD stream_seq :one SET #ttl = :ttl",
            ExpressionAttributeNames={"#ttl": schema.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":one": 1, ":ttl": self._expiry()},
            ReturnValues="UPDATED_NEW",
        )
        record_id = int(got["Attributes"]["stream_seq"])
        item = {
            schema.PK: schema.stream_pk(job_id),
            schema.SK: schema.stream_record_sk(record_id),
            "id": record_id,
            **record.model_dump(exclude_none=True),
            "written_at": iso(self.clock.now()),
            schema.TTL_ATTRIBUTE: self._expiry(),
        }
        self.table.put_item(Item=item)
        return record_id

    def after(self, job_id: str, after: int = 0, limit: int = PAGE_MAX) -> list[StreamRecord]:
        """The job's live records with id > `after`, in id order, up to the first id not written yet."""
        limit = max(1, min(limit, PAGE_MAX))
        response = self.table.query(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": schema.stream_pk(job_id),
                ":lo": schema.stream_record_sk(after + 1),
                ":hi": schema.stream_record_sk(10**schema.EVENT_SEQ_DIGITS - 1),
            },
            Limit=limit,
            ConsistentRead=True,
        )
        now, records = self.clock.now(), []
        grace = iso(now - timedelta(seconds=GAP_GRACE_SECONDS))
        expected = after + 1
        for item in (plain(i) for i in response.get("Items", [])):
            if item["id"] != expected and str(item.get("written_at", "")) > grace:
                break  # an id reserved by a writer still writing: the records after it wait for it
            expected = item["id"] + 1
            if int(item.get(schema.TTL_ATTRIBUTE, 0)) <= int(now.timestamp()):
                continue  # expired (DynamoDB deletes it later; moto never)
            records.append(StreamRecord.model_validate(item))
        return records

    def _expiry(self) -> int:
        return int(self.clock.now().timestamp()) + self.ttl_seconds
