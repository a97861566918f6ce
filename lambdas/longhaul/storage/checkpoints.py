"""Checkpoints in DynamoDB: each step's (and fan-out item's) record, and the model charges of a job.

A checkpoint commits only while its job runs (a transaction with a condition check on the job), so a step of a job
cancelled meanwhile never commits; a charge is made once per charge id (job attempt, step, item).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.records import Charge, StepRecord
from longhaul.storage.dynamo import plain, query_prefix, transact_guarded, update_expression
from longhaul.storage.jobs import ACTIVE, TransitionRejected


def _step_key(job_id: str, step: str, item: int | None) -> dict[str, str]:
    return {schema.PK: schema.job_pk(job_id), schema.SK: schema.step_sk(step, item)}


def _items_done_key(job_id: str, step: str) -> dict[str, str]:
    return {schema.PK: schema.job_pk(job_id), schema.SK: schema.items_done_sk(step)}


class CheckpointStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.client = table.meta.client
        self.clock = clock or SystemClock()

    def get_step(self, job_id: str, step: str, item: int | None = None) -> StepRecord | None:
        got = self.table.get_item(Key=_step_key(job_id, step, item), ConsistentRead=True)
        return StepRecord.model_validate(plain(got["Item"])) if "Item" in got else None

    def put_step(self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any]) -> None:
        """Set fields of a step record; entering `running` counts an attempt."""
        fields = {**fields, "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        starting = fields.get("status") == "running"
        update = update_expression(fields, add="attempts :one" if starting else "")
        if starting:
            update["ExpressionAttributeValues"][":one"] = 1
        self.table.update_item(Key=_step_key(job_id, step, item), **update)

    def commit_step(self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any]) -> None:
        """Write a step's checkpoint only while the job runs: a step of a job cancelled meanwhile never commits."""
        fields = {**fields, "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        live = {f":s{i}": s.value for i, s in enumerate(ACTIVE)}
        committed = transact_guarded(
            self.client,
            [
                {
                    "ConditionCheck": {
                        "TableName": self.table.name,
                        "Key": schema.job_key(job_id),
                        "ConditionExpression": f"#status IN ({', '.join(live)})",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": live,
                    }
                },
                {
                    "Update": {
                        "TableName": self.table.name,
                        "Key": _step_key(job_id, step, item),
                        **update_expression(fields),
                    }
                },
            ],
            what=f"committing {step}",
        )
        if not committed:
            raise TransitionRejected(f"job {job_id} is no longer running; {step} not committed")

    def steps(self, job_id: str) -> list[StepRecord]:
        items = query_prefix(self.table, schema.job_pk(job_id), schema.STEP_PREFIX)
        return [StepRecord.model_validate(i) for i in items]

    def delete_steps(self, job_id: str, records: Iterable[tuple[str, int | None]]) -> None:
        """Delete step records; a dropped item also leaves its fan-out's progress count (it will commit again)."""
        dropped: dict[str, set[int]] = {}
        with self.table.batch_writer() as batch:
            for step, item in records:
                batch.delete_item(Key=_step_key(job_id, step, item))
                if item is not None:
                    dropped.setdefault(step, set()).add(item)
        for step, items in dropped.items():
            self.table.update_item(
                Key=_items_done_key(job_id, step),
                UpdateExpression="DELETE #items :items",
                ExpressionAttributeNames={"#items": "items"},
                ExpressionAttributeValues={":items": items},
            )

    def count_item(self, job_id: str, step: str, item: int) -> int:
        """Count a committed item of a fan-out; how many of its items have committed. Atomic and idempotent: the
        count is the size of a set of item numbers, so a duplicate or retried commit of an item adds nothing."""
        got = self.table.update_item(
            Key=_items_done_key(job_id, step),
            UpdateExpression="ADD #items :item",
            ExpressionAttributeNames={"#items": "items"},
            ExpressionAttributeValues={":item": {item}},
            ReturnValues="ALL_NEW",  # (moto returns no UPDATED_NEW attribute when the set did not change)
        )
        return len(got["Attributes"].get("items", ()))

    # ------------------------------------------------------------------ charges

    def charges(self, job_id: str) -> list[Charge]:
        return [Charge.model_validate(i) for i in query_prefix(self.table, schema.job_pk(job_id), schema.CHARGE_PREFIX)]
