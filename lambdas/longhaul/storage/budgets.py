"""Budgets in DynamoDB: tenant policies, a tenant's daily spending, and each model call's reservation.

A reservation holds what a call can use (`longhaul.core.budgets.CallSize`) against the job's budget and the tenant's
day: a polled read of both says whether it fits now, must wait for calls in flight to release what they hold, or can
never fit (`decide`); then one transaction grows the job's held tokens and micro-dollars only if the job is still
running and they stay within its limits, the tenant's day likewise within its allowance, and writes the call's ledger
item (`JOB#<id>/CHARGE#<charge id>`). DynamoDB conditions cannot add, so the room left (`limit - reservation`) is
computed here and compared with what is held: the condition, not the read, is what keeps spending within a limit. A
wait is bounded (`Waiting`, on the store's clock), then `RateLimitedError`: the state machine retries the step with
backoff. Settling moves the held amounts to the actual usage, once (the ledger item's status guards it). A
reservation that can never fit marks the job `budget_exhausted`, after which no call of the job reserves at all: the
remaining items of a fan-out fail without calls.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.budgets import (
    DEFAULT_LANE,
    CallSize,
    Lane,
    Refused,
    Reservation,
    Room,
    Scope,
    TenantPolicy,
    Wait,
    decide,
    default_policy,
    job_limits,
)
from longhaul.core.clock import Clock, SystemClock, iso
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import BudgetExceededError, CancelledError, RateLimitedError, TransientError
from longhaul.core.records import TIER_FIELDS, Charge, Job, tier_attribute
from longhaul.storage.cache import TtlCache
from longhaul.storage.dynamo import Cancelled, plain, query_prefix, transact

# The job's settled token counters: every token a call used counts against its budget, cached or not.
SETTLED_TOKENS = ("usage_input_tokens", "usage_output_tokens", "usage_cache_read_tokens", "usage_cache_write_tokens")
# A step under way when its job paused finishes its calls (the pause holds the next step boundary, not this one).
LIVE = (JobStatus.RUNNING.value, JobStatus.RETRYING.value, JobStatus.PAUSED.value)


class CallLabels(NamedTuple):
    """What a ledger item says about its call (for audits and the per-step view)."""

    step: str
    item: int | None
    route: str
    provider: str
    model_id: str
    prompt_version: str
    prompt_hash: str
    code_version: str | None = None
    workflow_version: int | None = None
    lane: Lane = DEFAULT_LANE  # how the call is sent: on demand, or as a record of a batch inference job


class StoredPolicy(NamedTuple):
    """A tenant's policy as stored: `exists` False means the defaults; `revision` changes with every write (None for
    a policy written before revisions), so a read-modify-write can be conditional on nothing having changed."""

    policy: TenantPolicy
    exists: bool
    revision: str | None


class PolicyChanged(Exception):
    """The policy changed between the read and the conditional write."""


class DayUsage(NamedTuple):
    """A tenant's day: settled usage plus what calls in flight hold (`held_*`, included in the totals)."""

    tokens: int = 0
    cost_micro: int = 0
    held_tokens: int = 0
    held_cost_micro: int = 0


class Waiting(NamedTuple):
    """How a reservation waits for calls in flight to release room: it reads again after `first` seconds, then after
    twice as long each time up to `longest`, for at most `bound` seconds of the store's clock in all."""

    bound: float = 30.0
    first: float = 0.05
    longest: float = 1.0
    sleep: Callable[[float], None] = time.sleep


class BudgetStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, waiting: Waiting | None = None) -> None:
        self.table = table
        self.client = table.meta.client
        self.clock = clock or SystemClock()
        self.waiting = waiting or Waiting()
        self._policies: TtlCache[TenantPolicy] = TtlCache(self.clock)

    # ------------------------------------------------------------------ tenant policies

    def policy(self, tenant_id: str) -> TenantPolicy:
        """The tenant's policy, or the documented defaults."""
        return self.stored_policy(tenant_id).policy

    def recent_policy(self, tenant_id: str) -> TenantPolicy:
        """The tenant's policy as read at most `LOOKUP_CACHE_SECONDS` ago (`storage/cache.py`): what a submission
        checks. A change written through this store applies here at once, one written elsewhere within that time."""
        found = self._policies.get(tenant_id, lambda: self.policy(tenant_id))
        assert found is not None  # `policy` always answers (the defaults when none is stored)
        return found

    def stored_policy(self, tenant_id: str) -> StoredPolicy:
        item = self.table.get_item(Key=schema.tenant_policy_key(tenant_id), ConsistentRead=True).get("Item")
        if item is None:
            return StoredPolicy(default_policy(), exists=False, revision=None)
        fields = {k: v for k, v in plain(item).items() if k in TenantPolicy.model_fields}
        revision = item.get("revision")
        return StoredPolicy(
            TenantPolicy.model_validate(fields), exists=True, revision=str(revision) if revision else None
        )

    def has_policy(self, tenant_id: str) -> bool:
        return "Item" in self.table.get_item(Key=schema.tenant_policy_key(tenant_id), ConsistentRead=True)

    def put_policy(self, tenant_id: str, policy: TenantPolicy, *, replacing: StoredPolicy | None = None) -> None:
        """Write the tenant's policy; with `replacing`, only if it is still the one read (else `PolicyChanged`)."""
        # Money as strings: the policy is read back exactly as written.
        stored = {k: (str(v) if k.endswith("_usd") else v) for k, v in policy.model_dump().items() if v is not None}
        item = {
            **schema.tenant_policy_key(tenant_id),
            **stored,
            "tenant_id": tenant_id,
            "updated_at": self._now(),
            "revision": uuid.uuid4().hex,
        }
        condition: dict[str, Any] = {}
        if replacing is not None and not replacing.exists:
            condition = {"ConditionExpression": "attribute_not_exists(pk)"}
        elif replacing is not None and replacing.revision is None:
            condition = {"ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(revision)"}
        elif replacing is not None:
            condition = {
                "ConditionExpression": "revision = :revision",
                "ExpressionAttributeValues": {":revision": replacing.revision},
            }
        try:
            self.table.put_item(Item=item, **condition)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise PolicyChanged(tenant_id) from None
            raise
        finally:
            self._policies.forget(tenant_id)

    def day(self) -> str:
        return self.clock.now().date().isoformat()

    def day_usage(self, tenant_id: str, day: str | None = None) -> DayUsage:
        key = schema.tenant_usage_key(tenant_id, day or self.day())
        item = self.table.get_item(Key=key, ConsistentRead=True).get("Item") or {}
        return DayUsage(
            tokens=int(item.get("tokens", 0)),
            cost_micro=int(item.get("cost_micro", 0)),
            held_tokens=int(item.get("held_tokens", 0)),
            held_cost_micro=int(item.get("held_cost_micro", 0)),
        )

    # ------------------------------------------------------------------ the ledger

    def ledger_item(self, job_id: str, charge_id: str) -> Charge | None:
        item = self.table.get_item(Key=schema.charge_key(job_id, charge_id), ConsistentRead=True).get("Item")
        return Charge.model_validate(plain(item)) if item else None

    def ledger(self, job_id: str) -> list[Charge]:
        return [Charge.model_validate(i) for i in query_prefix(self.table, schema.job_pk(job_id), schema.CHARGE_PREFIX)]

    def with_limits(self, job: Job, policy: TenantPolicy) -> Job:
        """The job with its budget: one admitted without (before budgets existed) takes the tenant's ceilings."""
        if job.budget_tokens is not None and job.budget_cost_micro is not None:
            return job
        tokens, cost, _ = job_limits(None, policy)
        try:
            self.table.update_item(
                Key=schema.job_key(job.job_id),
                UpdateExpression="SET budget_tokens = :t, budget_cost_micro = :c",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(budget_tokens)",
                ExpressionAttributeValues={":t": tokens, ":c": cost},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        item = self.table.get_item(Key=schema.job_key(job.job_id), ConsistentRead=True).get("Item") or {}
        limits = {"budget_tokens": int(item.get("budget_tokens", tokens))}
        limits["budget_cost_micro"] = int(item.get("budget_cost_micro", cost))
        return job.model_copy(update=limits)

    def reserve(
        self, job: Job, charge_id: str, size: CallSize, policy: TenantPolicy, labels: CallLabels
    ) -> Reservation:
        """Hold what the call can use against the job and its tenant's day, and answer what was held (its output
        cap lowered when the whole cap can no longer fit). Waits, within `waiting.bound`, while calls in flight hold
        the room the call needs, then raises `RateLimitedError` (retried by the state machine); raises
        `BudgetExceededError` (nothing held, the job marked exhausted) when the call can never fit."""
        if job.budget_tokens is None or job.budget_cost_micro is None:
            raise BudgetExceededError(f"job {job.job_id} has no budget", step=labels.step, item=labels.item)
        deadline = self.clock.now() + timedelta(seconds=self.waiting.bound)
        delay = self.waiting.first
        while True:
            answer = self.try_reserve(job, charge_id, size, policy, labels)
            if isinstance(answer, Reservation):
                return answer
            remaining = (deadline - self.clock.now()).total_seconds()
            if remaining <= 0:
                raise RateLimitedError(
                    f"{labels.step}: the budget's room is held by calls in flight for longer than "
                    f"{self.waiting.bound:g} s; retry",
                    step=labels.step,
                    item=labels.item,
                )
            self.waiting.sleep(min(delay, remaining))
            delay = min(delay * 2, self.waiting.longest)

    def try_reserve(
        self, job: Job, charge_id: str, size: CallSize, policy: TenantPolicy, labels: CallLabels
    ) -> Reservation | Wait:
        """One read and, if the call fits now, its reservation: what was held, or `Wait` (calls in flight hold the
        room it needs, or another reservation came first). Raises `BudgetExceededError` (the job marked exhausted)
        when it can never fit."""
        verdict, limits = self.verdict(job, size, policy, labels)
        if isinstance(verdict, Refused):
            self._exhaust(job.job_id, verdict.scope)
            raise self._exceeded(size, labels, verdict.scope)
        if isinstance(verdict, Reservation) and self._hold(job, charge_id, verdict, policy, labels, limits):
            return verdict
        return Wait()

    def verdict(
        self, job: Job, size: CallSize, policy: TenantPolicy, labels: CallLabels
    ) -> tuple[Reservation | Wait | Refused, tuple[int, int]]:
        """Whether the call fits now, from a consistent read of the job and the tenant's day (and the job's limits
        read, which the reservation's condition checks are unchanged). A job no longer running raises
        `CancelledError`; an exhausted one is refused."""
        current = self.table.get_item(Key=schema.job_key(job.job_id), ConsistentRead=True).get("Item") or {}
        if current.get("status") not in LIVE:
            raise CancelledError(
                f"job {job.job_id} is {current.get('status', 'gone')}: no model call is made",
                step=labels.step,
                item=labels.item,
            )
        limit_t = int(current.get("budget_tokens", job.budget_tokens or 0))
        limit_c = int(current.get("budget_cost_micro", job.budget_cost_micro or 0))
        if current.get("budget_exhausted"):
            scope: Scope = "tenant" if current["budget_exhausted"] == "tenant" else "job"
            return Refused(scope=scope), (limit_t, limit_c)
        settled_t = sum(int(current.get(name, 0)) for name in SETTLED_TOKENS)
        settled_c = int(current.get("cost_micro", 0))
        job_room = Room(
            scope="job",
            limit_tokens=limit_t,
            limit_cost_micro=limit_c,
            settled_tokens=settled_t,
            settled_cost_micro=settled_c,
            held_tokens=int(current.get("spent_tokens", 0)) - settled_t,
            held_cost_micro=int(current.get("spent_cost_micro", 0)) - settled_c,
        )
        day = self.day_usage(job.tenant_id)
        day_room = Room(
            scope="tenant",
            limit_tokens=policy.daily_tokens,
            limit_cost_micro=int(policy.daily_cost_usd * 1_000_000),
            settled_tokens=day.tokens - day.held_tokens,
            settled_cost_micro=day.cost_micro - day.held_cost_micro,
            held_tokens=day.held_tokens,
            held_cost_micro=day.held_cost_micro,
        )
        return decide(size, (job_room, day_room)), (limit_t, limit_c)

    def _hold(
        self,
        job: Job,
        charge_id: str,
        held: Reservation,
        policy: TenantPolicy,
        labels: CallLabels,
        limits: tuple[int, int],
    ) -> bool:
        """The reservation's transaction; False when another write came first (read again and decide again)."""
        day = self.day()
        budget_t, budget_c = limits
        rooms = {
            ":room_t": budget_t - held.tokens,
            ":room_c": budget_c - held.cost_micro,
            ":day_t": policy.daily_tokens - held.tokens,
            ":day_c": int(policy.daily_cost_usd * 1_000_000) - held.cost_micro,
        }
        ledger = {
            **schema.charge_key(job.job_id, charge_id),
            "charge_id": charge_id,
            "status": "reserved",
            "step": labels.step,
            "reserved_tokens": held.tokens,
            "reserved_cost_micro": held.cost_micro,
            "reserved_output_tokens": held.output_tokens,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_micro": 0,
            "day": day,
            "tenant_id": job.tenant_id,
            "route": labels.route,
            "provider": labels.provider,
            "model_id": labels.model_id,
            "prompt_version": labels.prompt_version,
            "prompt_hash": labels.prompt_hash,
            "lane": labels.lane,
            "at": self._now(),
        }
        if labels.item is not None:
            ledger["item"] = labels.item
        if held.capped_by is not None:
            ledger["capped_by"] = held.capped_by
        if labels.code_version is not None:
            ledger["code_version"] = labels.code_version
        if labels.workflow_version is not None:
            ledger["workflow_version"] = labels.workflow_version
        if labels.lane != "on_demand":
            ledger["lane"] = labels.lane
        try:
            transact(
                self.client,
                [
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": schema.job_key(job.job_id),
                            "UpdateExpression": "ADD spent_tokens :t, spent_cost_micro :c",
                            "ConditionExpression": "#job_status IN (:running, :retrying, :paused) "
                            "AND attribute_not_exists(budget_exhausted) "
                            "AND budget_tokens = :bt AND budget_cost_micro = :bc "
                            "AND (attribute_not_exists(spent_tokens) OR spent_tokens <= :room_t) "
                            "AND (attribute_not_exists(spent_cost_micro) OR spent_cost_micro <= :room_c)",
                            "ExpressionAttributeNames": {"#job_status": "status"},
                            "ExpressionAttributeValues": {
                                ":t": held.tokens,
                                ":c": held.cost_micro,
                                ":bt": budget_t,
                                ":bc": budget_c,
                                ":room_t": rooms[":room_t"],
                                ":room_c": rooms[":room_c"],
                                ":running": JobStatus.RUNNING.value,
                                ":retrying": JobStatus.RETRYING.value,
                                ":paused": JobStatus.PAUSED.value,
                            },
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": schema.tenant_usage_key(job.tenant_id, day),
                            "UpdateExpression": "ADD tokens :t, cost_micro :c, held_tokens :t, held_cost_micro :c "
                            "SET tenant_id = :tenant",
                            "ConditionExpression": "(attribute_not_exists(tokens) OR tokens <= :day_t) "
                            "AND (attribute_not_exists(cost_micro) OR cost_micro <= :day_c)",
                            "ExpressionAttributeValues": {
                                ":t": held.tokens,
                                ":c": held.cost_micro,
                                ":day_t": rooms[":day_t"],
                                ":day_c": rooms[":day_c"],
                                ":tenant": job.tenant_id,
                            },
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table.name,
                            "Item": ledger,
                            # a released reservation (its call failed) is reserved again by the retry
                            "ConditionExpression": "attribute_not_exists(pk) OR #status = :released",
                            "ExpressionAttributeNames": {"#status": "status"},
                            "ExpressionAttributeValues": {":released": "released"},
                        }
                    },
                ],
            )
        except Cancelled:
            existing = self.ledger_item(job.job_id, charge_id)
            if existing is not None and existing.status != "released":
                raise TransientError(
                    f"charge {charge_id} is being made by another delivery; retry", step=labels.step
                ) from None
            return False  # the job or the day moved meanwhile (another call reserved or settled): decide again
        return True

    def exhaust(self, job_id: str, by: Scope) -> None:
        """Mark the job's budget exhausted (`job`) or its tenant's day (`tenant`): no later call of it reserves."""
        self._exhaust(job_id, by)

    def _exhaust(self, job_id: str, by: Scope) -> None:
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="SET budget_exhausted = :by",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(budget_exhausted)",
                ExpressionAttributeValues={":by": by},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    @staticmethod
    def _exceeded(size: CallSize, labels: CallLabels, by: Scope) -> BudgetExceededError:
        smallest = size.reservation(size.min_output_tokens)
        return BudgetExceededError(
            f"{labels.step}: a call to {labels.provider}:{labels.model_id} needs at least {smallest.tokens} tokens "
            f"({smallest.cost_micro / 1_000_000:.6f} USD; {size.input_tokens} of its prompt) and does not fit "
            f"{whose(by)}; no call was made",
            step=labels.step,
            item=labels.item,
        )

    def settle(
        self,
        job_id: str,
        charge_id: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cost_micro: int,
        stop_reason: str | None = None,
        response: str | None = None,
        response_hash: str | None = None,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        list_cost_micro: int | None = None,
        service_tier: str | None = None,
    ) -> bool:
        """Replace the reservation by the actual usage (False if it was already settled or released).

        `input_tokens` are the prompt's uncached tokens, `cache_read_tokens`/`cache_write_tokens` those read from and
        written to the provider's cache (all count against the token budget); `cost_micro` is what they cost in the
        charge's lane (`Charge.lane`), `list_cost_micro` what the same tokens cost on demand, uncached (None: the
        same as `cost_micro`): the job's `saved_usd` is their difference. A call paid at a service tier
        (`service_tier`) is recorded with it, and counted in the job's usage by tier."""
        held = self.ledger_item(job_id, charge_id)
        if held is None or held.status != "reserved":
            return False
        tokens = input_tokens + output_tokens + cache_read_tokens + cache_write_tokens
        listed = cost_micro if list_cost_micro is None else list_cost_micro
        fields = {
            ":settled": "settled",
            ":reserved": "reserved",
            ":i": input_tokens,
            ":o": output_tokens,
            ":c": cost_micro,
            ":cr": cache_read_tokens,
            ":cw": cache_write_tokens,
            ":l": listed,
        }
        sets = "#status = :settled, input_tokens = :i, output_tokens = :o, cost_micro = :c"
        sets += ", cache_read_tokens = :cr, cache_write_tokens = :cw, list_cost_micro = :l"
        if stop_reason is not None:
            sets += ", stop_reason = :sr"
            fields[":sr"] = stop_reason
        if response_hash is not None:  # the raw response is kept in the artifacts under its hash
            sets += ", response_hash = :rh"
            fields[":rh"] = response_hash
        if response is not None and len(response.encode()) < 100_000:  # a rerun answers from it, uncharged
            sets += ", #response = :r"
            fields[":r"] = response
        if service_tier is not None:
            sets += ", service_tier = :tier"
            fields[":tier"] = service_tier
        actual = Settled(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, listed)
        return self._move(
            job_id, held, f"SET {sets}", fields, tokens=tokens, cost=cost_micro, actual=actual, tier=service_tier
        )

    def release(self, job_id: str, charge_id: str) -> bool:
        """Give a reservation back (the call failed before any usage)."""
        held = self.ledger_item(job_id, charge_id)
        if held is None or held.status != "reserved":
            return False
        values = {":released": "released", ":reserved": "reserved"}
        return self._move(job_id, held, "SET #status = :released", values, tokens=0, cost=0, actual=Settled())

    def _move(
        self,
        job_id: str,
        held: Charge,
        update: str,
        values: dict[str, Any],
        *,
        tokens: int,
        cost: int,
        actual: Settled,
        tier: str | None = None,
    ) -> bool:
        delta_t, delta_c = tokens - held.reserved_tokens, cost - held.reserved_cost_micro
        usage = "ADD spent_tokens :dt, spent_cost_micro :dc, usage_input_tokens :i, usage_output_tokens :o, "
        usage += "cost_micro :c, usage_cache_read_tokens :cr, usage_cache_write_tokens :cw, model_list_cost_micro :l"
        usage_values = {
            ":dt": delta_t,
            ":dc": delta_c,
            ":i": actual.input_tokens,
            ":o": actual.output_tokens,
            ":c": cost,
            ":cr": actual.cache_read_tokens,
            ":cw": actual.cache_write_tokens,
            ":l": actual.list_cost_micro,
        }
        if held.lane != DEFAULT_LANE:  # a lane's own counters (the on-demand lane's are the totals less the others')
            usage += "".join(f", lane_{held.lane}_{name} :{key}" for name, key in LANE_COUNTERS)
        usage_names: dict[str, str] = {}
        if tier is not None:  # the job's usage by service tier: flat counters `tier_<tier>_…` (see `Job.tier_usage`)
            usage += ", #ti :i, #to :o, #tc :c"
            usage_names = {f"#t{k}": tier_attribute(tier, f) for k, f in TIER_FIELDS.items()}
        try:
            transact(
                self.client,
                [
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": schema.charge_key(job_id, held.charge_id),
                            "UpdateExpression": update,
                            "ConditionExpression": "#status = :reserved",
                            "ExpressionAttributeNames": {"#status": "status"}
                            | ({"#response": "response"} if ":r" in values else {}),
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": schema.job_key(job_id),
                            "UpdateExpression": usage,
                            **({"ExpressionAttributeNames": usage_names} if usage_names else {}),
                            "ExpressionAttributeValues": usage_values,
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.name,
                            "Key": schema.tenant_usage_key(held.tenant_id or "", held.day or self.day()),
                            "UpdateExpression": "ADD tokens :dt, cost_micro :dc, held_tokens :ht, held_cost_micro :hc",
                            "ExpressionAttributeValues": {
                                ":dt": delta_t,
                                ":dc": delta_c,
                                ":ht": -held.reserved_tokens,
                                ":hc": -held.reserved_cost_micro,
                            },
                        }
                    },
                ],
            )
        except Cancelled:
            return False  # settled or released by another delivery meanwhile
        return True

    def _now(self) -> str:
        return iso(self.clock.now())


class Settled(NamedTuple):
    """A call's actual usage as it moves into the job's counters (all zero for a release)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    list_cost_micro: int = 0


# A lane's counters on the job's item (`lane_<lane>_<name>`), from the settled usage's values.
LANE_COUNTERS = (
    ("input_tokens", "i"),
    ("output_tokens", "o"),
    ("cache_read_tokens", "cr"),
    ("cache_write_tokens", "cw"),
    ("cost_micro", "c"),
    ("list_cost_micro", "l"),
)


def whose(scope: Scope) -> str:
    return "the tenant's daily allowance" if scope == "tenant" else "the job's budget"
