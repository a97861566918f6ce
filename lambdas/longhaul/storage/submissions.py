"""Submissions of the job aggregate: a new job written with its first event and its idempotency record in one
transaction (a repeated or concurrent submission of the same payload finds the same job, another payload is a
conflict), and the undoing of a job whose execution could not be started."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from longhaul.core import limits, schema
from longhaul.core.bus import entries_for_change
from longhaul.core.clock import Clock, iso
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import TransientError
from longhaul.core.eta import EtaSnapshot
from longhaul.core.records import IdempotencyRecord, Job
from longhaul.storage.bus import bus_writes
from longhaul.storage.dynamo import Cancelled, backoff, plain, transact

S = JobStatus
APPEND_TRIES = 25


class IdempotencyConflict(Exception):
    """The idempotency key was used with a different payload."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


class StateChanged(Exception):
    """A condition of the writes that came with a new job (its rate count, its slot) no longer held: what the
    submission decided on changed; read it again and decide anew."""


class NewJob(NamedTuple):
    job_id: str
    tenant_id: str
    workflow: str
    input_key: str
    payload_hash: str
    model: str
    estimated_sla_seconds: int
    idempotency_key: str | None = None
    total_steps: int = 0
    deadline_at: str | None = None
    deadline_seconds: int | None = None
    budget_tokens: int | None = None
    budget_cost_micro: int | None = None
    route: str | None = None
    review_mode: str | None = None
    review_deadline_seconds: int | None = None
    callback_url: str | None = None
    links_base: str | None = None
    sla_class: str = "standard"
    model_lane: str = "auto"
    correlation_id: str | None = None
    agent_max_turns: int | None = None
    agent_max_tool_calls: int | None = None
    eta: EtaSnapshot | None = None
    retain_until: str | None = None  # ISO 8601: when its retention ends (the retention calendar's entry)
    supersedes: str | None = None
    search_text: str | None = None  # the words of its request, for listings' `q` (`storage.listing.search_text`)
    parent_job_id: str | None = None  # a child step's job: the job that started it, and the step
    parent_step: str | None = None
    then: str | None = None  # the request's `then`, submitted when it completes

    trigger: dict[str, Any] | None = None  # what started it, when no caller did (`JobTrigger`, as JSON)


def retention_ttl(retain_until: str | datetime) -> int:
    """The DynamoDB TTL (epoch seconds) of an item of a job whose retention ends at `retain_until`: a backstop some
    days after, should the sweep not have erased the job by then (TTL deletes lazily; the sweep erases at once)."""
    end = retain_until if isinstance(retain_until, datetime) else datetime.fromisoformat(retain_until)
    return int((end + timedelta(days=limits.RETENTION_BACKSTOP_DAYS)).timestamp())


def retention_entry(job_id: str, tenant_id: str, retain_until: str) -> dict[str, Any]:
    """The job's entry in the retention calendar: what the sweep reads to erase jobs whose retention has ended."""
    return {**schema.retention_key(retain_until, job_id), "job_id": job_id, "tenant_id": tenant_id}


class JobSubmissions:
    """Mixed into `JobStore`, which provides the table, the clock, `get_job` and `_event_item`."""

    table: Any
    client: Any
    clock: Clock
    idempotency_ttl: timedelta

    def get_job(self, job_id: str, *, tenant_id: str | None = None) -> Job | None:
        raise NotImplementedError

    def _event_item(self, job_id: str, seq: int, event: str, status: JobStatus | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def _bus_written(self, job_id: str, *, first: bool = False) -> None:
        raise NotImplementedError

    def create_job(
        self, job: NewJob, *, marks: Mapping[str, Any] | None = None, with_writes: Sequence[dict[str, Any]] = ()
    ) -> tuple[Job, bool]:
        """Create the job (and its idempotency record) atomically. Returns (job, created).

        With an idempotency key, a concurrent or repeated submission of the same payload returns the existing
        job; a different payload raises `IdempotencyConflict`. `with_writes` commit in the same transaction (a new
        submission's rate count and its slot or place in the queue, which `marks` record on the job's item); when
        one of their conditions fails, `StateChanged`.
        """
        now = self.clock.now()
        item: dict[str, Any] = {
            **schema.job_key(job.job_id),
            "job_id": job.job_id,
            "tenant_id": job.tenant_id,
            "workflow": job.workflow,
            "status": S.QUEUED.value,
            "version": 1,
            "event_seq": 1,
            "attempts": 1,
            "input_key": job.input_key,
            "payload_hash": job.payload_hash,
            "model": job.model,
            "estimated_sla_seconds": job.estimated_sla_seconds,
            "progress": {"completed": 0, "total": job.total_steps, "unit": "steps", "message": "queued"},
            "created_at": iso(now),
            "updated_at": iso(now),
            schema.GSI1_PK: schema.tenant_partition(job.tenant_id),
            schema.GSI1_SK: f"{iso(now)}#{job.job_id}",
            schema.GSI2_PK: schema.status_partition(S.QUEUED.value),
            schema.GSI2_SK: iso(now),
            schema.GSI3_PK: schema.ALL_JOBS_PARTITION,
            schema.GSI3_SK: f"{iso(now)}#{job.job_id}",
            "execution_name": job.job_id,
            "bus_count": 1,  # its first status, on the bus
            "sla_class": job.sla_class,
            "model_lane": job.model_lane,
        }
        if job.deadline_at:
            item["deadline_at"] = job.deadline_at
            item["deadline_seconds"] = job.deadline_seconds
        if job.idempotency_key:
            item["idempotency_key"] = job.idempotency_key
        if job.budget_tokens is not None:
            item |= {"budget_tokens": job.budget_tokens, "budget_cost_micro": job.budget_cost_micro}
            item |= {"spent_tokens": 0, "spent_cost_micro": 0, "cost_micro": 0}
        if job.route:
            item["route"] = job.route
        optional = {
            "review_mode": job.review_mode,
            "review_deadline_seconds": job.review_deadline_seconds,
            "callback_url": job.callback_url,
            "links_base": job.links_base,
            "correlation_id": job.correlation_id,
            "agent_max_turns": job.agent_max_turns,
            "agent_max_tool_calls": job.agent_max_tool_calls,
            "eta": job.eta.model_dump(mode="json") if job.eta else None,
            "supersedes": job.supersedes,
            "search_text": job.search_text,
            "parent_job_id": job.parent_job_id,
            "parent_step": job.parent_step,
            "then": job.then,
            "trigger": job.trigger,
        }
        item.update({k: v for k, v in optional.items() if v is not None})
        item.update(marks or {})
        writes: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table.name, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Put": {"TableName": self.table.name, "Item": self._event_item(job.job_id, 1, "job_queued", S.QUEUED)}},
        ]
        if job.idempotency_key:
            writes.append(
                {
                    "Put": {
                        "TableName": self.table.name,
                        "Item": {
                            **schema.idempotency_key(job.tenant_id, job.idempotency_key),
                            "job_id": job.job_id,
                            "payload_hash": job.payload_hash,
                            "created_at": iso(now),
                            schema.TTL_ATTRIBUTE: int((now + self.idempotency_ttl).timestamp()),
                        },
                        "ConditionExpression": f"attribute_not_exists(pk) OR {schema.TTL_ATTRIBUTE} < :now",
                        "ExpressionAttributeValues": {":now": int(now.timestamp())},
                    }
                }
            )
        if job.retain_until:  # after the idempotency record: a cancellation's reasons are read by position
            item["retain_until"] = job.retain_until
            writes[1]["Put"]["Item"][schema.TTL_ATTRIBUTE] = retention_ttl(job.retain_until)  # the first event
            writes.append(
                {
                    "Put": {
                        "TableName": self.table.name,
                        "Item": retention_entry(job.job_id, job.tenant_id, job.retain_until),
                    }
                }
            )
        queued = entries_for_change(
            job_id=job.job_id,
            tenant_id=job.tenant_id,
            workflow=job.workflow,
            correlation_id=job.correlation_id,
            to=S.QUEUED,
            previous=None,
            seq=1,
            at=iso(now),
            event="job_queued",
        )
        writes += bus_writes(self.table.name, job.job_id, 1, queued, iso(now))  # after the idempotency record's
        try:
            transact(self.client, [*writes, *with_writes])
            self._bus_written(job.job_id, first=True)  # its `queued`, before its execution can change it
            return Job.model_validate(plain(item)), True
        except Cancelled as cancelled:
            key_taken = bool(job.idempotency_key) and (
                not cancelled.reasons or cancelled.reasons[2] == "ConditionalCheckFailed"
            )
            if with_writes and not key_taken:
                raise StateChanged(f"the admission of job {job.job_id} changed meanwhile") from None
            if not job.idempotency_key:
                raise
        existing = None
        for tries in range(APPEND_TRIES):  # the winner's transaction may still be committing
            existing = self.find_idempotent(job.tenant_id, job.idempotency_key)
            if existing is not None:
                break
            backoff(tries)
        if existing is None:
            raise TransientError("a concurrent submission with this Idempotency-Key is still being written; retry")
        if existing.payload_hash != job.payload_hash:
            raise IdempotencyConflict(existing.job_id)
        found = self.get_job(existing.job_id)
        if found is None:
            raise TransientError("the job of this Idempotency-Key is not visible yet; retry")
        return found, False

    def find_idempotent(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        item = self.table.get_item(Key=schema.idempotency_key(tenant_id, key), ConsistentRead=True).get("Item")
        return self.idempotency_record(item)

    def idempotency_record(self, item: Mapping[str, Any] | None) -> IdempotencyRecord | None:
        """The record of a stored idempotency item while it is in force (its TTL not passed), else None."""
        if item and int(item[schema.TTL_ATTRIBUTE]) >= int(self.clock.now().timestamp()):
            return IdempotencyRecord.model_validate(plain(item))
        return None

    def discard_new_job(self, job: Job) -> None:
        """Undo `create_job` for a job whose execution could not be started (nothing stays of a rejected job)."""
        deletes: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self.table.name,
                    "Key": schema.job_key(job.job_id),
                    "ConditionExpression": "#status = :queued",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {":queued": S.QUEUED.value},
                }
            },
            {
                "Delete": {
                    "TableName": self.table.name,
                    "Key": {schema.PK: schema.job_pk(job.job_id), schema.SK: schema.event_sk(1)},
                }
            },
            {"Delete": {"TableName": self.table.name, "Key": schema.bus_key(job.job_id, 1)}},
        ]
        if job.idempotency_key:
            deletes.append(
                {
                    "Delete": {
                        "TableName": self.table.name,
                        "Key": schema.idempotency_key(job.tenant_id, job.idempotency_key),
                        "ConditionExpression": "job_id = :job",
                        "ExpressionAttributeValues": {":job": job.job_id},
                    }
                }
            )
        transact(self.client, deletes)
