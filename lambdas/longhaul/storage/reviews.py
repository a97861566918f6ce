"""The review aggregate: a human review of a job's draft, listed per tenant and status, and its task token.

The token is its own item (no index key, so no index ever projects it) read only by the decision and the review
lane; nothing that builds a response, an event or a log line reads it. Every change of a review is conditional on
its current status, so two decisions, or a decision and the deadline, cannot both win.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.records import ReviewRecord, ReviewStatus
from longhaul.storage.dynamo import plain, update_expression
from longhaul.storage.listing import BadCursor

PAGE_MAX = 200


class ReviewClosed(Exception):
    """The review is no longer pending (decided, expired or cancelled): `status` says which."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def _index_keys(record: ReviewRecord, status: str) -> dict[str, str]:
    return {
        schema.GSI1_PK: schema.reviews_partition(record.tenant_id, status),
        schema.GSI1_SK: f"{iso(record.since)}#{record.review_id}",
    }


class ReviewStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, retention_days: int = 0) -> None:
        self.table = table
        self.clock = clock or SystemClock()
        self.retention_days = retention_days  # 0: kept as long as its job; else DynamoDB's TTL removes it after

    def open_write(self, record: ReviewRecord) -> dict[str, Any]:
        """The transaction item that creates the review if it does not exist: for a review opened with its job's
        own change (a manual completion)."""
        return {
            "Put": {
                "TableName": self.table.name,
                "Item": self._item(record, self.retention_days),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    @staticmethod
    def _item(record: ReviewRecord, retention_days: int = 0) -> dict[str, Any]:
        ttl = {schema.TTL_ATTRIBUTE: int(record.since.timestamp()) + retention_days * 86400} if retention_days else {}
        return {
            **schema.review_key(record.review_id),
            **record.model_dump(mode="json", exclude_none=True),
            **_index_keys(record, record.status),
            **ttl,
        }

    def open(self, record: ReviewRecord) -> ReviewRecord:
        """Create the review; one that exists already (a retried step) is returned as it is."""
        item = self._item(record, self.retention_days)
        try:
            self.table.put_item(Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            existing = self.get(record.review_id)
            assert existing is not None
            return existing
        return record

    def get(self, review_id: str, *, tenant_id: str | None = None) -> ReviewRecord | None:
        """The review, or None (also when it belongs to another tenant: a 404, never a 403)."""
        item = self.table.get_item(Key=schema.review_key(review_id), ConsistentRead=True).get("Item")
        if item is None or (tenant_id is not None and item["tenant_id"] != tenant_id):
            return None
        return ReviewRecord.model_validate(plain(item))

    # ------------------------------------------------------------------ the token (server side only)

    def set_token(self, review_id: str, token: str) -> None:
        self.table.put_item(Item={**schema.review_token_key(review_id), "token": token, "at": iso(self.clock.now())})

    def token(self, review_id: str) -> str | None:
        item = self.table.get_item(Key=schema.review_token_key(review_id), ConsistentRead=True).get("Item")
        return str(item["token"]) if item and item.get("token") else None

    def drop_token(self, review_id: str) -> None:
        """Forget the token (an update, not a delete: the API and the lane may not delete items)."""
        with contextlib.suppress(self.table.meta.client.exceptions.ConditionalCheckFailedException):
            self.table.update_item(
                Key=schema.review_token_key(review_id),
                UpdateExpression="REMOVE #token",
                ConditionExpression="attribute_exists(#token)",
                ExpressionAttributeNames={"#token": "token"},
            )

    # ------------------------------------------------------------------ changes, each conditional on `pending`

    def change(
        self, record: ReviewRecord, fields: Mapping[str, Any], *, status: ReviewStatus | None = None
    ) -> ReviewRecord:
        """Set `fields` (and move to `status`) while the review is pending; `ReviewClosed` otherwise."""
        now = iso(self.clock.now())
        updates: dict[str, Any] = {**fields, "updated_at": now}
        if status is not None:
            updates.update({"status": status, **_index_keys(record, status)})
        update = update_expression(updates)
        try:
            self.table.update_item(
                Key=schema.review_key(record.review_id),
                UpdateExpression=update["UpdateExpression"],
                ConditionExpression="#status = :pending",
                ExpressionAttributeNames={**update["ExpressionAttributeNames"], "#status": "status"},
                ExpressionAttributeValues={**update["ExpressionAttributeValues"], ":pending": "pending"},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            latest = self.get(record.review_id)
            raise ReviewClosed(latest.status if latest else "missing") from None
        updated = self.get(record.review_id)
        assert updated is not None
        return updated

    def decision_write(self, record: ReviewRecord, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The transaction item that decides the review (`fields` set, status `decided`) on the condition that it is
        still pending: for a decision that commits with its job's own change (a manual completion)."""
        updates = {**fields, "updated_at": iso(self.clock.now()), "status": "decided", **_index_keys(record, "decided")}
        update = update_expression(updates)
        return {
            "Update": {
                "TableName": self.table.name,
                "Key": schema.review_key(record.review_id),
                "UpdateExpression": update["UpdateExpression"],
                "ConditionExpression": "#status = :pending",
                "ExpressionAttributeNames": {**update["ExpressionAttributeNames"], "#status": "status"},
                "ExpressionAttributeValues": {**update["ExpressionAttributeValues"], ":pending": "pending"},
            }
        }

    # ------------------------------------------------------------------ listing

    def page(
        self,
        tenant_id: str,
        status: ReviewStatus,
        *,
        limit: int,
        cursor: str | None = None,
        visible: Callable[[ReviewRecord], bool] | None = None,
    ) -> tuple[list[ReviewRecord], str | None]:
        """A tenant's reviews in a status, newest first, and the cursor of the next page (None at the end). With
        `visible` (a reviewer's groups), only the reviews it admits: the page is filled from as many reads as that
        takes, and the cursor is after the last review returned."""
        partition = schema.reviews_partition(tenant_id, status)
        want = max(1, min(limit, PAGE_MAX))
        start = _decode(cursor, partition) if cursor is not None else None
        found: list[ReviewRecord] = []
        while True:
            kwargs: dict[str, Any] = {
                "IndexName": schema.BY_TENANT,
                "KeyConditionExpression": f"{schema.GSI1_PK} = :pk",
                "ExpressionAttributeValues": {":pk": partition},
                "ScanIndexForward": False,
                "Limit": want - len(found) if visible is None else PAGE_MAX,
            }
            if start is not None:
                kwargs["ExclusiveStartKey"] = start
            response = self.table.query(**kwargs)
            items = response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            for n, item in enumerate(items):
                record = ReviewRecord.model_validate(plain(item))
                if visible is not None and not visible(record):
                    continue
                found.append(record)
                if len(found) == want:
                    more = last is not None or n < len(items) - 1
                    return found, (_encode(_position(item)) if more else None)
            if last is None:
                return found, None
            start = dict(last)


def _position(item: Mapping[str, Any]) -> dict[str, Any]:
    """The index position of an item (what the query's `LastEvaluatedKey` would be after it)."""
    return {k: item[k] for k in (schema.PK, schema.SK, schema.GSI1_PK, schema.GSI1_SK)}


def _encode(key: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(dict(key), sort_keys=True).encode()).decode().rstrip("=")


def _decode(cursor: str, partition: str) -> dict[str, str]:
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except ValueError:
        raise BadCursor("not a cursor of this listing") from None
    expected = {schema.PK, schema.SK, schema.GSI1_PK, schema.GSI1_SK}
    if not isinstance(key, dict) or set(key) != expected or key[schema.GSI1_PK] != partition:
        raise BadCursor("not a cursor of this listing")
    return {k: str(v) for k, v in key.items()}
