"""Admission in DynamoDB: each tenant's submission rate, and the counters of jobs in flight and waiting.

Every counter is an item of the jobs table changed by conditional writes, never a number in a process, so any
number of API and dispatcher instances share one truth:

- the submission rate is a sliding window: the tenant's item holds its accepted submissions of the last minute
  counted per second, and a submission is one conditional `UpdateItem` on it (after a read, or with the state a
  refused write returns), accepted only while the window holds fewer than the limit (see `take_submission`);
- a slot is taken by one transaction: the platform's `in_flight` below its limit, the tenant's below its
  `jobs_in_flight`, and the job still `queued` without a slot (it then has `slot = true`). A slot is given back in
  the transaction of the job's terminal transition (`storage/jobs.py`), guarded by the job's `slot`, so it is given
  back exactly once and a crash between the two cannot leak it;
- a job that could not take a slot is marked `waiting` (and counted in `queued`, for the estimate of its start) in
  one transaction; the mark goes when it takes its slot or leaves `queued` otherwise (cancelled, expired).

A new submission reads what it decides on in one `BatchGetItem` (`submission_state`: the rate window, the counters,
the tenant's day and the idempotency record) and then writes the job with its rate count and its slot, or its place
in the queue, in one transaction (`rate_write` and `new_job_writes`, committed by `JobSubmissions.create_job`); a
transaction whose conditions no longer hold is decided again on a new read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import TransientError
from longhaul.core.records import Job
from longhaul.storage.dynamo import Cancelled, backoff, plain, transact

RATE_WINDOW_SECONDS = 60
_SECOND = "at"  # the prefix of a per-second count's attribute in a tenant's rate window (`at1735787045`)
_DESERIALIZER = TypeDeserializer()
CONFLICT_TRIES = 6  # a transaction that lost a race on a counter (TransactionConflict) is tried again


class Counters(NamedTuple):
    """Jobs holding a slot and jobs waiting for one: the platform's and one tenant's."""

    global_in_flight: int = 0
    global_queued: int = 0
    tenant_in_flight: int = 0
    tenant_queued: int = 0


class SubmissionState(NamedTuple):
    """What a new submission of a tenant decides on, as read together: its rate window, the admission counters,
    its spending of the day and (with an Idempotency-Key) the key's record."""

    window: RateWindow
    counters: Counters
    day_tokens: int = 0
    day_cost_micro: int = 0
    idempotency: dict[str, Any] | None = None


class RateWindow(NamedTuple):
    """A tenant's rate window as stored: accepted submissions per second, and the newest second counted."""

    counts: dict[int, int]
    newest: int = 0

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> RateWindow:
        counts = {
            int(k[len(_SECOND) :]): int(v)
            for k, v in item.items()
            if k.startswith(_SECOND) and k[len(_SECOND) :].isdigit()
        }
        return cls(counts, int(item.get("newest", 0)))

    def since(self, first: int) -> dict[int, int]:
        """The counts of `first` and later seconds."""
        return {s: n for s, n in self.counts.items() if s >= first}


def _count(window: RateWindow, second: int, live: Mapping[int, int], limit: int) -> dict[str, Any]:
    """UpdateItem arguments that count one submission in `second` (see `AdmissionStore.take_submission`)."""
    names = {"#count": f"{_SECOND}{second}", "#ttl": schema.TTL_ATTRIBUTE}
    values: dict[str, Any] = {":one": 1, ":second": second, ":ttl": second + 2 * RATE_WINDOW_SECONDS}
    if window.newest and second == window.newest:
        older = sum(n for s, n in live.items() if s != second)
        condition = "newest = :second AND (attribute_not_exists(#count) OR #count < :room)"
        values[":room"] = limit - older
    elif window.newest:
        names["#newest_count"] = f"{_SECOND}{window.newest}"
        condition = "newest = :newest AND "
        condition += (
            "#newest_count = :seen" if window.newest in window.counts else "attribute_not_exists(#newest_count)"
        )
        values[":newest"] = window.newest
        if window.newest in window.counts:
            values[":seen"] = window.counts[window.newest]
    else:
        condition = "attribute_not_exists(newest)"
    expired = [s for s in window.counts if s < second - RATE_WINDOW_SECONDS]
    for n, old in enumerate(expired):
        names[f"#gone{n}"] = f"{_SECOND}{old}"
    update = "ADD #count :one SET newest = :second, #ttl = :ttl"
    if expired:
        update += " REMOVE " + ", ".join(f"#gone{n}" for n in range(len(expired)))
    return {
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def rate_decision(window: RateWindow, per_minute: int, now: float) -> tuple[int | None, dict[str, Any]]:
    """(seconds until one more submission fits, or None when it fits now; the UpdateItem arguments that count it)"""
    second = max(int(now), window.newest)  # a clock behind the newest second counts in it
    live = window.since(second - RATE_WINDOW_SECONDS)
    if sum(live.values()) >= per_minute:
        return _retry_after(live, per_minute, now), {}
    return None, _count(window, second, live, per_minute)


def _retry_after(live: Mapping[int, int], limit: int, now: float) -> int:
    """Seconds until the window holds fewer than `limit`: its oldest seconds leave it 61 s after they began."""
    held = sum(live.values())
    for second in sorted(live):
        held -= live[second]
        if held < limit:
            return max(1, math.ceil(second + RATE_WINDOW_SECONDS + 1 - now))
    return 1


def _deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as a refused write returns it (DynamoDB's typed JSON) in the resource API's shape."""
    return {k: _DESERIALIZER.deserialize(v) for k, v in item.items()}


def release_writes(table_name: str, job: Job) -> list[dict[str, Any]]:
    """Transaction items that give back what `job` holds: its slot (if it has one) and its place in the queue
    (if it is waiting). The caller's own update of the job (conditioned on its version) clears both marks."""
    deltas: dict[str, int] = {}
    if job.slot:
        deltas["in_flight"] = -1
    if job.waiting:
        deltas["queued"] = -1
    if not deltas:
        return []
    return [_counter_update(table_name, key, deltas) for key in _keys(job.tenant_id)]


def _keys(tenant_id: str) -> tuple[dict[str, str], dict[str, str]]:
    return schema.admission_global_key(), schema.admission_tenant_key(tenant_id)


def _counter_update(
    table_name: str,
    key: dict[str, str],
    deltas: dict[str, int],
    *,
    below: int | None = None,
    no_backlog: bool = False,
) -> dict[str, Any]:
    adds = ", ".join(f"{name} :{name}" for name in deltas)
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": key,
        "UpdateExpression": f"ADD {adds}",
        "ExpressionAttributeValues": {f":{name}": delta for name, delta in deltas.items()},
    }
    conditions = []
    if below is not None:
        conditions.append("(attribute_not_exists(in_flight) OR in_flight < :limit)")
        update["ExpressionAttributeValues"][":limit"] = below
    if no_backlog:
        conditions.append("(attribute_not_exists(queued) OR queued <= :none)")
        update["ExpressionAttributeValues"][":none"] = 0
    if conditions:
        update["ConditionExpression"] = " AND ".join(conditions)
    return {"Update": update}


class AdmissionStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.client = table.meta.client
        self.clock = clock or SystemClock()

    # ------------------------------------------------------------------ submission rate

    def take_submission(self, tenant_id: str, per_minute: int) -> int | None:
        """Count one submission of the tenant if fewer than `per_minute` were accepted in the last minute: None
        when it is accepted, else the seconds until one more fits (nothing is counted then).

        The window is the tenant's item of per-second counts (`at<second>`) and `newest`, the latest second counted.
        A second is counted in the window until 61 s after it began (never less than a minute, whatever the moment
        within the second), so no 60-second window ever holds more than `per_minute`. Seconds before `newest`
        never change again, so one write needs only a condition on what may still change: within the newest second,
        its own count (`at<s> < limit - the older seconds`; concurrent submissions in one second never conflict);
        to open a new second, that `newest` and its count are still what was read. A write whose condition fails
        returns the item as it is, and the decision is made again on it."""
        key = schema.submission_rate_key(tenant_id)
        state = plain(self.table.get_item(Key=key, ConsistentRead=True).get("Item") or {})
        for tries in range(CONFLICT_TRIES):
            retry_after, count = rate_decision(RateWindow.of(state), per_minute, self.clock.now().timestamp())
            if retry_after is not None:
                return retry_after
            try:
                self.table.update_item(Key=key, ReturnValuesOnConditionCheckFailure="ALL_OLD", **count)
                return None
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                state = plain(_deserialize(error.response.get("Item") or {}))
            if tries:
                backoff(tries)
        raise TransientError(f"the submission rate of tenant {tenant_id} stayed contended; retry")

    # ------------------------------------------------------------------ a new submission

    def submission_state(
        self, tenant_id: str, *, usage_key: dict[str, str], idempotency_key: dict[str, str] | None = None
    ) -> SubmissionState:
        """Everything a submission decides on, in one consistent `BatchGetItem`."""
        global_key, tenant_key = _keys(tenant_id)
        rate_key = schema.submission_rate_key(tenant_id)
        wanted = [rate_key, global_key, tenant_key, usage_key, *([idempotency_key] if idempotency_key else [])]
        found: dict[tuple[str, str], dict[str, Any]] = {}
        request: dict[str, Any] = {self.table.name: {"Keys": wanted, "ConsistentRead": True}}
        for tries in range(CONFLICT_TRIES):
            response = self.client.batch_get_item(RequestItems=request)
            for read in response.get("Responses", {}).get(self.table.name, []):
                found[(read[schema.PK], read[schema.SK])] = plain(read)
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            backoff(tries)
        else:
            raise TransientError(f"the admission state of tenant {tenant_id} could not be read; retry")

        def item(key: dict[str, str]) -> dict[str, Any]:
            return found.get((key[schema.PK], key[schema.SK]), {})

        platform, tenant, usage = item(global_key), item(tenant_key), item(usage_key)
        return SubmissionState(
            window=RateWindow.of(item(rate_key)),
            counters=Counters(
                global_in_flight=int(platform.get("in_flight", 0)),
                global_queued=max(0, int(platform.get("queued", 0))),
                tenant_in_flight=int(tenant.get("in_flight", 0)),
                tenant_queued=max(0, int(tenant.get("queued", 0))),
            ),
            day_tokens=int(usage.get("tokens", 0)),
            day_cost_micro=int(usage.get("cost_micro", 0)),
            idempotency=(item(idempotency_key) or None) if idempotency_key is not None else None,
        )

    def rate_write(self, tenant_id: str, rate: dict[str, Any]) -> dict[str, Any]:
        """The transaction item that counts a new job in its tenant's rate window (`rate`: `rate_decision`'s)."""
        return {"Update": {"TableName": self.table.name, "Key": schema.submission_rate_key(tenant_id), **rate}}

    def new_job_writes(
        self, tenant_id: str, *, start: bool, tenant_limit: int, global_limit: int
    ) -> list[dict[str, Any]]:
        """The transaction items that give a new job a slot (`start`: below both limits, and no backlog of its
        tenant) or a place in the queue; the job's own item carries `slot` or `waiting`."""
        global_key, tenant_key = _keys(tenant_id)
        if start:
            return [
                _counter_update(self.table.name, global_key, {"in_flight": 1}, below=global_limit),
                _counter_update(self.table.name, tenant_key, {"in_flight": 1}, below=tenant_limit, no_backlog=True),
            ]
        return [
            _counter_update(self.table.name, global_key, {"queued": 1}),
            _counter_update(self.table.name, tenant_key, {"queued": 1}),
        ]

    # ------------------------------------------------------------------ slots

    def acquire(self, job_id: str, tenant_id: str, *, tenant_limit: int, global_limit: int, waiting: bool) -> bool:
        """Take a slot for a queued job: True when taken. `waiting`: the job is in the intake queue (it leaves it);
        otherwise (a new job) the tenant must have none waiting either: a new job never overtakes its own tenant's
        backlog, it joins it and the dispatcher orders them."""
        deltas = {"in_flight": 1, **({"queued": -1} if waiting else {})}
        condition = "#status = :queued AND attribute_not_exists(slot)"
        condition += " AND waiting = :true" if waiting else " AND attribute_not_exists(waiting)"
        guard = {
            "Update": {
                "TableName": self.table.name,
                "Key": schema.job_key(job_id),
                "UpdateExpression": "SET slot = :true REMOVE waiting",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {":true": True, ":queued": JobStatus.QUEUED.value},
            }
        }
        global_key, tenant_key = _keys(tenant_id)
        writes = [
            guard,
            _counter_update(self.table.name, global_key, deltas, below=global_limit),
            _counter_update(self.table.name, tenant_key, deltas, below=tenant_limit, no_backlog=not waiting),
        ]
        return self._try(writes, what=f"taking a slot for job {job_id}")

    def give_back(self, job: Job) -> bool:
        """Give back the slot of a job whose execution could not be started; it waits in the queue again."""
        global_key, tenant_key = _keys(job.tenant_id)
        writes = [
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": schema.job_key(job.job_id),
                    "UpdateExpression": "SET waiting = :true REMOVE slot",
                    "ConditionExpression": "#status = :queued AND slot = :true",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {":true": True, ":queued": JobStatus.QUEUED.value},
                }
            },
            _counter_update(self.table.name, global_key, {"in_flight": -1, "queued": 1}),
            _counter_update(self.table.name, tenant_key, {"in_flight": -1, "queued": 1}),
        ]
        return self._try(writes, what=f"giving back the slot of job {job.job_id}")

    def enqueue(self, job: Job, estimated_start_at: datetime) -> bool:
        """Mark a queued job without a slot as waiting for one (counted in `queued`); False if it is not such a job."""
        global_key, tenant_key = _keys(job.tenant_id)
        writes = [
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": schema.job_key(job.job_id),
                    "UpdateExpression": "SET waiting = :true, estimated_start_at = :at",
                    "ConditionExpression": "#status = :queued AND attribute_not_exists(slot) "
                    "AND attribute_not_exists(waiting)",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {
                        ":true": True,
                        ":queued": JobStatus.QUEUED.value,
                        ":at": iso(estimated_start_at),
                    },
                }
            },
            _counter_update(self.table.name, global_key, {"queued": 1}),
            _counter_update(self.table.name, tenant_key, {"queued": 1}),
        ]
        return self._try(writes, what=f"queueing job {job.job_id}")

    def platform_in_flight(self) -> int:
        item = self.table.get_item(Key=schema.admission_global_key(), ConsistentRead=True).get("Item") or {}
        return int(item.get("in_flight", 0))

    def counters(self, tenant_id: str) -> Counters:
        global_key, tenant_key = _keys(tenant_id)
        platform = self.table.get_item(Key=global_key, ConsistentRead=True).get("Item") or {}
        tenant = self.table.get_item(Key=tenant_key, ConsistentRead=True).get("Item") or {}
        return Counters(
            global_in_flight=int(platform.get("in_flight", 0)),
            global_queued=max(0, int(platform.get("queued", 0))),
            tenant_in_flight=int(tenant.get("in_flight", 0)),
            tenant_queued=max(0, int(tenant.get("queued", 0))),
        )

    def _try(self, writes: list[dict[str, Any]], *, what: str) -> bool:
        """False when a condition did not hold; a conflict with a concurrent transaction on a counter is retried
        (DynamoDB reports it as `TransactionConflict`; moto serialises transactions and reports no reasons)."""
        for tries in range(CONFLICT_TRIES):
            try:
                transact(self.client, writes)
                return True
            except Cancelled as cancelled:
                if "ConditionalCheckFailed" in cancelled.reasons or not cancelled.reasons:
                    return False
                backoff(tries)
        raise TransientError(f"{what} stayed contended; retry")
