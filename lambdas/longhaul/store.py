"""Job store (DynamoDB, single table): jobs, steps, events, idempotency records and API keys.

Status changes are conditional writes on the current status and a version number, in one transaction with
the event that records them, so an invalid or late transition is rejected and never half-written.

Items:  JOB#<id>/JOB  ·  JOB#<id>/STEP#<step>[#<item>]  ·  JOB#<id>/EVENT#<seq>  ·  JOB#<id>/CHARGE#<id>
        JOB#<id>/DEADLETTER#<step>#<item>  ·  IDEMP#<tenant>#<key>/IDEMP  ·  APIKEY#<sha256>/APIKEY
Indexes: by_tenant (gsi1pk TENANT#<tenant>, gsi1sk <created_at>#<job>) lists a tenant's jobs by time;
         by_state (gsi2pk STATUS#<status> | DEADLETTER, gsi2sk <time>) lists jobs by status and dead letters;
         by_created (gsi3pk JOBS, gsi3sk <created_at>#<job>, keys only) lists every job by time.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from longhaul.auth import Principal, key_hash
from longhaul.clock import Clock, SystemClock, iso
from longhaul.contracts import TERMINAL_STATUSES, JobStatus
from longhaul.errors import TransientError

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
# Every job in one partition of a keys-only index: written once per job (status updates do not touch it), so it
# bounds submissions to the index's write rate per partition (about 1,000 a second), not the job updates.
ALL_JOBS = "JOBS"
# Listing shapes: (index, partition attribute, sort attribute).
_LISTINGS = {
    "by_tenant": ("gsi1pk", "gsi1sk"),
    "by_state": ("gsi2pk", "gsi2sk"),
    "by_created": ("gsi3pk", "gsi3sk"),
}
BATCH_GET_MAX = 100


class TransitionRejected(Exception):
    """The job was not in a status from which this transition is allowed (or changed concurrently)."""


class BadCursor(ValueError):
    """A listing cursor that this listing did not hand out."""


class IdempotencyConflict(Exception):
    """The idempotency key was used with a different payload."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


@dataclass(frozen=True)
class NewJob:
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


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _update(fields: Mapping[str, Any], *, extra_set: tuple[str, ...] = (), add: str = "") -> dict[str, Any]:
    """UpdateItem arguments that SET the fields (REMOVE those that are None) plus `extra_set`/`add` clauses."""
    names = {f"#f{i}": k for i, k in enumerate(fields)}
    values = {f":f{i}": v for i, v in enumerate(fields.values()) if v is not None}
    sets = [f"#f{i} = :f{i}" for i, v in enumerate(fields.values()) if v is not None] + list(extra_set)
    removes = [f"#f{i}" for i, v in enumerate(fields.values()) if v is None]
    expression = "SET " + ", ".join(sets)
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    if add:
        expression += f" ADD {add}"
    return {"UpdateExpression": expression, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}


def _backoff(tries: int) -> None:
    """Full-jitter exponential backoff between optimistic retries (5 ms doubling, capped at 320 ms)."""
    time.sleep(random.uniform(0, 0.005 * 2 ** min(tries, 6)))


def _encode_cursor(index: str, item: Mapping[str, Any]) -> str:
    pk_name, sk_name = _LISTINGS[index]
    key = {name: str(item[name]) for name in ("pk", "sk", pk_name, sk_name)}
    return base64.urlsafe_b64encode(json.dumps({"index": index, "key": key}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, index: str, partition: str) -> dict[str, str]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise BadCursor("not a cursor of this listing") from None
    pk_name, sk_name = _LISTINGS[index]
    key = decoded.get("key") if isinstance(decoded, dict) else None
    if (
        decoded.get("index") != index
        or not isinstance(key, dict)
        or set(key) != {"pk", "sk", pk_name, sk_name}
        or not all(isinstance(v, str) for v in key.values())
        or key[pk_name] != partition  # a cursor never leads into another tenant's (or status') partition
    ):
        raise BadCursor("not a cursor of this listing")
    return key


def _job_key(job_id: str) -> dict[str, str]:
    return {"pk": f"JOB#{job_id}", "sk": "JOB"}


def _step_sk(step: str, item: int | None) -> str:
    return f"STEP#{step}" if item is None else f"STEP#{step}#{item:06d}"


class JobStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, idempotency_ttl: timedelta = timedelta(hours=24)):
        self.table = table
        self.client = table.meta.client
        self.clock = clock or SystemClock()
        self.idempotency_ttl = idempotency_ttl

    # ------------------------------------------------------------------ API keys

    def principal_for_key(self, api_key: str) -> Principal | None:
        item = self.table.get_item(Key={"pk": f"APIKEY#{key_hash(api_key)}", "sk": "APIKEY"}).get("Item")
        return Principal(tenant_id=item["tenant_id"], role=item.get("role", "tenant")) if item else None

    # ------------------------------------------------------------------ jobs

    def create_job(self, job: NewJob) -> tuple[dict[str, Any], bool]:
        """Create the job (and its idempotency record) atomically. Returns (job item, created).

        With an idempotency key, a concurrent or repeated submission of the same payload returns the existing
        job; a different payload raises `IdempotencyConflict`.
        """
        now = self.clock.now()
        item = {
            **_job_key(job.job_id),
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
            "gsi1pk": f"TENANT#{job.tenant_id}",
            "gsi1sk": f"{iso(now)}#{job.job_id}",
            "gsi2pk": f"STATUS#{S.QUEUED.value}",
            "gsi2sk": iso(now),
            "gsi3pk": ALL_JOBS,
            "gsi3sk": f"{iso(now)}#{job.job_id}",
            "execution_name": job.job_id,
        }
        if job.deadline_at:
            item["deadline_at"] = job.deadline_at
            item["deadline_seconds"] = job.deadline_seconds
        if job.idempotency_key:
            item["idempotency_key"] = job.idempotency_key
        writes: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table.name, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}},
            {
                "Put": {
                    "TableName": self.table.name,
                    "Item": self._event_item(job.job_id, 1, "job_queued", status=S.QUEUED),
                }
            },
        ]
        if job.idempotency_key:
            writes.append(
                {
                    "Put": {
                        "TableName": self.table.name,
                        "Item": {
                            "pk": f"IDEMP#{job.tenant_id}#{job.idempotency_key}",
                            "sk": "IDEMP",
                            "job_id": job.job_id,
                            "payload_hash": job.payload_hash,
                            "created_at": iso(now),
                            "expires_at": int((now + self.idempotency_ttl).timestamp()),
                        },
                        "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now",
                        "ExpressionAttributeValues": {":now": int(now.timestamp())},
                    }
                }
            )
        try:
            self.client.transact_write_items(TransactItems=writes)
            return _plain(item), True
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException" or not job.idempotency_key:
                raise
        existing = None
        for tries in range(APPEND_TRIES):  # the winner's transaction may still be committing
            existing = self.find_idempotent(job.tenant_id, job.idempotency_key)
            if existing is not None:
                break
            _backoff(tries)
        if existing is None:
            raise TransientError("a concurrent submission with this Idempotency-Key is still being written; retry")
        if existing["payload_hash"] != job.payload_hash:
            raise IdempotencyConflict(existing["job_id"])
        found = self.get_job(existing["job_id"])
        if found is None:
            raise TransientError("the job of this Idempotency-Key is not visible yet; retry")
        return found, False

    def find_idempotent(self, tenant_id: str, key: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key={"pk": f"IDEMP#{tenant_id}#{key}", "sk": "IDEMP"}, ConsistentRead=True).get(
            "Item"
        )
        if item and int(item["expires_at"]) >= int(self.clock.now().timestamp()):
            return _plain(item)
        return None

    def get_job(self, job_id: str, *, tenant_id: str | None = None) -> dict[str, Any] | None:
        """The job, or None, also when it belongs to another tenant (a 404, never a 403)."""
        item = self.table.get_item(Key=_job_key(job_id), ConsistentRead=True).get("Item")
        if item is None or (tenant_id is not None and item["tenant_id"] != tenant_id):
            return None
        return _plain(item)

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
    ) -> dict[str, Any]:
        """Compare-and-set the job's status (on status and version) and append the event, atomically."""
        for _ in range(8):
            current = self.get_job(job_id)
            if current is None:
                raise TransitionRejected(f"job {job_id} does not exist")
            source = JobStatus(current["status"])
            permitted = (
                TRANSITIONS[source]
                if allowed_from is None
                else (TRANSITIONS[source] if source in set(allowed_from) else frozenset())
            )
            if to not in permitted:
                raise TransitionRejected(f"{source.value} → {to.value} is not allowed")
            seq = int(current["event_seq"]) + 1
            now = iso(self.clock.now())
            fields = {"status": to.value, "updated_at": now, "gsi2pk": f"STATUS#{to.value}", "gsi2sk": now}
            fields.update(set_fields or {})
            if to in TERMINAL_STATUSES:
                fields["finished_at"] = now
            if to == S.RUNNING and "started_at" not in current:
                fields["started_at"] = now
            update = _update(fields, extra_set=("version = :v1", "event_seq = :seq"))
            try:
                self.client.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self.table.name,
                                "Key": _job_key(job_id),
                                "UpdateExpression": update["UpdateExpression"],
                                "ConditionExpression": "version = :v0 AND #status = :from AND event_seq = :seq0",
                                "ExpressionAttributeNames": {**update["ExpressionAttributeNames"], "#status": "status"},
                                "ExpressionAttributeValues": {
                                    **update["ExpressionAttributeValues"],
                                    ":v0": current["version"],
                                    ":v1": int(current["version"]) + 1,
                                    ":seq": seq,
                                    ":seq0": seq - 1,
                                    ":from": source.value,
                                },
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table.name,
                                "Item": self._event_item(
                                    job_id, seq, event, status=to, step=step, item=item, detail=detail
                                ),
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ]
                )
                return {**current, **fields}
            except ClientError as error:
                if error.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
        raise TransitionRejected(f"job {job_id} kept changing; transition to {to.value} abandoned")

    def update_job(self, job_id: str, fields: Mapping[str, Any], *, only_if: Iterable[JobStatus] = ACTIVE) -> bool:
        """Set informational fields (current step, progress) while the job is in one of `only_if`."""
        now = iso(self.clock.now())
        update = _update({**fields, "updated_at": now, "gsi2sk": now})
        allowed = {f":s{i}": s.value for i, s in enumerate(only_if)}
        try:
            self.table.update_item(
                Key=_job_key(job_id),
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
            seq = int(current["event_seq"]) + 1
            try:
                self.client.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self.table.name,
                                "Key": _job_key(job_id),
                                "UpdateExpression": "SET event_seq = :seq",
                                "ConditionExpression": "event_seq = :previous",
                                "ExpressionAttributeValues": {":seq": seq, ":previous": seq - 1},
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table.name,
                                "Item": self._event_item(
                                    job_id, seq, event, step=step, item=item, attempt=attempt, detail=detail
                                ),
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ]
                )
                return seq
            except ClientError as error:
                if error.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
                _backoff(tries)  # another writer took that seq: read again
        raise TransientError(f"the event log of job {job_id} stayed contended; retry")

    def list_events(self, job_id: str, *, after: int = 0, limit: int = 100) -> tuple[list[dict[str, Any]], int | None]:
        """Events with seq > after, oldest first; returns (events, next cursor or None)."""
        limit = max(1, min(limit, EVENT_PAGE_MAX))
        response = self.table.query(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": f"JOB#{job_id}",
                ":lo": f"EVENT#{after + 1:010d}",
                ":hi": "EVENT#9999999999",
            },
            Limit=limit,
            ConsistentRead=True,
        )
        events = [_plain(i) for i in response.get("Items", [])]
        more = "LastEvaluatedKey" in response and len(events) == limit
        return events, (events[-1]["seq"] if more and events else None)

    def _event_item(
        self,
        job_id: str,
        seq: int,
        event: str,
        *,
        status: JobStatus | None = None,
        step: str | None = None,
        item: int | None = None,
        attempt: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "pk": f"JOB#{job_id}",
            "sk": f"EVENT#{seq:010d}",
            "seq": seq,
            "type": event,
            "at": iso(self.clock.now()),
        }
        optional = {"status": status.value if status else None, "step": step, "item": item, "attempt": attempt}
        record.update({k: v for k, v in optional.items() if v is not None})
        if detail:
            record["detail"] = dict(detail)
        return record

    # ------------------------------------------------------------------ steps

    def get_step(self, job_id: str, step: str, item: int | None = None) -> dict[str, Any] | None:
        got = self.table.get_item(Key={"pk": f"JOB#{job_id}", "sk": _step_sk(step, item)}, ConsistentRead=True)
        return _plain(got["Item"]) if "Item" in got else None

    def put_step(self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any]) -> None:
        fields = {**fields, "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        starting = fields.get("status") == "running"
        update = _update(fields, add="attempts :one" if starting else "")
        if starting:
            update["ExpressionAttributeValues"][":one"] = 1
        self.table.update_item(Key={"pk": f"JOB#{job_id}", "sk": _step_sk(step, item)}, **update)

    def steps(self, job_id: str) -> list[dict[str, Any]]:
        return self._query_prefix(f"JOB#{job_id}", "STEP#")

    def delete_items(self, job_id: str, sort_keys: Iterable[str]) -> None:
        with self.table.batch_writer() as batch:
            for sk in sort_keys:
                batch.delete_item(Key={"pk": f"JOB#{job_id}", "sk": sk})

    def _query_prefix(self, pk: str, prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": pk, ":prefix": prefix},
            "ConsistentRead": True,
        }
        while True:
            response = self.table.query(**kwargs)
            items.extend(_plain(i) for i in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ------------------------------------------------------------------ charges

    def charge(self, job_id: str, charge_id: str, usage: Mapping[str, int]) -> bool:
        """Add usage to the job's totals once per `charge_id`; False when already charged."""
        names = {f"#u{i}": f"usage_{k}" for i, k in enumerate(usage)}
        values = {f":u{i}": int(v) for i, v in enumerate(usage.values())}
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table.name,
                            "Item": {
                                "pk": f"JOB#{job_id}",
                                "sk": f"CHARGE#{charge_id}",
                                "usage": dict(usage),
                                "at": iso(self.clock.now()),
                            },
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": _job_key(job_id),
                            "UpdateExpression": "ADD "
                            + ", ".join(f"{n} {v}" for n, v in zip(names, values, strict=True)),
                            "ExpressionAttributeNames": names,
                            "ExpressionAttributeValues": values,
                        }
                    },
                ]
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            codes = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
            if not codes or codes[0] == "ConditionalCheckFailed":
                return False  # this charge was already made
            raise TransientError(f"charging job {job_id} conflicted with another write ({codes}); retry") from None

    def charges(self, job_id: str) -> list[dict[str, Any]]:
        return self._query_prefix(f"JOB#{job_id}", "CHARGE#")

    # ------------------------------------------------------------------ listings

    def list_jobs(
        self,
        *,
        tenant_id: str | None = None,
        status: JobStatus | None = None,
        limit: int | None = 50,
        oldest_first: bool = False,
    ) -> list[dict[str, Any]]:
        """A tenant's jobs by creation, or jobs in a status by last update; newest first unless `oldest_first`.
        `limit=None` reads them all."""
        if tenant_id is not None:
            kwargs: dict[str, Any] = {
                "IndexName": "by_tenant",
                "KeyConditionExpression": "gsi1pk = :pk",
                "ExpressionAttributeValues": {":pk": f"TENANT#{tenant_id}"},
            }
            if status is not None:
                kwargs["FilterExpression"] = "#status = :status"
                kwargs["ExpressionAttributeNames"] = {"#status": "status"}
                kwargs["ExpressionAttributeValues"][":status"] = status.value
        elif status is not None:
            kwargs = {
                "IndexName": "by_state",
                "KeyConditionExpression": "gsi2pk = :pk",
                "ExpressionAttributeValues": {":pk": f"STATUS#{status.value}"},
            }
        else:
            raise ValueError("list jobs by tenant, by status, or both")
        items: list[dict[str, Any]] = []
        while limit is None or len(items) < limit:
            response = self.table.query(ScanIndexForward=oldest_first, **kwargs)
            items.extend(_plain(i) for i in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return items if limit is None else items[:limit]

    def page_jobs(
        self,
        *,
        tenant_id: str | None = None,
        status: JobStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of jobs, newest first, and the cursor of the next page (None at the end).

        A tenant's jobs by creation (a status filters them), jobs in a status by last update, or, with neither,
        every tenant's jobs by creation. A cursor only resumes the listing that handed it out.
        """
        if tenant_id is not None:
            index, partition = "by_tenant", f"TENANT#{tenant_id}"
        elif status is not None:
            index, partition = "by_state", f"STATUS#{status.value}"
        else:
            index, partition = "by_created", ALL_JOBS
        pk_name, _ = _LISTINGS[index]
        kwargs: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": f"{pk_name} = :pk",
            "ExpressionAttributeValues": {":pk": partition},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if tenant_id is not None and status is not None:
            kwargs["FilterExpression"] = "#status = :status"
            kwargs["ExpressionAttributeNames"] = {"#status": "status"}
            kwargs["ExpressionAttributeValues"][":status"] = status.value
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = _decode_cursor(cursor, index, partition)
        found: list[dict[str, Any]] = []
        more = False
        while True:
            response = self.table.query(**kwargs)
            found.extend(response.get("Items", []))
            more = "LastEvaluatedKey" in response or len(found) > limit
            if len(found) >= limit or "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        page = found[:limit]
        after = _encode_cursor(index, page[-1]) if more and page else None
        if index == "by_created":  # a keys-only index: read the jobs themselves
            page = self._get_jobs([str(k["pk"]) for k in page])
        return [_plain(i) for i in page], after

    def _get_jobs(self, partitions: list[str]) -> list[dict[str, Any]]:
        """The job items of these partitions, in that order (a job deleted meanwhile is left out)."""
        by_pk: dict[str, dict[str, Any]] = {}
        for start in range(0, len(partitions), BATCH_GET_MAX):
            keys = [{"pk": pk, "sk": "JOB"} for pk in partitions[start : start + BATCH_GET_MAX]]
            request: dict[str, Any] = {self.table.name: {"Keys": keys}}
            for tries in range(APPEND_TRIES):
                response = self.client.batch_get_item(RequestItems=request)  # the resource's client: plain values
                by_pk.update({i["pk"]: i for i in response["Responses"].get(self.table.name, [])})
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                _backoff(tries)
            else:
                raise TransientError("the job listing stayed throttled; retry")
        return [by_pk[pk] for pk in partitions if pk in by_pk]

    # ------------------------------------------------------------------ dead letters

    def put_dead_letter(self, record: Mapping[str, Any]) -> None:
        item = record.get("item")
        self.table.put_item(
            Item={
                **record,
                "pk": f"JOB#{record['job_id']}",
                "sk": f"DEADLETTER#{record['step']}#{'' if item is None else f'{item:06d}'}",
                "gsi2pk": "DEADLETTER",
                "gsi2sk": f"{record['failed_at']}#{record['job_id']}",
            }
        )

    def list_dead_letters(self, *, limit: int = 100) -> list[dict[str, Any]]:
        response = self.table.query(
            IndexName="by_state",
            KeyConditionExpression="gsi2pk = :pk",
            ExpressionAttributeValues={":pk": "DEADLETTER"},
            ScanIndexForward=False,
            Limit=limit,
        )
        return [_plain(i) for i in response.get("Items", [])]

    def dead_letters(self, job_id: str) -> list[dict[str, Any]]:
        return self._query_prefix(f"JOB#{job_id}", "DEADLETTER#")

    def delete_dead_letters(self, job_id: str) -> list[dict[str, Any]]:
        found = self.dead_letters(job_id)
        self.delete_items(job_id, [d["sk"] for d in found])
        return found

    def commit_step(self, job_id: str, step: str, item: int | None, fields: Mapping[str, Any]) -> None:
        """Write a step's checkpoint only while the job runs: a step of a job cancelled meanwhile never commits."""
        fields = {**fields, "step": step, "updated_at": iso(self.clock.now())}
        if item is not None:
            fields["item"] = item
        update = _update(fields)
        live = {f":s{i}": s.value for i, s in enumerate(ACTIVE)}
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table.name,
                            "Key": _job_key(job_id),
                            "ConditionExpression": f"#status IN ({', '.join(live)})",
                            "ExpressionAttributeNames": {"#status": "status"},
                            "ExpressionAttributeValues": live,
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": {"pk": f"JOB#{job_id}", "sk": _step_sk(step, item)},
                            **update,
                        }
                    },
                ]
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            codes = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
            if not codes or codes[0] == "ConditionalCheckFailed":
                raise TransitionRejected(f"job {job_id} is no longer running; {step} not committed") from None
            raise TransientError(f"committing {step} conflicted with another write ({codes}); retry") from None

    def mark_stuck(self, job_id: str, at: str) -> None:
        """Remember when a job was reported stuck, without making it look updated."""
        self.table.update_item(
            Key=_job_key(job_id),
            UpdateExpression="SET stuck_reported_at = :at",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":at": at},
        )

    def discard_new_job(self, job: Mapping[str, Any]) -> None:
        """Undo `create_job` for a job whose execution could not be started (nothing stays of a rejected job)."""
        deletes: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self.table.name,
                    "Key": _job_key(job["job_id"]),
                    "ConditionExpression": "#status = :queued",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {":queued": S.QUEUED.value},
                }
            },
            {"Delete": {"TableName": self.table.name, "Key": {"pk": f"JOB#{job['job_id']}", "sk": f"EVENT#{1:010d}"}}},
        ]
        if job.get("idempotency_key"):
            deletes.append(
                {
                    "Delete": {
                        "TableName": self.table.name,
                        "Key": {"pk": f"IDEMP#{job['tenant_id']}#{job['idempotency_key']}", "sk": "IDEMP"},
                        "ConditionExpression": "job_id = :job",
                        "ExpressionAttributeValues": {":job": job["job_id"]},
                    }
                }
            )
        self.client.transact_write_items(TransactItems=deletes)
