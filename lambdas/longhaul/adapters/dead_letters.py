"""Dead letters: indexed in the table for operators (`JOB#<id>/DEADLETTER#<step>#<item>`, listed newest first on
the `by_state` index) beside the message the state machine sent to the step's own SQS queue."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from longhaul.core import schema
from longhaul.core.contracts import DeadLetter
from longhaul.storage.dynamo import plain, query_prefix

SCAN_LIMIT = 1000


class QueueDeadLetters:
    def __init__(self, table: Any, sqs: Any, queues: Mapping[str, Mapping[str, str]]) -> None:
        self._table = table
        self._sqs = sqs
        self._queues = queues  # {"workflow": {"step": queue URL}}

    def record(self, letter: DeadLetter) -> None:
        record = letter.model_dump(mode="json")
        self._table.put_item(
            Item={
                **record,
                **schema.dead_letter_key(letter.job_id, letter.step, letter.item),
                schema.GSI2_PK: schema.DEAD_LETTER_PARTITION,
                schema.GSI2_SK: f"{record['failed_at']}#{letter.job_id}",
            }
        )

    def find(
        self, *, step: str | None = None, workflow: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        response = self._table.query(
            IndexName=schema.BY_STATE,
            KeyConditionExpression=f"{schema.GSI2_PK} = :pk",
            ExpressionAttributeValues={":pk": schema.DEAD_LETTER_PARTITION},
            ScanIndexForward=False,
            Limit=SCAN_LIMIT,
        )
        wanted = {"step": step, "workflow": workflow, "tenant_id": tenant}
        letters = [_letter(i) for i in response.get("Items", [])]
        matching = [d for d in letters if all(v is None or getattr(d, k) == v for k, v in wanted.items())]
        return matching[:limit]

    def of_job(self, job_id: str) -> list[DeadLetter]:
        return [_letter(i) for i in query_prefix(self._table, schema.job_pk(job_id), schema.DEAD_LETTER_PREFIX)]

    def purge(self, job_id: str) -> int:
        letters = query_prefix(self._table, schema.job_pk(job_id), schema.DEAD_LETTER_PREFIX)
        with self._table.batch_writer() as batch:
            for item in letters:
                batch.delete_item(Key={"pk": item["pk"], "sk": item["sk"]})
        expected: dict[str, int] = {}
        for item in letters:
            queue = self._queues.get(item["workflow"], {}).get(item["step"])
            if queue:
                expected[queue] = expected.get(queue, 0) + 1
        return sum(self._delete_messages(queue, job_id, count) for queue, count in expected.items())

    def _delete_messages(self, queue: str, job_id: str, expected: int, *, rounds: int = 10) -> int:
        """Delete the job's messages from a queue; others are made visible again at once. SQS may answer a receive
        with nothing while messages exist, so an empty answer is retried with long polling, within `rounds`."""
        removed = 0
        for attempt in range(rounds):
            if removed >= expected:
                break
            messages = self._sqs.receive_message(
                QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=1 if attempt else 0
            ).get("Messages", [])
            for message in messages:
                try:
                    body = json.loads(message["Body"])
                except ValueError:
                    body = {}
                if isinstance(body, dict) and body.get("job_id") == job_id:
                    self._sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
                    removed += 1
                else:
                    self._sqs.change_message_visibility(
                        QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )
        return removed


def _letter(item: Mapping[str, Any]) -> DeadLetter:
    return DeadLetter.model_validate({k: v for k, v in plain(item).items() if k in DeadLetter.model_fields})
