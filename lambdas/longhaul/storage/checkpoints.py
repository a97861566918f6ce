"""Checkpoints in DynamoDB: each step's (and fan-out item's) record, and the model charges of a job.

A checkpoint commits only while its job runs (a transaction with a condition check on the job), so a step of a job
cancelled meanwhile never commits; a charge is made once per charge id (job attempt, step, item).

A step's bookkeeping is three requests on its happy path: `read` (the job and the step's record in one
BatchGetItem), then the runner's two transactions through `JobStore.write` — one to start (its events, the job's
fields, `running_write`), one to commit (`committed_write`, its event, progress and usage). A fan-out's committed
items are a number set on the job item (`done_attribute`, one ADD per item: idempotent, never read first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.errors import TransientError
from longhaul.core.records import Charge, Job, StepRecord
from longhaul.storage.dynamo import backoff, plain, query_prefix, transact_guarded, update_expression
from longhaul.storage.jobs import ACTIVE, TransitionRejected

READ_TRIES = 8
# A BatchGetItem reads at most 100 items: the job's and 99 records.
READ_ITEMS_MAX = 99


def _step_key(job_id: str, step: str, item: int | None) -> dict[str, str]:
    return {schema.PK: schema.job_pk(job_id), schema.SK: schema.step_sk(step, item)}


def done_attribute(step: str) -> str:
    """The job item's attribute holding the numbers of a fan-out's committed items (its progress count)."""
    return f"{schema.ITEMS_DONE_PREFIX}{step}"


class CheckpointStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.client = table.meta.client
        self.clock = clock or SystemClock()

    def read(self, job_id: str, step: str, item: int | None = None) -> tuple[Job | None, StepRecord | None]:
        """The job and the step's (or item's) record, in one consistent BatchGetItem."""
        job, records = self.read_items(job_id, step, [item])
        return job, records.get(item)

    def read_items(
        self, job_id: str, step: str, items: Sequence[int | None]
    ) -> tuple[Job | None, dict[int | None, StepRecord]]:
        """The job and the records of a step's items (at most `READ_ITEMS_MAX`), in one consistent BatchGetItem (and
        its retries of what it left unprocessed)."""
        if len(items) > READ_ITEMS_MAX:
            raise ValueError(f"{len(items)} records in one read; at most {READ_ITEMS_MAX}")
        keys = [schema.job_key(job_id), *(_step_key(job_id, step, item) for item in dict.fromkeys(items))]
        request: dict[str, Any] = {self.table.name: {"Keys": keys, "ConsistentRead": True}}
        found: list[dict[str, Any]] = []
        for _ in range(READ_TRIES):
            response = self.client.batch_get_item(RequestItems=request)
            found.extend(response.get("Responses", {}).get(self.table.name, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            backoff(_)
        else:
            raise TransientError(f"job {job_id}: its records stayed unprocessed; retry")
        job = next((i for i in found if i[schema.SK] == schema.JOB_SK), None)
        records = [StepRecord.model_validate(plain(i)) for i in found if i[schema.SK] != schema.JOB_SK]
        return Job.model_validate(plain(job)) if job else None, {r.item: r for r in records}

    def running_write(self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The transaction item that marks a step (or item) running and counts its attempt; never over a checkpoint
        committed at the same input version (a concurrent delivery that committed first: this one has nothing to do,
        and its `running` must not hide that checkpoint from its commit's condition or from a replay)."""
        fields = {**fields, "status": "running", "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        update = update_expression(fields, add="attempts :one")
        update["ExpressionAttributeValues"][":one"] = 1
        return _unless_committed(self.table.name, _step_key(job_id, step, item), update, fields["input_version"])

    def committed_write(
        self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any], *, count_attempt: bool = False
    ) -> dict[str, Any]:
        """The transaction item that writes a step's checkpoint (the job's condition, in the same transaction, keeps a
        step of a job cancelled meanwhile from committing); `count_attempt`: it counts the attempt too (one that was
        never marked running)."""
        fields = {**fields, "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        update = update_expression(fields, add="attempts :one" if count_attempt else "")
        if count_attempt:
            update["ExpressionAttributeValues"][":one"] = 1
        # once per input version: a concurrent delivery that committed first leaves nothing to commit
        return _unless_committed(self.table.name, _step_key(job_id, step, item), update, fields.get("input_version"))

    def get_step(self, job_id: str, step: str, item: int | None = None) -> StepRecord | None:
        got = self.table.get_item(Key=_step_key(job_id, step, item), ConsistentRead=True)
        return StepRecord.model_validate(plain(got["Item"])) if "Item" in got else None

    def put_step(
        self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any], *, count_attempt: bool = False
    ) -> None:
        """Set fields of a step record; entering `running` counts an attempt (so does `count_attempt`: the record of
        an attempt that was never marked running)."""
        fields = {**fields, "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        starting = fields.get("status") == "running" or count_attempt
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
        if dropped:
            names = {f"#d{i}": done_attribute(step) for i, step in enumerate(dropped)}
            values = {f":d{i}": items for i, items in enumerate(dropped.values())}
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="DELETE " + ", ".join(f"#d{i} :d{i}" for i in range(len(dropped))),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )

    # ------------------------------------------------------------------ charges

    def charges(self, job_id: str) -> list[Charge]:
        return [Charge.model_validate(i) for i in query_prefix(self.table, schema.job_pk(job_id), schema.CHARGE_PREFIX)]


def _unless_committed(table: str, key: dict[str, Any], update: dict[str, Any], version: Any) -> dict[str, Any]:
    """A transaction item updating a step record unless it holds a checkpoint committed at input version `version`."""
    update["ExpressionAttributeNames"].update({"#committed": "status", "#version": "input_version"})
    update["ExpressionAttributeValues"].update({":committed": "succeeded", ":version": version})
    return {
        "Update": {
            "TableName": table,
            "Key": key,
            "ConditionExpression": "NOT (#committed = :committed AND #version = :version)",
            **update,
        }
    }
