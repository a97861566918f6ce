"""The transactional outbox of webhooks: which status changes announce themselves, the item written in the same
DynamoDB transaction as the change, and the store the dispatcher works through.

A webhook's id is derived from the job and the sequence number of the event that recorded the change, so the id is
the same on every attempt (receivers deduplicate by it) and a retried transition cannot write two. Its body is
fixed when it is written: every attempt signs and sends the same bytes. It never carries the result, only the job
id, its status and links.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.contracts import CallbackStatus, JobStatus
from longhaul.core.records import Job, OutboxRecord, OutboxStatus
from longhaul.storage.dynamo import plain, update_expression

S = JobStatus
# The status changes that send a webhook, and the event type each one sends.
WEBHOOK_EVENTS: dict[JobStatus, str] = {
    S.COMPLETED: "job.completed",
    S.FAILED: "job.failed",
    S.CANCELLED: "job.cancelled",
    S.EXPIRED: "job.expired",
    S.WAITING_FOR_REVIEW: "review.requested",
}
# Webhooks that announce something other than a status change (`JobStore.write(announce=…)`).
PROVISIONAL_EVENT = "job.provisional"
# An operator escalated the job (sent only to tenants whose policy says `webhook_escalations`).
ESCALATED_EVENT = "job.escalated"
EVENT_TYPES = (*WEBHOOK_EVENTS.values(), PROVISIONAL_EVENT, ESCALATED_EVENT)
# A webhook in one of these statuses is settled: no attempt changes it again (only an operator's redelivery does).
SETTLED: tuple[OutboxStatus, ...] = ("delivered", "dead")
ERROR_LIMIT = 300


def webhook_id(job_id: str, seq: int) -> str:
    return "msg_" + hashlib.sha256(f"{job_id}/{seq}".encode()).hexdigest()[:26]


def links(job: Job, review_id: str | None = None) -> dict[str, str]:
    base = f"{job.links_base or ''}/v1/jobs/{job.job_id}"
    found = {"job": base, "events": f"{base}/events", "result": f"{base}/result"}
    if review_id:
        found["review"] = f"{job.links_base or ''}/v1/reviews/{review_id}"
    return found


def body(job: Job, to: JobStatus, at: str, detail: Mapping[str, Any] | None, event: str | None = None) -> str:
    """The JSON every attempt of this webhook sends: the event, the job id and status, links; never the result (a
    provisional result's webhook names the step it comes from and links `…/result?provisional=true`)."""
    review_id = str((detail or {}).get("review_id") or "") or None
    data: dict[str, Any] = {
        "job_id": job.job_id,
        "workflow": job.workflow,
        "status": to.value,
        "links": links(job, review_id),
    }
    if review_id:
        data["review_id"] = review_id
    if event == PROVISIONAL_EVENT:
        data["as_of_step"] = str((detail or {}).get("step") or "")
        data["links"]["provisional_result"] = f"{data['links']['result']}?provisional=true"
    kind = event or WEBHOOK_EVENTS[to]
    return json.dumps({"type": kind, "timestamp": at, "data": data}, separators=(",", ":"))


def outbox_writes(
    table_name: str,
    job: Job,
    to: JobStatus,
    seq: int,
    at: str,
    detail: Mapping[str, Any] | None,
    *,
    event: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any], OutboxRecord | None]:
    """For a transition of `job` to `to` recorded as event `seq` (or, with `event`, that webhook event announcing
    event `seq` in status `to`): the transaction items to add, the job fields to set (its `callback`), and the
    outbox record (None when the job has no callback or the change sends none)."""
    if not job.callback_url or (event is None and to not in WEBHOOK_EVENTS):
        return [], {}, None
    identity = webhook_id(job.job_id, seq)
    record = OutboxRecord(
        webhook_id=identity,
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        event=event or WEBHOOK_EVENTS[to],
        url=job.callback_url,
        body=body(job, to, at, detail, event),
        created_at=datetime.fromisoformat(at.replace("Z", "+00:00")),
        correlation_id=job.correlation_id,
    )
    item = {
        **schema.outbox_key(identity),
        **record.model_dump(mode="json", exclude_none=True),
        schema.GSI2_PK: schema.outbox_partition("pending"),
        schema.GSI2_SK: at,
    }
    put = {"Put": {"TableName": table_name, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
    callback = CallbackStatus(status="pending", event=record.event, webhook_id=identity)
    return [put], {"callback": callback.model_dump(mode="json", exclude_none=True)}, record


class OutboxStore:
    """Webhooks waiting for, or done with, delivery; and the job's view of its latest one."""

    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.clock = clock or SystemClock()

    def get(self, identity: str) -> OutboxRecord | None:
        item = self.table.get_item(Key=schema.outbox_key(identity), ConsistentRead=True).get("Item")
        return OutboxRecord.model_validate(plain(item)) if item else None

    def attempted(self, record: OutboxRecord, *, delivered: bool, error: str | None = None, dead: bool = False) -> bool:
        """Record one attempt on the webhook and on the job's `callback` (never the job's status). False, and nothing
        written, when the webhook is already settled (`delivered` or `dead`): a late attempt never reopens it."""
        now = iso(self.clock.now())
        status: OutboxStatus = "delivered" if delivered else "dead" if dead else "retrying"
        message = (error or "")[:ERROR_LIMIT] or None
        fields: dict[str, Any] = {
            "status": status,
            "last_attempt_at": now,
            "last_error": message,
            schema.GSI2_PK: schema.outbox_partition(status),
            schema.GSI2_SK: now,
        }
        if delivered:
            fields["delivered_at"] = now
        update = update_expression(fields, add="attempts :one")
        if not self._settle_once(
            record,
            update,
            {":one": 1},
            condition="NOT #settled IN (:delivered, :dead)",
        ):
            return False
        self._show_on_job(record, status, message, now)
        return True

    def dead(self, record: OutboxRecord, error: str | None) -> bool:
        """Delivery gave up (the retries are exhausted): the webhook waits for an operator in its dead-letter queue.
        False when it was delivered meanwhile (a late attempt got through): delivered stays delivered."""
        now = iso(self.clock.now())
        fields: dict[str, Any] = {
            "status": "dead",
            schema.GSI2_PK: schema.outbox_partition("dead"),
            schema.GSI2_SK: now,
        }
        if error:
            fields["last_error"] = error[:ERROR_LIMIT]
        if not self._settle_once(record, update_expression(fields), {}, condition="#settled <> :delivered"):
            return False
        fresh = self.get(record.webhook_id) or record
        self._show_on_job(
            fresh, "dead", fresh.last_error, iso(fresh.last_attempt_at) if fresh.last_attempt_at else None
        )
        return True

    def _settle_once(
        self, record: OutboxRecord, update: Mapping[str, Any], values: Mapping[str, Any], *, condition: str
    ) -> bool:
        """Apply `update` to the webhook if it exists and `condition` holds on its status (`#settled`)."""
        try:
            self.table.update_item(
                Key=schema.outbox_key(record.webhook_id),
                UpdateExpression=update["UpdateExpression"],
                ConditionExpression=f"attribute_exists(pk) AND {condition}",
                ExpressionAttributeNames={**update["ExpressionAttributeNames"], "#settled": "status"},
                ExpressionAttributeValues={
                    **update["ExpressionAttributeValues"],
                    **values,
                    **{f":{s}": s for s in SETTLED if f":{s}" in condition},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def requeue(self, record: OutboxRecord) -> OutboxRecord:
        """An operator's redelivery: pending again, the same id and body, its attempts counted anew."""
        now = iso(self.clock.now())
        update = update_expression(
            {"status": "pending", schema.GSI2_PK: schema.outbox_partition("pending"), schema.GSI2_SK: now},
            extra_set=("attempts = :zero",),
            add="redeliveries :one",
        )
        self.table.update_item(
            Key=schema.outbox_key(record.webhook_id),
            UpdateExpression=update["UpdateExpression"],
            ExpressionAttributeNames=update["ExpressionAttributeNames"],
            ExpressionAttributeValues={**update["ExpressionAttributeValues"], ":zero": 0, ":one": 1},
        )
        fresh = self.get(record.webhook_id) or record
        self._show_on_job(fresh, "pending", fresh.last_error, None)
        return fresh

    def by_status(self, status: str, *, limit: int = 100, before: str | None = None) -> list[OutboxRecord]:
        """Webhooks in a delivery status, newest first (`before`: only those last changed before that time)."""
        condition = Key(schema.GSI2_PK).eq(schema.outbox_partition(status))
        if before:
            condition = condition & Key(schema.GSI2_SK).lt(before)
        response = self.table.query(
            IndexName=schema.BY_STATE, KeyConditionExpression=condition, ScanIndexForward=False, Limit=limit
        )
        return [OutboxRecord.model_validate(plain(i)) for i in response.get("Items", [])]

    def _show_on_job(self, record: OutboxRecord, status: OutboxStatus, error: str | None, at: str | None) -> None:
        fresh = self.get(record.webhook_id) or record
        callback = CallbackStatus(
            status=status,
            event=record.event,
            webhook_id=record.webhook_id,
            attempts=fresh.attempts,
            last_attempt_at=datetime.fromisoformat(at.replace("Z", "+00:00")) if at else None,
            last_error=error,
        )
        # Only while this webhook is the job's latest (an older one never overwrites a newer one's view), and a
        # settled view only by an operator's redelivery (`pending`): an attempt's view that lands after the webhook
        # settled never replaces `delivered` or `dead`.
        condition = "#callback.webhook_id = :id"
        values: dict[str, Any] = {
            ":callback": callback.model_dump(mode="json", exclude_none=True),
            ":id": record.webhook_id,
        }
        if status != "pending":
            condition += " AND NOT #callback.#status IN (:delivered, :dead)"
            values |= {":delivered": "delivered", ":dead": "dead"}
        try:
            self.table.update_item(
                Key=schema.job_key(record.job_id),
                UpdateExpression="SET #callback = :callback",
                ConditionExpression=condition,
                ExpressionAttributeNames={
                    "#callback": "callback",
                    **({"#status": "status"} if status != "pending" else {}),
                },
                ExpressionAttributeValues=values,
            )
        except ClientError as error_:
            if error_.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
