"""An operator's bulk action kept under its Idempotency-Key (in the idempotency records' keyspace, with their TTL):
the request's hash, the jobs it took (frozen when it first ran, with each one's attempt then) and what was done to
each, written as each is done. The same key and request answer from it and act only on the jobs it has not done yet
(a crash part-way leaves the rest for the retry); another request with the key is refused.
"""

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError
from pydantic import Field

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.records import Record
from longhaul.storage.dynamo import plain

BULK_SK = "BULK"
TTL = timedelta(hours=24)


def bulk_key(caller: str, idempotency_key: str) -> dict[str, str]:
    return {schema.PK: f"IDEMP#{caller}#{idempotency_key}", schema.SK: BULK_SK}


class BulkTarget(Record):
    job_id: str
    attempts: int  # the job's attempt when the action took it: a later one means it was replayed since


class BulkRecord(Record):
    action: str
    payload_hash: str
    created_at: str
    targets: list[BulkTarget]
    more: bool = False
    done: dict[str, str] = Field(default_factory=dict)  # job id → its outcome (JSON), as written when the job was done
    expires_at: int


class BulkRecords:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.clock = clock or SystemClock()

    def get(self, caller: str, key: str) -> BulkRecord | None:
        item = self.table.get_item(Key=bulk_key(caller, key), ConsistentRead=True).get("Item")
        if not item:
            return None
        record = BulkRecord.model_validate(plain(item))
        return record if record.expires_at > self.clock.now().timestamp() else None

    def claim(
        self, caller: str, key: str, *, action: str, payload_hash: str, targets: list[BulkTarget], more: bool
    ) -> BulkRecord | None:
        """Keep the action under the key; None when the key is already taken (read it then)."""
        now = self.clock.now()
        record = BulkRecord(
            action=action,
            payload_hash=payload_hash,
            created_at=iso(now),
            targets=targets,
            more=more,
            expires_at=int((now + TTL).timestamp()),
        )
        item = {
            **bulk_key(caller, key),
            **record.model_dump(mode="json", exclude={"done"}),
            "done": {},
            schema.TTL_ATTRIBUTE: record.expires_at,
        }
        try:
            self.table.put_item(Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise
        return record

    def done(self, caller: str, key: str, job_id: str, outcome: Mapping[str, Any]) -> str:
        """Keep what was done to one job of the action, once: the outcome kept (an earlier one, when two sends of the
        action ran at the same time and the other wrote first)."""
        written = json.dumps(outcome, separators=(",", ":"))
        try:
            self.table.update_item(
                Key=bulk_key(caller, key),
                UpdateExpression="SET done.#job = :outcome",
                ConditionExpression="attribute_not_exists(done.#job)",
                ExpressionAttributeNames={"#job": job_id},
                ExpressionAttributeValues={":outcome": written},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            kept = self.get(caller, key)
            return kept.done.get(job_id, written) if kept is not None else written
        return written
