"""The outbox of the EventBridge bus: each event (`core.bus`) is an item in its job's partition, written in the same
transaction as the change it announces, and published in the job's order, once.

    JOB#<id>/BUS#<ordinal>   detail_type, detail (the JSON put on the bus), state pending | published

The job's item counts them (`bus_count`), so the transaction that writes the change numbers its events after the
job's last one: a job's events are numbered in the order their changes committed. Publishing one is a claim, a put and
a mark:

- the claim is a transaction: the event is still pending (and no live claim holds it), and the job's previous event is
  published (or gone: published ones expire after `PUBLISHED_TTL`). So only one publisher puts it, and never before
  the one it follows;
- the put is one `PutEvents` entry (one at a time: EventBridge keeps no order within a batch);
- the mark makes it published and takes it out of the pending index.

Whoever commits a change drains the job's pending events right after (`drain`); a publisher that failed leaves them
pending, and the sweep drains every job with an event pending for longer than `RELAY_AFTER` (`relay_pending`). A
publisher that dies between its put and its mark leaves a claim that expires: the event is put again, the only way
one can reach the bus twice, with the same `(job_id, seq, detail-type)` for consumers to drop.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.bus import BusEntry
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.observability import logger
from longhaul.core.ports import EventPublisher
from longhaul.storage.dynamo import Cancelled, plain, transact

PENDING, PUBLISHED = "pending", "published"
#: How long a publisher's claim on an event holds; past it, another publisher may put the event again.
CLAIM_SECONDS = 60
#: How long a published event's item is kept (DynamoDB's TTL deletes it after).
PUBLISHED_TTL = timedelta(days=7)
#: An event pending this long was not published after its commit: the sweep publishes it.
RELAY_AFTER = timedelta(seconds=30)
#: The most events one drain publishes (a job has a handful of status changes).
DRAIN_MAX = 200


def bus_writes(
    table_name: str, job_id: str, first_ordinal: int, entries: Sequence[BusEntry], at: str
) -> list[dict[str, Any]]:
    """The transaction items that write `entries` as the job's events `first_ordinal`, `first_ordinal + 1`, …"""
    return [
        {
            "Put": {
                "TableName": table_name,
                "Item": {
                    **schema.bus_key(job_id, ordinal),
                    "job_id": job_id,
                    "ordinal": ordinal,
                    "detail_type": entry.detail_type,
                    "detail": entry.detail,
                    "state": PENDING,
                    "created_at": at,
                    schema.GSI2_PK: schema.bus_partition(PENDING),
                    schema.GSI2_SK: f"{at}#{job_id}#{ordinal:08d}",
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        for ordinal, entry in enumerate(entries, start=first_ordinal)
    ]


class BusOutbox:
    """The bus's pending events, and their publisher (None: no bus configured, nothing is published)."""

    def __init__(self, table: Any, publisher: EventPublisher | None, *, clock: Clock | None = None) -> None:
        self.table = table
        self.client = table.meta.client
        self.publisher = publisher
        self.clock = clock or SystemClock()

    def events(self, job_id: str) -> list[dict[str, Any]]:
        """Every event item of the job still kept, in its order."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(schema.PK).eq(schema.job_pk(job_id))
            & Key(schema.SK).begins_with(schema.BUS_PREFIX),
            "ConsistentRead": True,
        }
        while True:
            page = self.table.query(**kwargs)
            items += [plain(i) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def drain(self, job_id: str, *, first: bool = False) -> int:
        """Publish the job's pending events in order; stops at one it may not publish yet (its predecessor is
        another publisher's, or failed). Returns how many it published; raises when a put failed (the event is
        left pending for the next drain). `first`: only the job's first event, just written with the job (its
        submission: three requests, no query; a change written meanwhile is its own writer's, or the sweep's)."""
        if self.publisher is None:
            return 0
        if first:
            return self._publish_first(job_id)
        published = 0
        while published < DRAIN_MAX:
            pending = [e for e in self.events(job_id) if e.get("state") == PENDING]
            if not pending:
                return published
            for event in pending:
                token = self._claim(job_id, int(event["ordinal"]))
                if token is None:
                    return published
                try:
                    self.publisher.put(str(event["detail_type"]), str(event["detail"]))
                except Exception as error:
                    self._release(job_id, int(event["ordinal"]), token, error)
                    raise
                self._mark(job_id, int(event["ordinal"]))
                published += 1
        return published

    def relay_pending(self, *, older_than: timedelta = RELAY_AFTER, limit: int = 500) -> int:
        """The sweep's safety net: drain every job with an event pending since before `older_than` ago. Returns how
        many events it published; a job whose put fails is left for the next sweep."""
        if self.publisher is None:
            return 0
        before = iso(self.clock.now() - older_than)
        response = self.table.query(
            IndexName=schema.BY_STATE,
            KeyConditionExpression=Key(schema.GSI2_PK).eq(schema.bus_partition(PENDING))
            & Key(schema.GSI2_SK).lt(before),
            Limit=limit,
        )
        jobs = dict.fromkeys(str(i["job_id"]) for i in response.get("Items", []))
        published = 0
        for job_id in jobs:
            try:
                published += self.drain(job_id)
            except Exception:
                logger.exception("bus events not published; the next sweep tries again", extra={"job_id": job_id})
        return published

    def _publish_first(self, job_id: str) -> int:
        """Claim, put and mark the job's first event (it follows none: one conditional update claims it)."""
        assert self.publisher is not None
        now, token = self.clock.now(), uuid.uuid4().hex
        try:
            claimed = self.table.update_item(
                Key=schema.bus_key(job_id, 1),
                UpdateExpression="SET claim = :token, claimed_until = :until",
                ConditionExpression=(
                    "#state = :pending AND (attribute_not_exists(claimed_until) OR claimed_until < :now)"
                ),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":token": token,
                    ":until": iso(now + timedelta(seconds=CLAIM_SECONDS)),
                    ":now": iso(now),
                    ":pending": PENDING,
                },
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return 0
        try:
            self.publisher.put(str(claimed["detail_type"]), str(claimed["detail"]))
        except Exception as error:
            self._release(job_id, 1, token, error)
            raise
        self._mark(job_id, 1)
        return 1

    def _claim(self, job_id: str, ordinal: int) -> str | None:
        """Claim the event for this publisher: None when it is claimed by another (a live claim), published, or
        follows an event not published yet."""
        now, token = self.clock.now(), uuid.uuid4().hex
        items: list[dict[str, Any]] = []
        if ordinal > 1:
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": self.table.name,
                        "Key": schema.bus_key(job_id, ordinal - 1),
                        "ConditionExpression": "attribute_not_exists(pk) OR #state = :published",
                        "ExpressionAttributeNames": {"#state": "state"},
                        "ExpressionAttributeValues": {":published": PUBLISHED},
                    }
                }
            )
        items.append(
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": schema.bus_key(job_id, ordinal),
                    "UpdateExpression": "SET claim = :token, claimed_until = :until",
                    "ConditionExpression": (
                        "#state = :pending AND (attribute_not_exists(claimed_until) OR claimed_until < :now)"
                    ),
                    "ExpressionAttributeNames": {"#state": "state"},
                    "ExpressionAttributeValues": {
                        ":token": token,
                        ":until": iso(now + timedelta(seconds=CLAIM_SECONDS)),
                        ":now": iso(now),
                        ":pending": PENDING,
                    },
                }
            }
        )
        try:
            transact(self.client, items)
        except Cancelled:
            return None
        return token

    def _mark(self, job_id: str, ordinal: int) -> None:
        now = self.clock.now()
        try:
            self.table.update_item(
                Key=schema.bus_key(job_id, ordinal),
                UpdateExpression=(
                    f"SET #state = :published, published_at = :now, {schema.TTL_ATTRIBUTE} = :ttl "
                    f"REMOVE claim, claimed_until, {schema.GSI2_PK}, {schema.GSI2_SK}"
                ),
                ConditionExpression="#state = :pending",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":published": PUBLISHED,
                    ":pending": PENDING,
                    ":now": iso(now),
                    ":ttl": int((now + PUBLISHED_TTL).timestamp()),
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def _release(self, job_id: str, ordinal: int, token: str, error: Exception) -> None:
        """The put failed: the claim ends now (the next drain, or the sweep's, tries again), the error is kept."""
        try:
            self.table.update_item(
                Key=schema.bus_key(job_id, ordinal),
                UpdateExpression="SET claimed_until = :now, last_error = :error ADD attempts :one",
                ConditionExpression="claim = :token",
                ExpressionAttributeValues={
                    ":now": iso(self.clock.now()),
                    ":error": f"{type(error).__name__}: {error}"[:300],
                    ":token": token,
                    ":one": 1,
                },
            )
        except Exception:  # the claim expires by itself
            logger.exception("a bus event's claim was not released", extra={"job_id": job_id})
