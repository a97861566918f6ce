"""A tenant's memory in DynamoDB: episodes (what past jobs did about a subject) and long-term facts (statements with
provenance and a re-verification date), in one partition per tenant (`MEMORY#<tenant>`).

Every read and write names the tenant, and nothing else does: there is no index over memories, so no query can
return another tenant's. Episodes sort by subject then time (the latest of a subject are one query); facts by
subject. A memory's id derives from the tool call that recorded it, so a retried call writes the same item.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Attr, Key

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.records import MemoryKind, MemoryRecord
from longhaul.storage.dynamo import plain, update_expression

PREFIXES: Mapping[MemoryKind, str] = {"episode": schema.EPISODE_PREFIX, "fact": schema.FACT_PREFIX}


def subject_key(subject: str) -> str:
    """A subject as memory files it: case, spacing and punctuation do not matter ("Falcon Ltd." is "falcon-ltd")."""
    key = re.sub(r"[^0-9a-z]+", "-", subject.casefold()).strip("-")
    return key[:120] or "-"


class BadMemoryCursor(ValueError):
    """Not a cursor this listing handed out."""


class MemoryStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, retention_days: int = 0) -> None:
        self.table = table
        self.clock = clock or SystemClock()
        self.retention_days = retention_days  # 0: kept until deleted; else DynamoDB's TTL removes it after

    def put(self, record: MemoryRecord) -> MemoryRecord:
        """Write a memory (the same id overwrites: a retried call records it once)."""
        if record.kind == "episode":
            sk = schema.episode_sk(record.subject_key, iso(record.recorded_at), record.memory_id)
        else:
            sk = schema.fact_sk(record.subject_key, record.memory_id)
        item = {schema.PK: schema.memory_pk(record.tenant_id), schema.SK: sk, **record.model_dump(mode="json")}
        if self.retention_days:
            item[schema.TTL_ATTRIBUTE] = int(record.recorded_at.timestamp()) + self.retention_days * 86400
        self.table.put_item(Item={k: v for k, v in item.items() if v is not None})
        return record

    def change(self, record: MemoryRecord, fields: Mapping[str, Any]) -> MemoryRecord:
        """Set fields of a memory (a fact re-verified or retired)."""
        found = self._item(record.tenant_id, record.memory_id)
        if found is None:
            return record
        key = {schema.PK: found[schema.PK], schema.SK: found[schema.SK]}
        values = {k: (iso(v) if isinstance(v, datetime) else v) for k, v in fields.items()}
        self.table.update_item(Key=key, **update_expression(values))
        return MemoryRecord.model_validate({**record.model_dump(mode="json"), **values})

    def episodes(
        self, tenant_id: str, subject: str, *, kind: str | None = None, exclude_job: str | None = None, limit: int = 20
    ) -> list[MemoryRecord]:
        """A subject's latest episodes (of one `kind` of `details`, if given), newest first."""
        found = [
            r
            for r in self._query(tenant_id, f"{schema.EPISODE_PREFIX}{subject_key(subject)}#", newest_first=True)
            if r.job_id != exclude_job and (kind is None or r.details.get("kind") == kind)
        ]
        return found[:limit]

    def facts(self, tenant_id: str, subject: str, *, active_only: bool = True) -> list[MemoryRecord]:
        found = self._query(tenant_id, f"{schema.FACT_PREFIX}{subject_key(subject)}#")
        return [r for r in found if r.status == "active" or not active_only]

    def get(self, tenant_id: str, memory_id: str) -> MemoryRecord | None:
        item = self._item(tenant_id, memory_id)
        return MemoryRecord.model_validate(plain(item)) if item else None

    def delete(self, tenant_id: str, memory_id: str) -> bool:
        item = self._item(tenant_id, memory_id)
        if item is None:
            return False
        self.table.delete_item(Key={schema.PK: item[schema.PK], schema.SK: item[schema.SK]})
        return True

    def page(
        self,
        tenant_id: str,
        *,
        kind: MemoryKind | None = None,
        subject: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[list[MemoryRecord], str | None]:
        """One page of a tenant's memories (episodes, then facts; each by subject), and the next page's cursor (a page
        narrowed to a subject of both kinds may hold fewer than `limit`: the filter applies after the read)."""
        condition = Key(schema.PK).eq(schema.memory_pk(tenant_id))
        if kind is not None:
            prefix = PREFIXES[kind] + (f"{subject_key(subject)}#" if subject else "")
            condition &= Key(schema.SK).begins_with(prefix)
        kwargs: dict[str, Any] = {"KeyConditionExpression": condition, "Limit": limit, "ConsistentRead": True}
        if subject and kind is None:
            kwargs["FilterExpression"] = Attr("subject_key").eq(subject_key(subject))
        if cursor:
            kwargs["ExclusiveStartKey"] = {schema.PK: schema.memory_pk(tenant_id), schema.SK: _decode(cursor)}
        response = self.table.query(**kwargs)
        records = [MemoryRecord.model_validate(plain(i)) for i in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        return records, _encode(str(last[schema.SK])) if last else None

    def delete_all(self, tenant_id: str, *, subject: str | None = None) -> int:
        """Delete a tenant's memories (only one subject's, if given); how many."""
        deleted, cursor = 0, None
        while True:
            records, cursor = self.page(tenant_id, subject=subject, limit=100, cursor=cursor)
            with self.table.batch_writer() as batch:
                for record in records:
                    found = self._item(tenant_id, record.memory_id)
                    if found is not None:
                        batch.delete_item(Key={schema.PK: found[schema.PK], schema.SK: found[schema.SK]})
                        deleted += 1
            if cursor is None:
                return deleted

    def _query(self, tenant_id: str, prefix: str, *, newest_first: bool = False) -> list[MemoryRecord]:
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(schema.PK).eq(schema.memory_pk(tenant_id))
            & Key(schema.SK).begins_with(prefix),
            "ScanIndexForward": not newest_first,
            "ConsistentRead": True,
        }
        records: list[MemoryRecord] = []
        while True:
            response = self.table.query(**kwargs)
            records += [MemoryRecord.model_validate(plain(i)) for i in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return records
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _item(self, tenant_id: str, memory_id: str) -> dict[str, Any] | None:
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(schema.PK).eq(schema.memory_pk(tenant_id)),
            "FilterExpression": Attr("memory_id").eq(memory_id),
            "ConsistentRead": True,
        }
        while True:
            response = self.table.query(**kwargs)
            items = response.get("Items", [])
            if items:
                found: dict[str, Any] = items[0]
                return found
            if "LastEvaluatedKey" not in response:
                return None
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _encode(sk: str) -> str:
    return base64.urlsafe_b64encode(sk.encode()).decode().rstrip("=")


def _decode(cursor: str) -> str:
    try:
        sk = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise BadMemoryCursor(cursor) from None
    if not sk.startswith((schema.EPISODE_PREFIX, schema.FACT_PREFIX)):
        raise BadMemoryCursor(cursor)
    return sk
