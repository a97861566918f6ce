"""Admission's adapters: the intake queues on SQS (one per SLA class) and the dispatcher's wake-up (an asynchronous
Lambda invoke: the caller never waits for the round)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from longhaul.core.clock import iso
from longhaul.core.observability import logger
from longhaul.core.ports import Waiting

RECEIVE_BATCH = 10  # SQS's most per ReceiveMessage
HIDE_SECONDS = 120  # a received message stays hidden while its round runs (longer than the dispatcher's timeout)


class SqsIntakeQueues:
    def __init__(self, client: Any, queues: Mapping[str, str]) -> None:
        self._client = client
        self._queues = dict(queues)

    def send(self, waiting: Waiting) -> None:
        body = {
            "job_id": waiting.job_id,
            "tenant_id": waiting.tenant_id,
            "sla_class": waiting.sla_class,
            "queued_at": iso(waiting.queued_at),
        }
        self._client.send_message(QueueUrl=self._queues[waiting.sla_class], MessageBody=json.dumps(body))

    def receive(self, sla_class: str, limit: int) -> list[Waiting]:
        received: list[Waiting] = []
        while len(received) < limit:
            response = self._client.receive_message(
                QueueUrl=self._queues[sla_class],
                MaxNumberOfMessages=min(RECEIVE_BATCH, limit - len(received)),
                VisibilityTimeout=HIDE_SECONDS,
                WaitTimeSeconds=0,
            )
            messages = response.get("Messages", [])
            for message in messages:
                try:
                    body = json.loads(message["Body"])
                    received.append(
                        Waiting(
                            job_id=str(body["job_id"]),
                            tenant_id=str(body["tenant_id"]),
                            sla_class=sla_class,
                            queued_at=datetime.fromisoformat(str(body["queued_at"]).replace("Z", "+00:00")),
                            receipt=message["ReceiptHandle"],
                        )
                    )
                except (KeyError, ValueError):  # not ours: it goes to the dead-letter queue after its receives
                    logger.warning("unreadable intake message", extra={"queue": sla_class})
            if len(messages) < RECEIVE_BATCH:
                break
        return received

    def delete(self, received: list[Waiting]) -> None:
        for sla_class, batch in _batches(received):
            entries = [{"Id": str(i), "ReceiptHandle": w.receipt} for i, w in enumerate(batch)]
            self._client.delete_message_batch(QueueUrl=self._queues[sla_class], Entries=entries)

    def put_back(self, received: list[Waiting]) -> None:
        for sla_class, batch in _batches(received):
            entries = [{"Id": str(i), "ReceiptHandle": w.receipt, "VisibilityTimeout": 0} for i, w in enumerate(batch)]
            self._client.change_message_visibility_batch(QueueUrl=self._queues[sla_class], Entries=entries)


def _batches(received: list[Waiting]) -> list[tuple[str, list[Waiting]]]:
    """Per class, in batches of at most ten (SQS's batch limit)."""
    out: list[tuple[str, list[Waiting]]] = []
    for sla_class in sorted({w.sla_class for w in received}):
        mine = [w for w in received if w.sla_class == sla_class]
        out += [(sla_class, mine[i : i + RECEIVE_BATCH]) for i in range(0, len(mine), RECEIVE_BATCH)]
    return out


class LambdaWake:
    """Wakes the dispatcher with an asynchronous invoke (`InvocationType=Event`): it returns once queued."""

    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def wake(self) -> None:
        self._client.invoke(FunctionName=self._function, InvocationType="Event", Payload=b'{"source": "wake"}')
