"""The outbox of agents' side effects (one item per tool call with an effect), and the sagas that compensate them.

An effect's intent is written before the effect, in one transaction with an `effect_intended` event of the job and,
for an effect with a compensation, the job's `compensable_effects` count; the transaction holds only while the job
runs, so no effect starts for a job that is stopping, and a terminal transition racing with an intent conflicts on
the job's event counter and reads the job again: it always sees every effect that may have happened. The outcome
is written after the effect. A compensation is recorded on the same item, and a saga item per job attempt says
which attempt's effects the compensation lane undoes (written in the terminal transition's transaction, see
`storage/jobs.py`; listed by status on the `by_state` index for the dispatcher that starts its execution).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from boto3.dynamodb.conditions import Key

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.errors import CancelledError, TransientError
from longhaul.core.records import CompensationStatus, EffectRecord, EffectStatus, Job, SagaRecord
from longhaul.storage.dynamo import Cancelled, backoff, plain, query_prefix, transact, update_expression
from longhaul.storage.jobs import ACTIVE

INTENT_TRIES = 25
ERROR_LIMIT = 500


class EffectStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.client = table.meta.client
        self.clock = clock or SystemClock()

    # ------------------------------------------------------------------ effects

    def get(self, job_id: str, operation_id: str) -> EffectRecord | None:
        item = self.table.get_item(Key=schema.effect_key(job_id, operation_id), ConsistentRead=True).get("Item")
        return EffectRecord.model_validate(plain(item)) if item else None

    def of_job(self, job_id: str) -> list[EffectRecord]:
        """Every effect of the job, in the order their intents were written."""
        items = query_prefix(self.table, schema.job_pk(job_id), schema.EFFECT_PREFIX)
        return sorted((EffectRecord.model_validate(i) for i in items), key=lambda e: e.seq)

    def intend(self, effect: EffectRecord) -> EffectRecord:
        """Write the intent (and its event) while the job runs; the record as stored. `CancelledError` when the job no
        longer runs; an intent of the same operation written meanwhile is returned as it is."""
        for tries in range(INTENT_TRIES):
            job = self._job(effect.job_id)
            if job.status not in ACTIVE:
                raise CancelledError(
                    f"job {job.job_id} is {job.status.value}; {effect.tool} not started", step=effect.step
                )
            seq = job.event_seq + 1
            now = iso(self.clock.now())
            record = effect.model_copy(update={"seq": seq, "intended_at": self.clock.now()})
            item = {**schema.effect_key(effect.job_id, effect.operation_id), **record.model_dump(mode="json")}
            live = {f":s{i}": s.value for i, s in enumerate(ACTIVE)}
            counted = 1 if effect.compensation is not None else 0
            event = {
                schema.PK: schema.job_pk(effect.job_id),
                schema.SK: schema.event_sk(seq),
                "seq": seq,
                "type": "effect_intended",
                "at": now,
                "step": effect.step,
                "item": effect.turn,
                "detail": {
                    "operation_id": effect.operation_id,
                    "tool": effect.tool,
                    "side_effect": effect.side_effect,
                    "call": effect.call,
                },
            }
            try:
                transact(
                    self.client,
                    [
                        {
                            "Update": {
                                "TableName": self.table.name,
                                "Key": schema.job_key(effect.job_id),
                                "UpdateExpression": "SET event_seq = :seq ADD compensable_effects :counted",
                                "ConditionExpression": f"event_seq = :previous AND #status IN ({', '.join(live)})",
                                "ExpressionAttributeNames": {"#status": "status"},
                                "ExpressionAttributeValues": {
                                    ":seq": seq,
                                    ":previous": seq - 1,
                                    ":counted": counted,
                                    **live,
                                },
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table.name,
                                "Item": event,
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table.name,
                                "Item": item,
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ],
                )
                return record
            except Cancelled:
                existing = self.get(effect.job_id, effect.operation_id)
                if existing is not None:  # another delivery of the same call wrote it first
                    return existing
                backoff(tries)  # the job changed (an event, a status): read it again
        raise TransientError(f"the intent of {effect.operation_id} kept conflicting; retry", step=effect.step)

    def outcome(
        self,
        effect: EffectRecord,
        status: EffectStatus,
        *,
        output: Mapping[str, Any] | None = None,
        acted: bool = True,
        error: str | None = None,
    ) -> EffectRecord:
        """Record how the effect ended (its compensation fields are left alone)."""
        now = self.clock.now()
        fields: dict[str, Any] = {
            "status": status,
            "output": dict(output) if output is not None else None,
            "acted": acted,
            "error": (error or "")[:ERROR_LIMIT] or None,
            "done_at": iso(now),
        }
        self.table.update_item(Key=schema.effect_key(effect.job_id, effect.operation_id), **update_expression(fields))
        return effect.model_copy(
            update={
                "status": status,
                "output": fields["output"],
                "acted": acted,
                "error": fields["error"],
                "done_at": now,
            }
        )

    def compensating(
        self,
        effect: EffectRecord,
        status: CompensationStatus,
        *,
        owner: str | None = None,
        output: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> EffectRecord:
        """Record a compensation's intent (`pending`, with its owner) or its outcome (`done`, `failed`)."""
        now = self.clock.now()
        fields: dict[str, Any] = {"compensation_status": status}
        if owner is not None:
            fields["compensation_owner"] = owner
        if status != "pending":
            fields |= {
                "compensation_output": dict(output) if output is not None else None,
                "compensation_error": (error or "")[:ERROR_LIMIT] or None,
                "compensated_at": iso(now),
            }
        self.table.update_item(Key=schema.effect_key(effect.job_id, effect.operation_id), **update_expression(fields))
        fresh = self.get(effect.job_id, effect.operation_id)
        assert fresh is not None
        return fresh

    # ------------------------------------------------------------------ sagas

    def saga(self, job_id: str, attempt: int) -> SagaRecord | None:
        item = self.table.get_item(Key=schema.saga_key(job_id, attempt), ConsistentRead=True).get("Item")
        return SagaRecord.model_validate(plain(item)) if item else None

    def sagas(self, status: str, *, limit: int = 100) -> list[SagaRecord]:
        """Sagas in a status, oldest first."""
        response = self.table.query(
            IndexName=schema.BY_STATE,
            KeyConditionExpression=Key(schema.GSI2_PK).eq(schema.saga_partition(status)),
            Limit=limit,
        )
        return [SagaRecord.model_validate(plain(i)) for i in response.get("Items", [])]

    def mark_saga(self, saga: SagaRecord, status: str) -> None:
        now = iso(self.clock.now())
        fields = {"status": status, schema.GSI2_PK: schema.saga_partition(status), schema.GSI2_SK: now}
        self.table.update_item(Key=schema.saga_key(saga.job_id, saga.attempt), **update_expression(fields))

    def _job(self, job_id: str) -> Job:
        item = self.table.get_item(Key=schema.job_key(job_id), ConsistentRead=True).get("Item")
        if item is None:
            raise CancelledError(f"job {job_id} does not exist")
        return Job.model_validate(plain(item))
