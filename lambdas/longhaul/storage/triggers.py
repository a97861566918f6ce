"""A tenant's schedules and triggers, items of its partition (`SCHEDULE#<id>`, `TRIGGER#<id>`), and the objects of an
S3 inbox's open batch windows (`WINDOW#<trigger>#<window>#<upload>`, one item per object: what the window's job reads).

A record's definition is kept as one JSON attribute (`body`): inputs, templates and patterns are any JSON, which
DynamoDB's number type would change (floats); what the platform filters on (kind, id, enabled) is beside it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from boto3.dynamodb.conditions import Key

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.errors import TransientError
from longhaul.storage.dynamo import Cancelled, backoff, plain, transact

Kind = Literal["SCHEDULE", "TRIGGER"]
WINDOW_PREFIX = "WINDOW#"
WINDOW_ITEM_DAYS = 2  # a window's items outlive it by far: its job is started within seconds of its end
WINDOW_TRIES = 8
OUTCOME = ("last_fired_at", "last_job_id", "last_error")  # a record's last fire, beside its definition


def record_key(tenant_id: str, kind: Kind, record_id: str) -> dict[str, str]:
    return {schema.PK: f"TENANT#{tenant_id}", schema.SK: f"{kind}#{record_id}"}


class TriggerStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.clock = clock or SystemClock()

    # ------------------------------------------------------------------ records

    def put(self, tenant_id: str, kind: Kind, record_id: str, body: dict[str, Any]) -> None:
        self.table.put_item(
            Item={
                **record_key(tenant_id, kind, record_id),
                "tenant_id": tenant_id,
                "record_id": record_id,
                "body": json.dumps(body, separators=(",", ":")),
            },
            ConditionExpression="attribute_not_exists(pk)",
        )

    def get(self, tenant_id: str, kind: Kind, record_id: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key=record_key(tenant_id, kind, record_id), ConsistentRead=True).get("Item")
        return _body(item) if item else None

    def replace(self, tenant_id: str, kind: Kind, record_id: str, body: dict[str, Any]) -> None:
        """Write a record's new definition (it must exist; its last fire's outcome is kept)."""
        self.table.update_item(
            Key=record_key(tenant_id, kind, record_id),
            UpdateExpression="SET #body = :body",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#body": "body"},
            ExpressionAttributeValues={":body": json.dumps({k: v for k, v in body.items() if k not in OUTCOME})},
        )

    def note(self, tenant_id: str, kind: Kind, record_id: str, **outcome: Any) -> None:
        """Record a fire's outcome (`last_fired_at`, `last_job_id`, `last_error`; None removes one) beside the record's
        definition, if the record still exists (a change of the definition meanwhile is kept)."""
        sets = {k: v for k, v in outcome.items() if k in OUTCOME and v is not None}
        removes = [k for k, v in outcome.items() if k in OUTCOME and v is None]
        expression = " ".join(
            part
            for part in (
                ("SET " + ", ".join(f"{k} = :{k}" for k in sets)) if sets else "",
                ("REMOVE " + ", ".join(removes)) if removes else "",
            )
            if part
        )
        if not expression:
            return
        arguments: dict[str, Any] = {
            "Key": record_key(tenant_id, kind, record_id),
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(pk)",
        }
        if sets:
            arguments["ExpressionAttributeValues"] = {f":{k}": v for k, v in sets.items()}
        with contextlib.suppress(self.table.meta.client.exceptions.ConditionalCheckFailedException):  # deleted
            self.table.update_item(**arguments)

    def delete(self, tenant_id: str, kind: Kind, record_id: str) -> bool:
        response = self.table.delete_item(Key=record_key(tenant_id, kind, record_id), ReturnValues="ALL_OLD")
        return bool(response.get("Attributes"))

    def records(self, tenant_id: str, kind: Kind) -> list[dict[str, Any]]:
        """The tenant's records of `kind`, oldest id first (ids are time-ordered)."""
        bodies: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(schema.PK).eq(f"TENANT#{tenant_id}") & Key(schema.SK).begins_with(f"{kind}#"),
            "ConsistentRead": True,
        }
        while True:
            page = self.table.query(**kwargs)
            bodies.extend(_body(item) for item in page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                return bodies
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ------------------------------------------------------------------ batch windows

    def join_window(
        self, tenant_id: str, trigger_id: str, upload_id: str, document: dict[str, Any], *, seconds: int
    ) -> tuple[str, datetime | None]:
        """Put an object in its trigger's open batch window, or open one (it closes `seconds` from now): (the window,
        when it closes if this object opened it, else None). An object is added only while its window is open (a
        transaction guarded by the window's marker), so a window that was closed, however early, takes nothing more:
        the next object opens the next window."""
        client = self.table.meta.client
        partition = f"TENANT#{tenant_id}"
        marker = {schema.PK: partition, schema.SK: f"{WINDOW_PREFIX}{trigger_id}"}
        for tries in range(WINDOW_TRIES):
            now = self.clock.now()
            expires = int(now.timestamp()) + WINDOW_ITEM_DAYS * 86400
            current = self.table.get_item(Key=marker, ConsistentRead=True).get("Item")
            open_window = (
                current is not None and current.get("state") == "open" and str(current["closes_at"]) > iso(now)
            )
            window = str(current["window"]) if open_window and current else f"w{int(now.timestamp() * 1000)}"
            member = {
                "Put": {
                    "TableName": self.table.name,
                    "Item": {
                        schema.PK: partition,
                        schema.SK: f"{WINDOW_PREFIX}{trigger_id}#{window}#{upload_id}",
                        "document": json.dumps(document),
                        "added_at": iso(now),
                        schema.TTL_ATTRIBUTE: expires,
                    },
                }
            }
            if open_window:
                guard: dict[str, Any] = {
                    "ConditionCheck": {
                        "TableName": self.table.name,
                        "Key": marker,
                        "ConditionExpression": "#window = :window AND #state = :open AND closes_at > :now",
                        "ExpressionAttributeNames": {"#window": "window", "#state": "state"},
                        "ExpressionAttributeValues": {":window": window, ":open": "open", ":now": iso(now)},
                    }
                }
                closes = None
            else:
                closes = now + timedelta(seconds=seconds)
                guard = {
                    "Put": {
                        "TableName": self.table.name,
                        "Item": {
                            **marker,
                            "window": window,
                            "state": "open",
                            "closes_at": iso(closes),
                            schema.TTL_ATTRIBUTE: expires,
                        },
                        # the window it replaces is closed or past (or there was none)
                        "ConditionExpression": "attribute_not_exists(pk) OR #state = :closed OR closes_at <= :now",
                        "ExpressionAttributeNames": {"#state": "state"},
                        "ExpressionAttributeValues": {":closed": "closed", ":now": iso(now)},
                    }
                }
            try:
                transact(client, [guard, member])
                return window, closes
            except Cancelled:
                backoff(tries)  # another object opened or a timer closed the window meanwhile: look again
        raise TransientError("the trigger's batch window kept changing; the object's event is delivered again")

    def close_window(self, tenant_id: str, trigger_id: str, window: str) -> list[dict[str, Any]]:
        """Close the window (nothing joins it any more) and answer its objects' documents, in key order."""
        marker = {schema.PK: f"TENANT#{tenant_id}", schema.SK: f"{WINDOW_PREFIX}{trigger_id}"}
        # (a later window replaced it: it was closed already)
        with contextlib.suppress(self.table.meta.client.exceptions.ConditionalCheckFailedException):
            self.table.update_item(
                Key=marker,
                UpdateExpression="SET #state = :closed",
                ConditionExpression="#window = :window",
                ExpressionAttributeNames={"#state": "state", "#window": "window"},
                ExpressionAttributeValues={":closed": "closed", ":window": window},
            )
        prefix = f"{WINDOW_PREFIX}{trigger_id}#{window}#"
        documents: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(schema.PK).eq(f"TENANT#{tenant_id}") & Key(schema.SK).begins_with(prefix),
            "ConsistentRead": True,
        }
        while True:
            page = self.table.query(**kwargs)
            documents.extend(json.loads(plain(item)["document"]) for item in page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                return documents
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _body(item: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(item["body"])
    body.update({k: item[k] for k in OUTCOME if k in item})
    return body
