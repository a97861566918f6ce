"""Circuit breakers per (provider, model), shared by every function through one DynamoDB item each.

`closed`: calls go through; a failure of a retryable class (throttling, 5xx, a timeout) is counted within a window,
and the N-th within it opens the breaker. `open`: calls fail fast (or go to the route's fallback) until the cooldown
has passed; then exactly one caller wins the conditional move to `half_open` and makes the probe call, the others
still fail fast. The probe's success closes the breaker; its failure opens it again for another cooldown. A probe
that never reports (its function died) is taken over after a cooldown. Every write is conditional on the item's
`version`, so concurrent callers each count once and each transition happens once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso, parse_iso
from longhaul.storage.dynamo import backoff, plain

State = Literal["closed", "open", "half_open"]
Admission = Literal["closed", "probe", "open"]
MAX_TRIES = 20


@dataclass(frozen=True)
class BreakerPolicy:
    failures: int = 5  # retryable failures within `window` that open the breaker
    window: timedelta = timedelta(seconds=60)
    cooldown: timedelta = timedelta(seconds=30)  # open → one probe allowed after this long


@dataclass(frozen=True)
class Breaker:
    state: State = "closed"
    failures: int = 0
    window_start: datetime | None = None
    opened_at: datetime | None = None
    probe_at: datetime | None = None
    version: int = 0


@dataclass(frozen=True)
class Transition:
    provider: str
    model_id: str
    before: State
    after: State
    failures: int


class BreakerStore:
    def __init__(self, table: Any, *, clock: Clock | None = None, policy: BreakerPolicy | None = None) -> None:
        self.table = table
        self.clock = clock or SystemClock()
        self.policy = policy or BreakerPolicy()

    def get(self, provider: str, model_id: str) -> Breaker:
        item = self.table.get_item(Key=schema.breaker_key(provider, model_id), ConsistentRead=True).get("Item")
        if item is None:
            return Breaker()
        item = plain(item)
        return Breaker(
            state=item["state"],
            failures=int(item.get("failures", 0)),
            window_start=_time(item.get("window_start")),
            opened_at=_time(item.get("opened_at")),
            probe_at=_time(item.get("probe_at")),
            version=int(item["version"]),
        )

    def admit(self, provider: str, model_id: str) -> tuple[Admission, Transition | None]:
        """May a call go to this model now? `probe`: this caller is the half-open probe (report its outcome)."""
        for tries in range(MAX_TRIES):
            breaker, now = self.get(provider, model_id), self.clock.now()
            if breaker.state == "closed":
                return "closed", None
            since = breaker.opened_at if breaker.state == "open" else breaker.probe_at
            if since is not None and now - since < self.policy.cooldown:
                return "open", None
            # cooldown over (or the probe went silent): one caller takes the probe
            if self._write(provider, model_id, breaker, {"state": "half_open", "probe_at": iso(now)}):
                moved = Transition(provider, model_id, breaker.state, "half_open", breaker.failures)
                return "probe", moved if breaker.state != "half_open" else None
            backoff(tries)
        return "open", None

    def succeeded(self, provider: str, model_id: str) -> Transition | None:
        """A call succeeded: a breaker that is not closed closes (the probe, or a call admitted before it opened)."""
        for tries in range(MAX_TRIES):
            breaker = self.get(provider, model_id)
            if breaker.state == "closed":
                return None
            fields = {"state": "closed", "failures": 0, "window_start": None, "opened_at": None, "probe_at": None}
            if self._write(provider, model_id, breaker, fields):
                return Transition(provider, model_id, breaker.state, "closed", breaker.failures)
            backoff(tries)
        return None

    def failed(self, provider: str, model_id: str) -> Transition | None:
        """A call failed with a retryable class: count it; the N-th in the window (or a failed probe) opens."""
        for tries in range(MAX_TRIES):
            breaker, now = self.get(provider, model_id), self.clock.now()
            if breaker.state == "open":
                return None  # already open: calls admitted before it opened do not extend it
            if breaker.state == "half_open":
                fields: dict[str, Any] = {"state": "open", "opened_at": iso(now), "probe_at": None}
                opened = True
            else:
                fresh = breaker.window_start is None or now - breaker.window_start >= self.policy.window
                failures = 1 if fresh else breaker.failures + 1
                opened = failures >= self.policy.failures
                start = now if fresh or breaker.window_start is None else breaker.window_start
                fields = {"failures": failures, "window_start": iso(start)}
                if opened:
                    fields |= {"state": "open", "opened_at": iso(now)}
            if self._write(provider, model_id, breaker, fields):
                if not opened:
                    return None
                return Transition(provider, model_id, breaker.state, "open", int(fields.get("failures", 0)))
            backoff(tries)
        return None

    def _write(self, provider: str, model_id: str, seen: Breaker, fields: dict[str, Any]) -> bool:
        """Set `fields` if nobody wrote the breaker since `seen` (False otherwise)."""
        merged = {"state": seen.state, **fields, "provider": provider, "model_id": model_id}
        sets = {k: v for k, v in merged.items() if v is not None}
        removes = [k for k, v in merged.items() if v is None]
        names = {f"#f{i}": k for i, k in enumerate([*sets, *removes])}
        by_name = {k: n for n, k in names.items()}
        values: dict[str, Any] = {f":v{i}": v for i, v in enumerate(sets.values())}
        values |= {":next": seen.version + 1, ":seen": seen.version}
        expression = "SET " + ", ".join([f"{by_name[k]} = :v{i}" for i, k in enumerate(sets)] + ["#version = :next"])
        if removes:
            expression += " REMOVE " + ", ".join(by_name[k] for k in removes)
        condition = "attribute_not_exists(pk)" if seen.version == 0 else "#version = :seen"
        if seen.version == 0:
            values.pop(":seen")
        try:
            self.table.update_item(
                Key=schema.breaker_key(provider, model_id),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames={**names, "#version": "version"},
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _time(value: Any) -> datetime | None:
    return parse_iso(str(value)) if value else None
