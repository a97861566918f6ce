"""The job aggregate in DynamoDB: jobs, their event log, and the API keys that own them (submissions with their
idempotency records: `storage/submissions.py`).

Status changes are conditional writes on the current status and a version number, in one transaction with the
event that records them, so an invalid or late transition is rejected and never half-written. Events that change
no status may instead reserve their numbers first (an atomic ADD on the same counter: no read, no conflict with the
many writers of a fan-out) and write them after: a number whose writer has not written it yet is a gap that readers
wait for (`list_events` returns the events before it); a writer that fails between fills its numbers with `void`
events, which readers skip; one that dies between leaves a gap that readers pass after `GAP_GRACE_SECONDS`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.auth import Principal, key_hash
from longhaul.core.bus import DECISION_EVENTS, BusEntry, entries_for_change, review_entries
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.contracts import TERMINAL_STATUSES, EventView, JobStatus, WaitReason, WaitState
from longhaul.core.metering import Metered, request_counts
from longhaul.core.observability import logger
from longhaul.core.records import STOPPED_VERBS, Job, OutboxRecord, SagaRecord
from longhaul.storage.admission import release_writes
from longhaul.storage.bus import bus_writes
from longhaul.storage.cache import TtlCache
from longhaul.storage.dynamo import Cancelled, plain, transact, update_expression
from longhaul.storage.listing import JobListing
from longhaul.storage.outbox import outbox_writes
from longhaul.storage.sagas import saga_writes
from longhaul.storage.submissions import IdempotencyConflict as IdempotencyConflict  # re-exported
from longhaul.storage.submissions import JobSubmissions, retention_ttl
from longhaul.storage.submissions import NewJob as NewJob  # re-exported

S = JobStatus
# Which statuses a job may move to from each status. Anything else is rejected.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    S.QUEUED: frozenset({S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.CANCELLED, S.EXPIRED}),
    S.RUNNING: frozenset(
        {S.RETRYING, S.WAITING_FOR_REVIEW, S.PAUSED, S.COMPLETED, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}
    ),
    S.RETRYING: frozenset({S.RUNNING, S.PAUSED, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}),
    # Paused at a step boundary: resumed (running), cancelled, or past its deadline.
    S.PAUSED: frozenset({S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}),
    S.WAITING_FOR_REVIEW: frozenset({S.RUNNING, S.FAILED, S.CANCEL_REQUESTED, S.EXPIRED}),
    S.CANCEL_REQUESTED: frozenset({S.CANCELLED, S.FAILED, S.COMPLETED}),
    S.COMPLETED: frozenset(),
    # Only an operator's replay leaves these: a new attempt of the same job.
    S.FAILED: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset({S.QUEUED}),
    S.EXPIRED: frozenset({S.QUEUED}),
}
# A failed job's execution is over; a person may still write its result (a manual completion, reviewed and checked
# by its workflow's rules): `complete_by_person` is the only way out of `failed` but a replay.
BY_PERSON: dict[JobStatus, frozenset[JobStatus]] = {S.FAILED: frozenset({S.COMPLETED})}
ACTIVE = frozenset({S.RUNNING, S.RETRYING})
# Where a step already under way may still commit: a pause stops the job at the next step boundary, and the items
# running when it was reached finish and are kept.
COMMITTABLE = ACTIVE | {S.PAUSED}
EVENT_PAGE_MAX = 200
TRANSITION_TRIES = 8
# How long after a later event was written a missing sequence number is taken for lost (its writer died between its
# reservation and its write) and passed by readers. Writers fill the numbers of a failed write themselves.
GAP_GRACE_SECONDS = 30
VOID_EVENT = "void"
WAIT_DETAIL_CHARS = 300


class NewEvent(NamedTuple):
    """An event to append (its sequence number comes from the job's counter in the same transaction)."""

    type: str
    step: str | None = None
    item: int | None = None
    attempt: int | None = None
    detail: Mapping[str, Any] | None = None
    records_status: bool = False  # the event that records the status change (default: the first)
    at: str | None = None  # when it happened, if earlier than its transaction


class TransitionRejected(Exception):
    """The job was not in a status from which this transition is allowed (or changed concurrently)."""


def _bus_common(job: Job) -> dict[str, Any]:
    """What every event of the job on the bus says of it."""
    return {
        "job_id": job.job_id,
        "tenant_id": job.tenant_id,
        "workflow": job.workflow,
        "correlation_id": job.correlation_id,
    }


def _job(item: Mapping[str, Any]) -> Job:
    return Job.model_validate(plain(item))


OutboxRelay = Callable[[OutboxRecord], None]
SlotReleased = Callable[[Job], None]
SagaWritten = Callable[[SagaRecord], None]
JobFinished = Callable[[Job], None]
BusWritten = Callable[..., object]  # (job_id, *, first=False)


class JobStore(JobSubmissions, JobListing):
    """`on_outbox` is told of each webhook once its transaction has committed (it starts the delivery); if it fails
    or never runs, the sweep finds the webhook still pending and starts it then. `on_release` is told of each job
    whose terminal transition gave back its slot (it wakes the admission dispatcher; the schedule is the safety
    net), and `on_saga` of each saga a terminal transition wrote (it wakes the dispatcher, which starts the
    compensation lane; its schedule starts any saga this missed), and `on_bus` of each job whose transaction wrote
    events for the bus (it publishes them; the sweep publishes any this missed: `storage.bus`)."""

    def __init__(
        self,
        table: Any,
        *,
        clock: Clock | None = None,
        idempotency_ttl: timedelta = timedelta(hours=24),
        on_outbox: OutboxRelay | None = None,
        on_release: SlotReleased | None = None,
        on_saga: SagaWritten | None = None,
        on_finished: JobFinished | None = None,
        on_bus: BusWritten | None = None,
    ):
        super().__init__(table)
        self.clock = clock or SystemClock()
        self.idempotency_ttl = idempotency_ttl
        self.on_outbox = on_outbox
        self.on_release = on_release
        self.on_saga = on_saga
        # Told of each terminal transition of a job with a parent or a `then`, once it committed (it resumes the
        # parent's wait, submits the chained job: `longhaul.api.children.job_finished`).
        self.on_finished = on_finished
        self.on_bus = on_bus
        self._keys: TtlCache[Principal] = TtlCache(self.clock)

    # ------------------------------------------------------------------ API keys

    def principal_for_key(self, api_key: str) -> Principal | None:
        """Who the key is, kept for `LOOKUP_CACHE_SECONDS` (`storage/cache.py`): a revoked key stops authenticating
        within that time; an unknown key is read every time (a key just created works at once)."""
        digest = key_hash(api_key)
        return self._keys.get(digest, lambda: self._principal(digest))

    def _principal(self, digest: str) -> Principal | None:
        """The key's principal; None for an unknown key, and for a rotated key past its overlap (`expires_at`,
        epoch seconds: DynamoDB's TTL deletes it later, up to days after)."""
        item = self.table.get_item(Key=schema.api_key_key(digest)).get("Item")
        if item and "expires_at" in item and float(item["expires_at"]) <= self.clock.now().timestamp():
            return None
        return (
            Principal(
                tenant_id=item["tenant_id"],
                role=item.get("role", "tenant"),
                key_id=digest[:12],
                groups=[str(g) for g in item["groups"]] if "groups" in item else None,
            )
            if item
            else None
        )

    # ------------------------------------------------------------------ jobs

    def get_job(self, job_id: str, *, tenant_id: str | None = None) -> Job | None:
        """The job, or None, also when it belongs to another tenant (a 404, never a 403), and when it is erased or
        being erased (its item is the tombstone: `storage/erasure.py`)."""
        item = self.table.get_item(Key=schema.job_key(job_id), ConsistentRead=True).get("Item")
        if item is None or (tenant_id is not None and item["tenant_id"] != tenant_id) or "erased_at" in item:
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
            try:
                return self.write(
                    current,
                    [NewEvent(event, step=step, item=item, detail=detail)],
                    to=to,
                    fields=set_fields,
                )
            except Cancelled:
                continue  # it changed meanwhile: read again
        raise TransitionRejected(f"job {job_id} kept changing; transition to {to.value} abandoned")

    def complete_by_person(
        self,
        current: Job,
        *,
        detail: Mapping[str, Any],
        fields: Mapping[str, Any],
        items: Sequence[dict[str, Any]] = (),
    ) -> Job:
        """Complete a failed job with a result a person wrote: `failed → completed` (`BY_PERSON`), event
        `job_completed_by_person`, in one transaction with the caller's `items` (the review's decision) and the
        `job.completed` webhook. `TransitionRejected` when the job is not failed; `Cancelled` when it (or an item's
        condition) changed since `current` was read."""
        if S.COMPLETED not in BY_PERSON.get(current.status, frozenset()):
            raise TransitionRejected(f"{current.status.value} → completed is not allowed (only a failed job)")
        return self.write(
            current, [NewEvent("job_completed_by_person", detail=detail)], to=S.COMPLETED, fields=fields, items=items
        )

    def write(
        self,
        current: Job,
        events: Sequence[NewEvent],
        *,
        to: JobStatus | None = None,
        fields: Mapping[str, Any] | None = None,
        add: Mapping[str, Any] | None = None,
        items: Sequence[dict[str, Any]] = (),
        only_if: Iterable[JobStatus] = ACTIVE,
        usage: Metered | None = None,
        reserve: bool = False,
        announce: str | None = None,
    ) -> Job:
        """One transaction over the job as `current` read it: its events (numbered after `current.event_seq`), a
        status change to `to` if given (compare-and-set on status and version, with what the change brings: its
        webhook, saga, the slot it gives back), `fields` set and `add` added on the job, and the caller's `items`.
        Without `to`, the job must be in one of `only_if`. The job's event counter is the condition either way: when
        anything wrote to the job since `current` was read, the transaction is cancelled (`Cancelled`); read again.
        Without events or `to`, only the status is the condition. `usage`: what the caller's invocation used so far,
        added to the job's counters with this transaction's own request (its last: it is metered here, not after).
        `reserve` (without `to`): the events' numbers are reserved first (`reserve_events`) and the transaction's
        condition is the status alone: for writers that set only what siblings set alike or add to (a fan-out's items),
        which would otherwise meet each other's counter moves. A failed one fills its numbers left empty (`void`).
        `announce` (without `to`): a webhook event that changes no status (`job.provisional`) to write to the
        outbox in this transaction, announcing the last of `events`.
        """
        seq0 = current.event_seq
        reserved = reserve and bool(events) and to is None
        if reserved:
            seq0 = self.reserve_events(current.job_id, len(events), only_if=only_if) - 1
        now = iso(self.clock.now())
        writes: dict[str, Any] = {"updated_at": now, schema.GSI2_SK: now}
        extra: list[dict[str, Any]] = []
        after: list[Callable[[], None]] = []
        condition = "event_seq = :seq0"
        values: dict[str, Any] = {":seq0": seq0, ":seq": seq0 + len(events)}
        names: dict[str, str] = {"#status": "status"}
        extra_set = ["event_seq = :seq"]
        if (not events and to is None) or reserved:  # the counter is neither read nor moved here
            condition, values, extra_set = "attribute_exists(pk)", {}, []
        merged_extra: dict[str, Any] = {}
        bus: list[BusEntry] = []
        if to is not None:
            source = current.status
            writes.update({"status": to.value, schema.GSI2_PK: schema.status_partition(to.value)})
            writes.update(fields or {})
            if to in STOPPED_VERBS and "progress" not in writes:  # what it had done, and that it stopped
                writes["progress"] = current.stopped_progress(to).model_dump()
            if to in TERMINAL_STATUSES:
                writes["finished_at"] = now
                writes.setdefault("wait_state", None)  # a finished job waits on nothing
            if to == S.RUNNING and current.started_at is None:
                writes["started_at"] = now
            marked = next((n for n, e in enumerate(events) if e.records_status), 0)
            seq = seq0 + 1 + marked  # the event that records the change
            detail = events[marked].detail if events else None
            # The webhook announcing this change, if any, commits with it (the transactional outbox).
            outbox, callback_fields, webhook = outbox_writes(self.table.name, current, to, seq, now, detail)
            writes.update(callback_fields)
            # A job ending with side effects to compensate gets its saga in the same transaction.
            sagas, saga_fields, saga = saga_writes(self.table.name, current, to, now)
            writes.update(saga_fields)
            # A terminal job gives back its slot, and a job leaving the queue its place in it, in this very
            # transaction: the version condition makes it happen once, and no crash can come between the two.
            freed = current if to in TERMINAL_STATUSES or (source == S.QUEUED and to != S.RUNNING) else None
            releases = release_writes(self.table.name, freed) if freed is not None else []
            if releases:
                writes.update({"slot": None, "waiting": None})
                merged_extra = {"slot": False, "waiting": False}
            extra = [*outbox, *sagas, *releases]
            # The change's events for the bus commit with it (their outbox: `storage.bus`).
            recorded_type, recorded_step = (events[marked].type, events[marked].step) if events else ("", None)
            bus = entries_for_change(
                **_bus_common(current),
                to=to,
                previous=source,
                seq=seq,
                at=now,
                event=recorded_type,
                step=recorded_step,
                detail=detail,
            )
            condition += " AND version = :v0 AND #status = :from"
            values.update({":v0": current.version, ":v1": current.version + 1, ":from": source.value})
            extra_set.append("version = :v1")
            if webhook is not None:
                after.append(lambda: self._relay(webhook))
            if releases and current.slot:
                after.append(lambda: self._released(current))
            if saga is not None:
                after.append(lambda: self._saga_written(saga))
            if to in TERMINAL_STATUSES and (current.parent_job_id or current.then):
                after.append(lambda: self._finished(current.job_id))
        else:
            writes.update(fields or {})
            if not reserved:  # a decision recorded while the job kept its status (decided before its wait began)
                bus = [
                    entry
                    for n, e in enumerate(events, start=1)
                    if e.type in DECISION_EVENTS
                    for entry in review_entries(
                        {**_bus_common(current), "at": now, "seq": seq0 + n}, event=e.type, step=e.step, detail=e.detail
                    )
                ]
            if announce is not None and events and not reserved:
                announced, callback_fields, message = outbox_writes(
                    self.table.name, current, current.status, seq0 + len(events), now, events[-1].detail, event=announce
                )
                writes.update(callback_fields)
                extra = [*announced]
                if message is not None:
                    relayed: OutboxRecord = message
                    after.append(lambda: self._relay(relayed))
            allowed = {f":s{i}": s.value for i, s in enumerate(only_if)}
            condition += f" AND #status IN ({', '.join(allowed)})"
            values.update(allowed)
        if bus:
            extra = [*extra, *bus_writes(self.table.name, current.job_id, current.bus_count + 1, bus, now)]
            writes["bus_count"] = current.bus_count + len(bus)
            after.append(lambda: self._bus_written(current.job_id))
        status_seq = seq0 + 1 + next((n for n, e in enumerate(events) if e.records_status), 0)
        adds = dict(add or {})
        if usage is not None:
            own = len(events) + len(extra) + len(items) + 1
            itself = request_counts("dynamodb", "TransactWriteItems", {"TransactItems": [{}] * own})
            adds.update((usage + Metered(**itself)).counters())
        add_names = {f"#a{i}": name for i, name in enumerate(adds)}
        add_values = {f":a{i}": value for i, value in enumerate(adds.values())}
        update = update_expression(
            writes, extra_set=tuple(extra_set), add=", ".join(f"#a{i} :a{i}" for i in range(len(adds)))
        )
        event_items = [
            {
                "Put": {
                    "TableName": self.table.name,
                    "Item": self._event_item(
                        current.job_id,
                        seq0 + n,
                        e.type,
                        to if seq0 + n == status_seq else None,
                        e.step,
                        e.item,
                        e.attempt,
                        e.detail,
                        e.at,
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            for n, e in enumerate(events, start=1)
        ]
        if current.retain_until is not None:  # DynamoDB's TTL removes them if the retention sweep has not
            for put in event_items:
                put["Put"]["Item"][schema.TTL_ATTRIBUTE] = retention_ttl(current.retain_until)
        try:
            transact(
                self.client,
                [
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": schema.job_key(current.job_id),
                            "UpdateExpression": update["UpdateExpression"],
                            "ConditionExpression": condition,
                            "ExpressionAttributeNames": {**update["ExpressionAttributeNames"], **names, **add_names},
                            "ExpressionAttributeValues": {
                                **update["ExpressionAttributeValues"],
                                **values,
                                **add_values,
                            },
                        }
                    },
                    *event_items,
                    *extra,
                    *items,
                ],
            )
        except Exception:  # cancelled, or an error that may hide a commit: a number already written stays as it is
            if reserved:
                self._void(current.job_id, range(seq0 + 1, seq0 + 1 + len(events)))
            raise
        merged = {**current.model_dump(mode="json"), **writes, "event_seq": max(current.event_seq, seq0 + len(events))}
        merged |= {"version": current.version + 1} if to is not None else {}
        merged |= merged_extra
        for hook in after:
            hook()
        return _job(merged)

    def _relay(self, webhook: OutboxRecord) -> None:
        if self.on_outbox is None:
            return
        try:
            self.on_outbox(webhook)
        except Exception:  # the status change has committed; the sweep relays what was not started here
            logger.exception("webhook not started; the sweep will start it", extra={"webhook_id": webhook.webhook_id})

    def _finished(self, job_id: str) -> None:
        if self.on_finished is None:
            return
        try:
            job = self.get_job(job_id)
            if job is not None:
                self.on_finished(job)
        except Exception:  # the status change has committed; the parent's wait is bounded, the sweep ends it
            logger.exception("a finished job's parent or chained job was not told", extra={"job_id": job_id})

    def _bus_written(self, job_id: str, *, first: bool = False) -> None:
        if self.on_bus is None:
            return
        try:
            self.on_bus(job_id, first=True) if first else self.on_bus(job_id)
        except Exception:  # the events are stored: the sweep publishes what was not published here
            logger.exception("bus events not published now; the sweep will", extra={"job_id": job_id})

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

    def append_with_bus(self, job_id: str, event: NewEvent, fields: Mapping[str, Any]) -> Job:
        """Append an event that changes no status, with `fields`, in one transaction with the bus's events it makes
        (a review's decision: `core.bus`), whatever the job's status but a finished one."""
        unfinished = [s for s in JobStatus if s not in TERMINAL_STATUSES]
        for _ in range(TRANSITION_TRIES):
            current = self.get_job(job_id)
            if current is None or current.status in TERMINAL_STATUSES:
                raise TransitionRejected(f"job {job_id} does not exist or has finished")
            try:
                return self.write(current, [event], fields=fields, only_if=unfinished)
            except Cancelled:
                continue  # it changed meanwhile: read again
        raise TransitionRejected(f"job {job_id} kept changing; {event.type} abandoned")

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

    # ------------------------------------------------------------------ the pause wait's task token (server side only)

    def set_pause_token(self, job_id: str, token: str) -> None:
        self.table.put_item(Item={**schema.pause_token_key(job_id), "token": token, "at": iso(self.clock.now())})

    def pause_token(self, job_id: str) -> str | None:
        item = self.table.get_item(Key=schema.pause_token_key(job_id), ConsistentRead=True).get("Item")
        return str(item["token"]) if item and item.get("token") else None

    def drop_pause_token(self, job_id: str) -> None:
        """Forget the token (an update, not a delete: the API and the lanes may not delete items)."""
        with contextlib.suppress(self.table.meta.client.exceptions.ConditionalCheckFailedException):
            self.table.update_item(
                Key=schema.pause_token_key(job_id),
                UpdateExpression="REMOVE #token",
                ConditionExpression="attribute_exists(#token)",
                ExpressionAttributeNames={"#token": "token"},
            )

    def set_waiting(
        self,
        job_id: str,
        reason: WaitReason,
        *,
        detail: str = "",
        until: datetime | None = None,
        step: str | None = None,
        only_if: Iterable[JobStatus] | None = None,
    ) -> bool:
        """Say what the job waits on now (the view's `waiting`): one conditional update, no event (the event that
        caused the wait is in the log already). Only while the job is in one of `only_if` (default: not finished);
        False when it is not."""
        state = WaitState(
            reason=reason, until=until, detail=detail[:WAIT_DETAIL_CHARS], step=step, since=self.clock.now()
        )
        statuses = only_if if only_if is not None else [s for s in JobStatus if s not in TERMINAL_STATUSES]
        return self.update_job(job_id, {"wait_state": state.model_dump(mode="json")}, only_if=statuses)

    def clear_waiting(self, job_id: str, *, reason: WaitReason | None = None) -> bool:
        """The job waits on nothing any more (with `reason`: only if that is what it waited on). False when it
        waited on something else, or on nothing."""
        now = iso(self.clock.now())
        condition = "attribute_exists(wait_state)"
        values: dict[str, Any] = {":now": now}
        if reason is not None:
            condition = "wait_state.reason = :reason"
            values[":reason"] = reason
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="REMOVE wait_state SET updated_at = :now",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise

    # ------------------------------------------------------------------ signals and the waits on them

    def put_signal(self, job_id: str, name: str, fields: Mapping[str, Any]) -> bool:
        """Keep a signal (or its wait's end, `status: timed_out`) once: False when one is kept already."""
        try:
            self.table.put_item(
                Item={**schema.signal_key(job_id, name), **fields},
                ConditionExpression="attribute_not_exists(pk)",
            )
            return True
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return False

    def signal(self, job_id: str, name: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key=schema.signal_key(job_id, name), ConsistentRead=True).get("Item")
        return dict(item) if item else None

    def consume_signal(self, job_id: str, name: str, at: str) -> None:
        """Mark a received signal consumed by its step (idempotent)."""
        self.table.update_item(
            Key=schema.signal_key(job_id, name),
            UpdateExpression="SET #status = :consumed, consumed_at = if_not_exists(consumed_at, :at)",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":consumed": "consumed", ":at": at},
        )

    def set_wait_token(self, job_id: str, wait: str, token: str) -> None:
        """Keep a wait's token (an update: a wait already ended stays ended)."""
        self.table.update_item(
            Key=schema.wait_token_key(job_id, wait),
            UpdateExpression="SET #token = :token, #at = :at",
            ExpressionAttributeNames={"#token": "token", "#at": "at"},
            ExpressionAttributeValues={":token": token, ":at": iso(self.clock.now())},
        )

    def wait_token(self, job_id: str, wait: str) -> str | None:
        item = self.table.get_item(Key=schema.wait_token_key(job_id, wait), ConsistentRead=True).get("Item")
        return str(item["token"]) if item and item.get("token") else None

    def end_wait(self, job_id: str, wait: str) -> bool:
        """Mark a wait ended (its token forgotten): True the first time. The side that ends a wait first tells the
        other (a segment's end and its timer storing its token)."""
        try:
            self.table.update_item(
                Key=schema.wait_token_key(job_id, wait),
                UpdateExpression="SET ended = :yes REMOVE #token",
                ConditionExpression="attribute_not_exists(ended)",
                ExpressionAttributeNames={"#token": "token"},
                ExpressionAttributeValues={":yes": True},
            )
            return True
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return False

    def wait_ended(self, job_id: str, wait: str) -> bool:
        item = self.table.get_item(Key=schema.wait_token_key(job_id, wait), ConsistentRead=True).get("Item")
        return bool(item and item.get("ended"))

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
        """Append an event that changes no status, whatever the job's status: its number reserved, then the event
        written (two requests, no read, no conflict with other writers; see the module's docstring)."""
        try:
            seq = self.reserve_events(job_id, 1, only_if=None)
        except Cancelled:
            raise TransitionRejected(f"job {job_id} does not exist") from None
        try:
            self.table.put_item(
                Item=self._event_item(job_id, seq, event, None, step, item, attempt, detail),
                ConditionExpression="attribute_not_exists(pk)",
            )
        except Exception:
            self._void(job_id, [seq])  # readers then go on at once, not after the grace
            raise
        return seq

    def reserve_events(self, job_id: str, count: int, *, only_if: Iterable[JobStatus] | None = ACTIVE) -> int:
        """The first of `count` event numbers taken from the job's counter (an atomic ADD); `Cancelled` when the job
        does not exist or (with `only_if`) is in none of those statuses. The caller writes those events next."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {":n": count}
        condition = "attribute_exists(pk)"
        if only_if is not None:
            allowed = {f":s{i}": s.value for i, s in enumerate(only_if)}
            condition = f"#status IN ({', '.join(allowed)})"
            names, values = {"#status": "status"}, {**values, **allowed}
        try:
            got = self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="ADD event_seq :n",
                ConditionExpression=condition,
                ReturnValues="UPDATED_NEW",
                **({"ExpressionAttributeNames": names} if names else {}),
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise Cancelled(["ConditionalCheckFailed"]) from None
            raise
        return int(got["Attributes"]["event_seq"]) - count + 1

    def _void(self, job_id: str, seqs: Iterable[int]) -> None:
        """Fill reserved numbers whose events will not be written (best effort: what is left is passed after the
        grace). Only empty numbers are filled: after an error that did not say whether the events were written, the
        ones that were stay (and a transaction that commits after its numbers were filled is cancelled by them)."""
        try:
            for seq in seqs:  # one PutItem each (a writer's grant; a failure leaves one or two numbers)
                try:
                    self.table.put_item(
                        Item=self._event_item(job_id, seq, VOID_EVENT), ConditionExpression="attribute_not_exists(pk)"
                    )
                except ClientError as error:
                    if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                        raise
        except Exception:
            logger.exception("reserved event numbers not filled", extra={"job_id": job_id})

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
        events: list[EventView] = []
        expected, last = after + 1, after
        grace = iso(self.clock.now() - timedelta(seconds=GAP_GRACE_SECONDS))
        items = [plain(i) for i in response.get("Items", [])]
        for item in items:
            # a gap is a number reserved by a writer still writing: the events after it wait (a gap older than the
            # grace was lost: passed)
            if item["seq"] != expected and str(item.get("written_at", "")) > grace:
                return events, None
            expected, last = item["seq"] + 1, item["seq"]
            if item["type"] != VOID_EVENT:
                events.append(EventView.model_validate(item))
        more = "LastEvaluatedKey" in response and len(items) == limit
        return events, (last if more and items else None)

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
        at: str | None = None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            schema.PK: schema.job_pk(job_id),
            schema.SK: schema.event_sk(seq),
            "seq": seq,
            "type": event,
            "at": at or iso(self.clock.now()),
            "written_at": iso(self.clock.now()),  # when it was written (`at` may be earlier: a deferred start)
        }
        optional = {"status": status.value if status else None, "step": step, "item": item, "attempt": attempt}
        record.update({k: v for k, v in optional.items() if v is not None})
        if detail:
            record["detail"] = dict(detail)
        return record
