"""The audit trail in the jobs table: one hash-chained item per action, appended with ONE conditional write.

The chain is one partition (`AUDIT`) with an item per entry under `SEQ#<seq>`. There is no separate head item: the
head is the entry with the highest `seq`, so an append is a consistent read of the head (a one-item Query) and a single
`PutItem` of entry n+1 conditioned on no item having that key. Two appends that read the same head race for the same
key; DynamoDB lets one in and the other fails its condition, re-reads the head and links to the winner: the chain
cannot fork, and never has a gap. One write per action, then, but for those races. (Remembering the head in the
process instead of reading it saves the read only while one function appends alone; with the API's functions taking
turns every action would pay a failed conditional write, which costs a write: `bench/audit.py` measured 2.0 writes
per action that way.) One partition holds the whole chain: about a thousand appends a second, far above what people
do by hand; a platform that records more would shard the chain (one per tenant) and verify each.

Each entry is also indexed under its tenant (`by_tenant`, partition `AUDIT#<tenant>`), which is how a tenant lists
the actions on its own resources without reading anyone else's. Items carry the TTL of
`LONGHAUL_AUDIT_RETENTION_DAYS` (none when 0), outside the entry and its hash: the trail's retention removes it
from the front (which `verify` then reports as starting after seq 1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.audit import GENESIS_HASH, AuditActor, AuditEntry, AuditPage, AuditVerification, entry_hash, verify
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.errors import TransientError
from longhaul.storage.dynamo import backoff, plain

PARTITION = "AUDIT"
SEQ_PREFIX = "SEQ#"
SEQ_DIGITS = 12
TENANT_PARTITION_PREFIX = "AUDIT#"
APPEND_TRIES = 50
QUERIES_PER_PAGE = 8  # a filtered page reads at most this many DynamoDB pages, then answers with a cursor
_KEY_FIELDS = (schema.PK, schema.SK, schema.GSI1_PK, schema.GSI1_SK, schema.TTL_ATTRIBUTE)


class BadAuditCursor(ValueError):
    """A cursor this listing did not hand out."""


@dataclass(frozen=True)
class AuditFilter:
    actor: str | None = None
    tenant_id: str | None = None
    action: str | None = None
    since: str | None = None  # ISO 8601, inclusive
    until: str | None = None  # ISO 8601, exclusive


@dataclass(frozen=True)
class Action:
    """What the caller of `append` knows of an action; the store adds the number, the time and the links."""

    actor: AuditActor
    action: str
    target: str
    outcome: int
    tenant_id: str | None = None
    job_id: str | None = None
    request_id: str | None = None
    source_ip: str | None = None
    before_digest: str | None = None
    after_digest: str | None = None


def _sk(seq: int) -> str:
    return f"{SEQ_PREFIX}{seq:0{SEQ_DIGITS}d}"


def actor_id(actor: AuditActor) -> str:
    return actor.subject or actor.key_id or f"{actor.role}:{actor.tenant_id or '-'}"


class AuditStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, retention_days: int = 0) -> None:
        self.table = table
        self.clock = clock or SystemClock()
        self.retention_days = retention_days  # 0: kept forever; else DynamoDB's TTL removes entries from the front
        self.writes = 0  # DynamoDB writes this store object made (conditional ones that failed included)

    def _read_head(self) -> tuple[int, str]:
        found = self.table.query(
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": schema.PK, "#sk": schema.SK},
            ExpressionAttributeValues={":pk": PARTITION, ":prefix": SEQ_PREFIX},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        ).get("Items", [])
        return (int(found[0]["seq"]), str(found[0]["hash"])) if found else (0, GENESIS_HASH)

    def append(self, action: Action) -> AuditEntry:
        """Record an action as the chain's next entry (one conditional PutItem; another on a lost race)."""
        head = self._read_head()
        for tries in range(APPEND_TRIES):
            seq, prev_hash = head[0] + 1, head[1]
            fields: dict[str, Any] = {
                "seq": seq,
                "at": iso(self.clock.now()),
                "actor": action.actor.model_dump(mode="json"),
                "actor_id": actor_id(action.actor),
                "action": action.action,
                "target": action.target,
                "tenant_id": action.tenant_id,
                "job_id": action.job_id,
                "request_id": action.request_id,
                "source_ip": action.source_ip,
                "outcome": action.outcome,
                "before_digest": action.before_digest,
                "after_digest": action.after_digest,
                "prev_hash": prev_hash,
            }
            fields["hash"] = entry_hash(fields)
            item = {schema.PK: PARTITION, schema.SK: _sk(seq), **fields}
            if self.retention_days:  # not part of the entry (nor of its hash): when the store lets it go
                item[schema.TTL_ATTRIBUTE] = int(self.clock.now().timestamp()) + self.retention_days * 86400
            if action.tenant_id:
                item[schema.GSI1_PK] = TENANT_PARTITION_PREFIX + action.tenant_id
                item[schema.GSI1_SK] = _sk(seq)
            try:
                self.writes += 1
                self.table.put_item(
                    Item=item,
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": schema.PK},
                )
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                backoff(tries)
                head = self._read_head()  # another process appended: link to its entry
                continue
            return AuditEntry.model_validate(fields)
        raise TransientError("the audit trail's head kept moving; try again")

    def page(self, filters: AuditFilter, cursor: str | None, limit: int) -> AuditPage:
        """Entries in chain order (oldest first) that match every filter, after the cursor (a `seq`)."""
        after = 0
        if cursor is not None:
            if not cursor.isdigit() or len(cursor) > SEQ_DIGITS:
                raise BadAuditCursor("not a cursor of this listing")
            after = int(cursor)
        names: dict[str, str] = {}
        values: dict[str, Any] = {":from": _sk(after + 1)}
        clauses: list[str] = []
        for name, field, op in (
            ("actor", "actor_id", "="),
            ("action", "action", "="),
            ("since", "at", ">="),
            ("until", "at", "<"),
        ):
            value = getattr(filters, name)
            if value is not None:
                names[f"#{name}"] = field
                values[f":{name}"] = value
                clauses.append(f"#{name} {op} :{name}")
        kwargs: dict[str, Any] = {"ExpressionAttributeValues": values, "Limit": limit}
        if filters.tenant_id is not None:
            names |= {"#pk": schema.GSI1_PK, "#sk": schema.GSI1_SK}
            values[":pk"] = TENANT_PARTITION_PREFIX + filters.tenant_id
            kwargs["IndexName"] = schema.BY_TENANT
        else:
            names |= {"#pk": schema.PK, "#sk": schema.SK}
            values[":pk"] = PARTITION
            kwargs["ConsistentRead"] = True
        kwargs["KeyConditionExpression"] = "#pk = :pk AND #sk >= :from"
        kwargs["ExpressionAttributeNames"] = names
        if clauses:
            kwargs["FilterExpression"] = " AND ".join(clauses)
        entries: list[AuditEntry] = []
        last_seq: int | None = None
        for _ in range(QUERIES_PER_PAGE):
            kwargs["Limit"] = limit - len(entries)
            response = self.table.query(**kwargs)
            entries.extend(_entry(i) for i in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return AuditPage(entries=entries)
            last_seq = int(str(response["LastEvaluatedKey"][schema.SK]).removeprefix(SEQ_PREFIX))
            if len(entries) >= limit:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        # More may follow: continue after the last entry this page looked at (returned or filtered out).
        return AuditPage(entries=entries, next_cursor=str(last_seq) if last_seq is not None else None)

    def entries(self) -> Iterator[dict[str, Any]]:
        """The whole chain in order, as stored (consistent reads, every page)."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": schema.PK, "#sk": schema.SK},
            "ExpressionAttributeValues": {":pk": PARTITION, ":prefix": SEQ_PREFIX},
            "ConsistentRead": True,
        }
        while True:
            response = self.table.query(**kwargs)
            for item in response.get("Items", []):
                yield {k: v for k, v in plain(item).items() if k not in _KEY_FIELDS}
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def verify(self) -> AuditVerification:
        return verify(self.entries())


def _entry(item: dict[str, Any]) -> AuditEntry:
    return AuditEntry.model_validate({k: v for k, v in plain(item).items() if k not in _KEY_FIELDS})
