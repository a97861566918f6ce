"""Shared limits per model route: requests and tokens per minute that every function's calls on a route count
against, through DynamoDB counters in the platform's table.

Counting: time is cut into 10-second slots aligned on the epoch (six to a minute); a route's per-minute allowance is
shared out over the minute's six slots (`slot_share`: the slots of a minute add up to exactly the allowance), and one
item per (route, slot) counts the calls and tokens admitted in it. A call is admitted by ONE conditional write: `ADD
requests 1, tokens n` on its slot's item if both stay within the slot's share. A call that does not fit waits for the
next slot (with a little jitter) and tries once more there, up to a bounded wait inside the step (`max_wait`); then it
fails `RateLimitedError`, and the state machine's retry with backoff takes the step up again later. Slots rather than
one minute-long window: the callers that waited for a slot are let through a sixth of the minute's allowance at a
time, so a recovering provider is not hit by every waiting job at the top of the minute, and any calendar minute sees
at most the allowance.

A provider's 429 (throttling) on a route lowers its allowance for a while: the route's share is halved (at most once
per slot, however many calls were throttled together: the write is conditional on the last halving being older than
a slot), held there for `HOLD_SECONDS` (60 s), then recovers additively, by `RECOVERY_PER_MINUTE` (a tenth) of the
configured limit a minute, back to the whole limit; it never goes below `MIN_SHARE` (a sixteenth). One item per route
(`ALLOWANCE`) keeps the share and when it was lowered; each function reads it at most every `ALLOWANCE_TTL_SECONDS`.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock
from longhaul.core.errors import RateLimitedError

SLOT_SECONDS = 10
SLOTS_PER_MINUTE = 60 // SLOT_SECONDS
HOLD_SECONDS = 60  # how long a 429's halving holds before the allowance recovers
RECOVERY_PER_MINUTE = 0.1  # of the configured limit, per minute after the hold
MIN_SHARE = 1 / 16
ALLOWANCE_TTL_SECONDS = 5.0  # how stale a function's copy of a route's allowance may be
MAX_JITTER_SECONDS = 1.0  # spread of the waiting callers' tries into the next slot


@dataclass(frozen=True)
class RouteLimits:
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True)
class Allowance:
    """The share of a route's limits it may use: `share` since `since` (epoch seconds), recovering after the hold."""

    share: float = 1.0
    since: float = 0.0

    def at(self, now: float) -> float:
        if self.share >= 1:
            return 1.0
        recovering = max(0.0, now - self.since - HOLD_SECONDS)
        return min(1.0, self.share + RECOVERY_PER_MINUTE * recovering / 60)


@dataclass(frozen=True)
class Admitted:
    slot: int
    waited_seconds: float
    tries: int


def slot_share(per_minute: int, slot: int) -> int:
    """What slot `slot` (epoch slot number) may admit of a per-minute allowance: the minute's slots add up to it."""
    i = slot % SLOTS_PER_MINUTE
    return (i + 1) * per_minute // SLOTS_PER_MINUTE - i * per_minute // SLOTS_PER_MINUTE


def allowed(limit: int | None, share: float) -> int | None:
    """The per-minute allowance of a configured limit at a share of it (at least 1 while a limit is set)."""
    return None if limit is None else max(1, math.floor(limit * share))


class RouteLimiter:
    def __init__(
        self,
        table: Any,
        *,
        clock: Clock | None = None,
        sleep: Callable[[float], object] = time.sleep,
        max_wait_seconds: float = 20.0,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.table = table
        self.clock = clock or SystemClock()
        self.sleep = sleep
        self.max_wait_seconds = max_wait_seconds
        self.jitter = jitter or (lambda: random.uniform(0, MAX_JITTER_SECONDS))
        self._allowances: dict[str, tuple[float, Allowance]] = {}  # route → (read at, allowance)
        self._lock = threading.Lock()

    def _now(self) -> float:
        return self.clock.now().timestamp()

    # ------------------------------------------------------------------ admission

    def acquire(self, route: str, limits: RouteLimits, tokens: int) -> Admitted:
        """Count one call of `tokens` against `route`'s limits, waiting (bounded) for a slot with room;
        `RateLimitedError` when none had room within `max_wait_seconds`."""
        started = self._now()
        tries = 0
        while True:
            now = self._now()
            slot = int(now // SLOT_SECONDS)
            share = self.allowance(route).at(now)
            requests = allowed(limits.requests_per_minute, share)
            budget = allowed(limits.tokens_per_minute, share)
            tries += 1
            if self._take(route, slot, tokens, requests, budget):
                return Admitted(slot=slot, waited_seconds=now - started, tries=tries)
            retry_at = (slot + 1) * SLOT_SECONDS + self.jitter()
            if retry_at - started > self.max_wait_seconds:
                waited = round(now - started, 1)
                raise RateLimitedError(
                    f"route {route}: its shared limit ({_describe(limits, share)}) had no room for {waited} s"
                )
            self.sleep(max(0.0, retry_at - now))

    def _take(self, route: str, slot: int, tokens: int, requests: int | None, budget: int | None) -> bool:
        """The one conditional write: count the call in `slot` if its counts stay within the slot's shares."""
        conditions, values = [], {":one": 1, ":n": tokens, ":ttl": (slot + 2 * SLOTS_PER_MINUTE) * SLOT_SECONDS}
        if requests is not None:
            room = slot_share(requests, slot)
            if room < 1:
                return False
            conditions.append("(attribute_not_exists(requests) OR requests < :room)")
            values[":room"] = room
        if budget is not None:
            share = slot_share(budget, slot)
            if tokens > share:  # a call larger than a slot's share goes alone, in an empty slot
                conditions.append("attribute_not_exists(tokens)")
            else:
                conditions.append("(attribute_not_exists(tokens) OR tokens <= :left)")
                values[":left"] = share - tokens
        arguments: dict[str, Any] = {
            "Key": schema.route_slot_key(route, slot),
            "UpdateExpression": "ADD requests :one, tokens :n SET #ttl = :ttl",
            "ExpressionAttributeNames": {"#ttl": schema.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": values,
        }
        if conditions:
            arguments["ConditionExpression"] = " AND ".join(conditions)
        try:
            self.table.update_item(**arguments)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # ------------------------------------------------------------------ the allowance

    def allowance(self, route: str) -> Allowance:
        """The route's allowance, read at most every `ALLOWANCE_TTL_SECONDS` by this function."""
        now = time.monotonic()
        with self._lock:
            cached = self._allowances.get(route)
            if cached is not None and now - cached[0] < ALLOWANCE_TTL_SECONDS:
                return cached[1]
        item = self.table.get_item(Key=schema.route_allowance_key(route), ConsistentRead=True).get("Item")
        found = Allowance(float(item["share"]), float(item["since"])) if item else Allowance()
        with self._lock:
            self._allowances[route] = (now, found)
        return found

    def throttled(self, route: str) -> Allowance | None:
        """A provider throttled a call on `route` (a 429): halve its allowance, at most once a slot. Returns the new
        allowance, or None when another caller lowered it within the slot."""
        now = self._now()
        lowered = Allowance(max(MIN_SHARE, self.allowance(route).at(now) / 2), now)
        try:
            self.table.update_item(
                Key=schema.route_allowance_key(route),
                UpdateExpression="SET #share = :share, #since = :since",
                ConditionExpression="attribute_not_exists(#since) OR #since <= :recent",
                ExpressionAttributeNames={"#share": "share", "#since": "since"},
                ExpressionAttributeValues={
                    ":share": _decimal(lowered.share),
                    ":since": _decimal(now),
                    ":recent": _decimal(now - SLOT_SECONDS),
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                with self._lock:
                    self._allowances.pop(route, None)  # read the other caller's halving next time
                return None
            raise
        with self._lock:
            self._allowances[route] = (time.monotonic(), lowered)
        return lowered


def _decimal(value: float) -> Decimal:
    return Decimal(str(round(value, 6)))


def _describe(limits: RouteLimits, share: float) -> str:
    parts = []
    if limits.requests_per_minute is not None:
        parts.append(f"{allowed(limits.requests_per_minute, share)} of {limits.requests_per_minute} requests/min")
    if limits.tokens_per_minute is not None:
        parts.append(f"{allowed(limits.tokens_per_minute, share)} of {limits.tokens_per_minute} tokens/min")
    return ", ".join(parts)
