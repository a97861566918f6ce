"""Each workflow's recent completed jobs, as the ETA reads them (`longhaul.core.eta`): one small item per workflow.

`HISTORY#<workflow>/ETA` holds the `HISTORY_JOBS` most recent `HistoryEntry`s (per step: its seconds and items),
rewritten on each completion with a condition on its version (concurrent completions retry; a completion that keeps
losing gives up: the history is a hint, never a record). A submission reads it once, through a cache kept
`LOOKUP_CACHE_SECONDS` in the function, and keeps its medians on the job: no GET of a job reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock
from longhaul.core.eta import HISTORY_JOBS, HistoryEntry, StepTiming
from longhaul.core.model import adapter
from longhaul.core.records import StepRecord
from longhaul.storage.cache import TtlCache
from longhaul.storage.dynamo import plain

RECORD_TRIES = 4
_ENTRIES = adapter(list[HistoryEntry])


class HistoryStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.clock = clock or SystemClock()

    def entries(self, workflow: str) -> list[HistoryEntry]:
        """The workflow's recent completed jobs, oldest first (consistent read)."""
        return self._read(workflow)[0]

    def _read(self, workflow: str) -> tuple[list[HistoryEntry], int]:
        item = self.table.get_item(Key=schema.history_key(workflow), ConsistentRead=True).get("Item")
        if item is None:
            return [], 0
        found = plain(item)
        return _ENTRIES.validate_python(found.get("entries") or []), int(found.get("version", 0))

    def record(self, workflow: str, entry: HistoryEntry) -> bool:
        """Add a completed job (once: a job already there is not added again), keeping the most recent ones. False
        when concurrent writers kept winning (nothing written)."""
        for _ in range(RECORD_TRIES):
            entries, version = self._read(workflow)
            if any(e.job_id == entry.job_id for e in entries):
                return True
            kept = [*entries, entry][-HISTORY_JOBS:]
            item = {
                **schema.history_key(workflow),
                "workflow": workflow,
                "version": version + 1,
                "entries": [e.model_dump(mode="json") for e in kept],
            }
            try:
                self.table.put_item(
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk) OR version = :v",
                    ExpressionAttributeValues={":v": version},
                )
                return True
            except ClientError as error:
                if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
        return False


class RecentHistory:
    """What a submission reads: a workflow's entries, kept `LOOKUP_CACHE_SECONDS` in the function."""

    def __init__(self, store: HistoryStore) -> None:
        self.store = store
        self._cache: TtlCache[list[HistoryEntry]] = TtlCache(store.clock)

    def entries(self, workflow: str) -> list[HistoryEntry]:
        """No history is not kept: the first completion is used at once."""
        return self._cache.get(workflow, lambda: self.store.entries(workflow) or None) or []


def entry_of(
    job_id: str,
    sla_class: str,
    size: int,
    finished_at: datetime,
    steps: Sequence[str],
    per_item: Mapping[str, bool],
    records: Sequence[StepRecord],
) -> HistoryEntry:
    """A completed job's entry from its step records: per step of `steps`, from its first start (a fan-out's items,
    an agent's turns: the step's wall clock) to the next step's start — the orchestration between two steps belongs
    to the one before — or, for the last, to its end; and its item count (a step without items: 1). A step that did
    not run (skipped) counts 0 seconds."""
    spans: list[tuple[str, datetime | None, datetime | None, int]] = []
    for name in steps:
        mine = [r for r in records if r.step == name]
        starts = [r.started_at for r in mine if r.started_at]
        ends = [r.finished_at for r in mine if r.finished_at]
        items = len({r.item for r in mine if r.item is not None}) if per_item.get(name) else 1
        spans.append((name, min(starts) if starts else None, max(ends) if ends else None, items))
    timings = []
    for index, (name, start, end, items) in enumerate(spans):
        following = next((s for _, s, _, _ in spans[index + 1 :] if s is not None), None)
        until = following if following is not None and end is not None and following >= end else end
        ms = int((until - start).total_seconds() * 1000) if start and until else 0
        timings.append(StepTiming(step=name, ms=max(ms, 0), items=items))
    return HistoryEntry(job_id=job_id, sla_class=sla_class, size=size, finished_at=finished_at, steps=timings)
