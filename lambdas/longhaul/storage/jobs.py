"""The job aggregate in DynamoDB: jobs, their event log, and the API keys that own them (submissions with their
idempotency records: `storage/submissions.py`).

Status changes are conditional writes on the current status and a version number, in one transaction with the
event that records them, so an invalid or late transition is rejected and never half-written. Events that change
no status take their sequence number from the same counter in the same kind of transaction: the log is gapless.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.auth import Principal, key_hash
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.contracts import TERMINAL_STATUSES, EventView, JobStatus
from longhaul.core.errors import TransientError
from longhaul.core.observability import logger
from longhaul.core.records import Job, OutboxRecord, SagaRecord
from longhaul.storage.admission import release_writes
from longhaul.storage.cache import TtlCache
from longhaul.storage.dynamo import Cancelled, backoff, plain, transact, update_expression
from longhaul.storage.listing import JobListing
from longhaul.storage.outbox import outbox_writes
from longhaul.storage.sagas import saga_writes
from longhaul.storage.submissions import IdempotencyConflict as IdempotencyConflict  # re-exported
from longhaul.storage.submissions import JobSubmissions
from longhaul.storage.submissions import NewJob as NewJob  # re-exported

S = JobStatus
# Which statuses a job may move to from each status. Anything else is rejected.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    S.QUEUED: frozenset({S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.CANCELLED, S.EXPIRED}),
    S.RUNNING: frozenset({S.RETRYING, S.WAITING_FOR_REVIEW, S.COMPLETED, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}),
    S.RETRYING: frozenset({S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}),
    S.WAITING_FOR_REVIEW: frozenset({S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}),
    S.CANCEL_REQUESTED: frozenset({S.CANCELLED, S.FAILED, S.COMPLETED}),
    S.COMPLETED: frozenset(),
    # Only an operator's replay leaves these: a new attempt of the same job.
    S.FAILED: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset({S.QUEUED}),
    S.EXPIRED: frozenset({S.QUEUED}),
}
ACTIVE = frozenset({S.RUNNING, S.RETRYING})
EVENT_PAGE_MAX = 200
APPEND_TRIES = 25
TRANSITION_TRIES = 8


class TransitionRejected(Exception):
    """The job was not in a status from which this transition is allowed (or changed concurrently)."""


def _job(item: Mapping[str, Any]) -> Job:
    return Job.model_validate(plain(item))


OutboxRelay = Callable[[OutboxRecord], None]
SlotReleased = Callable[[Job], None]
SagaWritten = Callable[[SagaRecord], None]


class JobStore(JobSubmissions, JobListing):
    """`on_outbox` is told of each webhook once its transaction has committed (it starts the delivery); if it fails
    or never runs, the sweep finds the webhook still pending and starts it then. `on_release` is told of each job
    whose terminal transition gave back its slot (it wakes the admission dispatcher; the schedule is the safety
    net), and `on_saga` of each saga a terminal transition wrote (it wakes the dispatcher, which starts the
    compensation lane; its schedule starts any saga this missed)."""

    def __init__(
        self,
        table: Any,
        *,
        clock: Clock | None = None,
        idempotency_ttl: timedelta = timedelta(hours=24),
        on_outbox: OutboxRelay | None = None,
        on_release: SlotReleased | None = None,
        on_saga: SagaWritten | None = None,
    ):
        super().__init__(table)
        self.clock = clock or SystemClock()
        self.idempotency_ttl = idempotency_ttl
        self.on_outbox = on_outbox
        self.on_release = on_release
        self.on_saga = on_saga
        self._keys: TtlCache[Principal] = TtlCache(self.clock)

    # ------------------------------------------------------------------ API keys

    def principal_for_key(self, api_key: str) -> Principal | None:
        """Who the key is, kept for `LOOKUP_CACHE_SECONDS` (`storage/cache.py`): a revoked key stops authenticating
        within that time; an unknown key is read every time (a key just created works at once)."""
        digest = key_hash(api_key)
        return self._keys.get(digest, lambda: self._principal(digest))

    def _principal(self, digest: str) -> Principal | None:
        item = self.table.get_item(Key=schema.api_key_key(digest)).get("Item")
        return (
            Principal(tenant_id=item["tenant_id"], role=item.get("role", "tenant"), key_id=digest[:12])
            if item
            else None
        )

    # ------------------------------------------------------------------ jobs

    def get_job(self, job_id: str, *, tenant_id: str | None = None) -> Job | None:
        """The job, or None, also when it belongs to another tenant (a 404, never a 403)."""
        item = self.table.get_item(Key=schema.job_key(job_id), ConsistentRead=True).get("Item")
        if item is None or (tenant_id is not None and item["tenant_id"] != tenant_id):
            return None
        return _job(item)

    def transition(
        self,
        job_id: str,
        to: JobStatus,
        *,
        event: str,
        step: str | None = None,
        item: int | None = None,
        detail: Mapping[str, Any] | None = None,
        set_fields: Mapping[str, Any] | None = None,
        allowed_from: Iterable[JobStatus] | None = None,
    ) -> Job:
        """Compare-and-set the job's status (on status and version) and append the event, atomically."""
        allowed = None if allowed_from is None else set(allowed_from)
        for _ in range(TRANSITION_TRIES):
            current = self.get_job(job_id)
            if current is None:
                raise TransitionRejected(f"job {job_id} does not exist")
            source = current.status
            permitted = TRANSITIONS[source] if allowed is None or source in allowed else frozenset()
            if to not in permitted:
                raise TransitionRejected(f"{source.value} → {to.value} is not allowed")
            seq = current.event_seq + 1
            now = iso(self.clock.now())
            fields: dict[str, Any] = {
                "status": to.value,
                "updated_at": now,
                schema.GSI2_PK: schema.status_partition(to.value),
                schema.GSI2_SK: now,
            }
            fields.update(set_fields or {})
            if to in TERMINAL_STATUSES:
                fields["finished_at"] = now
            if to == S.RUNNING and current.started_at is None:
                fields["started_at"] = now
            # The webhook announcing this change, if any, commits with it (the transactional outbox).
            outbox, callback_fields, webhook = outbox_writes(self.table.name, current, to, seq, now, detail)
            fields.update(callback_fields)
            # A job ending with side effects to compensate gets its saga in the same transaction.
            sagas, saga_fields, saga = saga_writes(self.table.name, current, to, now)
            fields.update(saga_fields)
            # A terminal job gives back its slot, and a job leaving the queue its place in it, in this very
            # transaction: the version condition makes it happen once, and no crash can come between the two.
            freed = current if to in TERMINAL_STATUSES or (source == S.QUEUED and to != S.RUNNING) else None
            releases = release_writes(self.table.name, freed) if freed is not None else []
            if releases:
                fields.update({"slot": None, "waiting": None})
            update = update_expression(fields, extra_set=("version = :v1", "event_seq = :seq"))
            try:
                transact(
                    self.client,
                    [
                        {
                            "Update": {
                                "TableName": self.table.name,
                                "Key": schema.job_key(job_id),
                                "UpdateExpression": update["UpdateExpression"],
                                "ConditionExpression": "version = :v0 AND #status = :from AND event_seq = :seq0",
                                "ExpressionAttributeNames": {**update["ExpressionAttributeNames"], "#status": "status"},
                                "ExpressionAttributeValues": {
                                    **update["ExpressionAttributeValues"],
                                    ":v0": current.version,
                                    ":v1": current.version + 1,
                                    ":seq": seq,
                                    ":seq0": seq - 1,
                                    ":from": source.value,
                                },
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table.name,
                                "Item": self._event_item(job_id, seq, event, to, step, item, detail=detail),
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                        *outbox,
                        *sagas,
                        *releases,
                    ],
                )
                merged = {**current.model_dump(mode="json"), **fields, "version": current.version + 1, "event_seq": seq}
                merged |= {"slot": False, "waiting": False} if releases else {}
                if webhook is not None:
                    self._relay(webhook)
                if releases and current.slot:
                    self._released(current)
                if saga is not None:
                    self._saga_written(saga)
                return _job(merged)
            except Cancelled:
                continue  # it changed meanwhile: read again
        raise TransitionRejected(f"job {job_id} kept changing; transition to {to.value} abandoned")

    def _relay(self, webhook: OutboxRecord) -> None:
        if self.on_outbox is None:
            return
        try:
            self.on_outbox(webhook)
        except Exception:  # the status change has committed; the sweep relays what was not started here
            logger.exception("webhook not started; the sweep will start it", extra={"webhook_id": webhook.webhook_id})

    def _released(self, job: Job) -> None:
        if self.on_release is None:
            return
        try:
            self.on_release(job)
        except Exception:  # the slot is free; the dispatcher's schedule hands it out if this wake-up was lost
            logger.exception("the admission dispatcher was not woken", extra={"job_id": job.job_id})

    def _saga_written(self, saga: SagaRecord) -> None:
        if self.on_saga is None:
            return
        try:
            self.on_saga(saga)
        except Exception:  # the saga is stored: the dispatcher's schedule starts it
            logger.exception("the compensation was not started now", extra={"job_id": saga.job_id})

    def update_job(self, job_id: str, fields: Mapping[str, Any], *, only_if: Iterable[JobStatus] = ACTIVE) -> bool:
        """Set informational fields (current step, progress) while the job is in one of `only_if`."""
        now = iso(self.clock.now())
        update = update_expression({**fields, "updated_at": now, schema.GSI2_SK: now})
        allowed = {f":s{i}": s.value for i, s in enumerate(only_if)}
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression=update["UpdateExpression"],
                ConditionExpression=f"#status IN ({', '.join(allowed)})",
                ExpressionAttributeNames={**update["ExpressionAttributeNames"], "#status": "status"},
                ExpressionAttributeValues={**update["ExpressionAttributeValues"], **allowed},
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise

    def show_item_progress(self, job_id: str, step: str, progress: Mapping[str, Any]) -> bool:
        """Set a fan-out's progress (`completed` items of `total`; its message starts with `<step>: `) unless the job
        shows more of the same step already: items commit concurrently, so a smaller count arriving late never
        replaces a larger one."""
        now = iso(self.clock.now())
        allowed = {f":s{i}": s.value for i, s in enumerate(ACTIVE)}
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="SET #progress = :progress, updated_at = :now, #gsi2 = :now",
                ConditionExpression=(
                    f"#status IN ({', '.join(allowed)}) AND (attribute_not_exists(#progress.#message) "
                    "OR NOT begins_with(#progress.#message, :prefix) OR #progress.#completed < :completed)"
                ),
                ExpressionAttributeNames={
                    "#status": "status",
                    "#progress": "progress",
                    "#message": "message",
                    "#completed": "completed",
                    "#gsi2": schema.GSI2_SK,
                },
                ExpressionAttributeValues={
                    ":progress": dict(progress),
                    ":now": now,
                    ":prefix": f"{step}: ",
                    ":completed": progress["completed"],
                    **allowed,
                },
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise

    def mark_stuck(self, job_id: str, at: str) -> None:
        """Remember when a job was reported stuck, without making it look updated."""
        self.table.update_item(
            Key=schema.job_key(job_id),
            UpdateExpression="SET stuck_reported_at = :at",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":at": at},
        )

    # ------------------------------------------------------------------ events

    def append_event(
        self,
        job_id: str,
        event: str,
        *,
        step: str | None = None,
        item: int | None = None,
        attempt: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> int:
        """Append an event that changes no status: the job's counter and the event are written together, so a
        reader never sees seq N+1 before N."""
        for tries in range(APPEND_TRIES):
            current = self.get_job(job_id)
            if current is None:
                raise TransitionRejected(f"job {job_id} does not exist")
            seq = current.event_seq + 1
            try:
                transact(
                    self.client,
                    [
                        {
                            "Update": {
                                "TableName": self.table.name,
                                "Key": schema.job_key(job_id),
                                "UpdateExpression": "SET event_seq = :seq",
                                "ConditionExpression": "event_seq = :previous",
                                "ExpressionAttributeValues": {":seq": seq, ":previous": seq - 1},
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table.name,
                                "Item": self._event_item(job_id, seq, event, None, step, item, attempt, detail),
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ],
                )
                return seq
            except Cancelled:
                backoff(tries)  # another writer took that seq: read again
        raise TransientError(f"the event log of job {job_id} stayed contended; retry")

    def list_events(self, job_id: str, *, after: int = 0, limit: int = 100) -> tuple[list[EventView], int | None]:
        """Events with seq > after, oldest first; returns (events, next cursor or None)."""
        limit = max(1, min(limit, EVENT_PAGE_MAX))
        response = self.table.query(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": schema.job_pk(job_id),
                ":lo": schema.event_sk(after + 1),
                ":hi": schema.event_sk(10**schema.EVENT_SEQ_DIGITS - 1),
            },
            Limit=limit,
            ConsistentRead=True,
        )
        events = [EventView.model_validate(plain(i)) for i in response.get("Items", [])]
        more = "LastEvaluatedKey" in response and len(events) == limit
        return events, (events[-1].seq if more and events else None)

    def _event_item(
        self,
        job_id: str,
        seq: int,
        event: str,
        status: JobStatus | None = None,
        step: str | None = None,
        item: int | None = None,
        attempt: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            schema.PK: schema.job_pk(job_id),
            schema.SK: schema.event_sk(seq),
            "seq": seq,
            "type": event,
            "at": iso(self.clock.now()),
        }
        optional = {"status": status.value if status else None, "step": step, "item": item, "attempt": attempt}
        record.update({k: v for k, v in optional.items() if v is not None})
        if detail:
            record["detail"] = dict(detail)
        return record
