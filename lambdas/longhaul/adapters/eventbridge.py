"""The EventBridge bus (`core.ports.EventPublisher`): one `PutEvents` entry per call, so a job's events reach the bus
in the order they are put; and the operators' tap of it (`core.ports.EventsTap`)."""

from __future__ import annotations

import json
from typing import Any

from longhaul.core.bus import SOURCE
from longhaul.core.errors import TransientError


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def put(self, detail_type: str, detail: str) -> None:
        answer = self._client.put_events(
            Entries=[{"Source": SOURCE, "DetailType": detail_type, "Detail": detail, "EventBusName": self._bus}]
        )
        if answer.get("FailedEntryCount"):
            failed = (answer.get("Entries") or [{}])[0]
            raise TransientError(
                f"the bus refused the event: {failed.get('ErrorCode', '?')} {failed.get('ErrorMessage', '')}".strip()
            )


class SqsEventsTap:
    """The operators' tap (`core.ports.EventsTap`): an SQS queue a rule on the bus sends every Longhaul event to.
    What is read is deleted: each event is answered to one reader."""

    BATCH = 10  # SQS's most messages per receive

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue = queue_url

    def take(self, *, limit: int, wait_seconds: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        wait = wait_seconds
        while len(found) < limit:
            messages = self._client.receive_message(
                QueueUrl=self._queue,
                MaxNumberOfMessages=min(self.BATCH, limit - len(found)),
                WaitTimeSeconds=wait,
            ).get("Messages", [])
            if not messages:
                break
            wait = 0  # the rest: only what is there already
            for message in messages:
                try:
                    envelope = json.loads(message["Body"])
                except ValueError:
                    envelope = None
                if isinstance(envelope, dict):
                    found.append(envelope)
            self._client.delete_message_batch(
                QueueUrl=self._queue,
                Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)],
            )
        return found
