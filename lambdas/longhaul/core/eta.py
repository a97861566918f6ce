"""An honest ETA: how long a job's remaining steps take, from the same workflow's recent jobs.

Each completed job leaves one `HistoryEntry` in its workflow's history (`storage/history.py`: one small item per
workflow, its `HISTORY_JOBS` most recent jobs): per step, its wall-clock seconds (a fan-out's from its first item's
start to its last item's end) and its item count, and the job's size (what its submission counted: documents,
invoices, vendors). A submission reads that item once (kept `LOOKUP_CACHE_SECONDS` in the function) and keeps on the
job an `EtaSnapshot`: per step of its workflow, in order, the median milliseconds per item and the median item
count of the recent jobs of its SLA class (of every class when its own has none). So a GET of the job reads nothing
more: `estimate` works from the job's own record.

`estimate`: the current step's remainder (a fan-out: the items not done yet at the median pace per item; another
step: its median length less the time it has run) plus, for every step ahead, the median per item times this job's
expected items (a fan-out's count scaled from the history's by the job's size; a review step counts its typical
wait). Without history (`basis` "current_step"), each step ahead is taken to last as long as this job's finished
steps did on average, and a fan-out's remainder comes from its own pace: never the job's whole elapsed time divided
by one fan-out's fraction of items.

May import: core only.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import Field

from longhaul.core.model import Model

#: How many recent completed jobs of a workflow its history keeps.
HISTORY_JOBS = 20
# A step ahead of a job without history, when the job has finished no step yet to learn a pace from.
DEFAULT_STEP_SECONDS = 2.0

EtaBasis = Literal["history", "current_step"]


class StepTiming(Model):
    """One step of one completed job: its wall-clock length and its item count (1 for a step without items)."""

    step: str
    ms: int = Field(ge=0)
    items: int = Field(default=1, ge=0)


class HistoryEntry(Model):
    """What one completed job tells the ETA of later jobs of its workflow."""

    job_id: str
    sla_class: str = "standard"
    size: int = Field(default=1, ge=0)
    finished_at: datetime
    steps: list[StepTiming] = Field(default_factory=list)


class StepBasis(Model):
    """A step of the workflow, in order, with what history says of it (None: no history)."""

    step: str
    per_item: bool = False  # a fan-out (or container) step: its length scales with its item count
    ms_per_item: int | None = None
    items: int | None = None  # the median item count of the recent jobs


class EtaSnapshot(Model):
    """What a job keeps of its workflow's history at submission: the steps in order and their medians."""

    jobs: int = 0  # the recent jobs the medians come from (0: no history)
    size: int = 1  # this job's size
    history_size: int = 1  # the median size of those jobs
    steps: list[StepBasis] = Field(default_factory=list)

    def expected_items(self, basis: StepBasis) -> int:
        """A step's item count for this job: the history's median scaled by the job's size."""
        if not basis.per_item:
            return 1
        if basis.items is None:
            return 1
        return round(basis.items * self.size / max(self.history_size, 1))

    def step_seconds(self, basis: StepBasis, items: int | None = None) -> float | None:
        """A whole step's seconds for this job (with `items`: for that many), None without history."""
        if self.jobs == 0 or basis.ms_per_item is None:
            return None
        count = self.expected_items(basis) if items is None else items
        return basis.ms_per_item / 1000 * count

    def total_seconds(self) -> float | None:
        """The whole job's seconds from history (the submission's `estimated_sla_seconds`); None without history."""
        if self.jobs == 0:
            return None
        return sum(self.step_seconds(s) or 0.0 for s in self.steps)


def snapshot(
    steps: Sequence[tuple[str, bool]], entries: Sequence[HistoryEntry], *, sla_class: str, size: int
) -> EtaSnapshot:
    """The medians of `entries` (those of `sla_class` when there are any) for `steps` (name, per-item) in order."""
    import statistics  # a submission's, not every cold start's (the API function's import)

    own = [e for e in entries if e.sla_class == sla_class]
    used = own or list(entries)
    bases = []
    for name, per_item in steps:
        timings = [t for e in used for t in e.steps if t.step == name]
        if not timings:
            bases.append(StepBasis(step=name, per_item=per_item))
            continue
        per = [t.ms / t.items if t.items else 0.0 for t in timings] if per_item else [float(t.ms) for t in timings]
        items = [t.items for t in timings]
        bases.append(
            StepBasis(
                step=name,
                per_item=per_item,
                ms_per_item=round(statistics.median(per)),
                items=round(statistics.median(items)) if per_item else 1,
            )
        )
    sizes = [e.size for e in used]
    return EtaSnapshot(
        jobs=len(used),
        size=size,
        history_size=max(1, round(statistics.median(sizes))) if sizes else 1,
        steps=bases,
    )


def estimate(
    snap: EtaSnapshot,
    *,
    now: datetime,
    current_step: str | None,
    started_at: datetime | None,
    step_started_at: datetime | None,
    items_done: int | None = None,
    items_total: int | None = None,
) -> tuple[float, EtaBasis] | None:
    """The seconds until the job finishes and what they come from; None when the workflow's steps are unknown.

    `current_step` None: the job has not started (every step is ahead). `items_done`/`items_total`: the current
    step's fan-out progress, when it is one."""
    names = [s.step for s in snap.steps]
    if not names:
        return None
    index = names.index(current_step) if current_step in names else -1
    history = snap.jobs > 0
    in_step = max((now - step_started_at).total_seconds(), 0.0) if step_started_at and index >= 0 else 0.0
    # Without history: a step ahead lasts as long as this job's finished steps did, on average.
    finished_seconds = (
        (step_started_at - started_at).total_seconds() if started_at and step_started_at and index > 0 else 0.0
    )
    pace = finished_seconds / index if index > 0 and finished_seconds > 0 else DEFAULT_STEP_SECONDS
    remaining = 0.0
    if index >= 0:
        current = snap.steps[index]
        whole = snap.step_seconds(current, items_total if current.per_item and items_total else None)
        fan_out = current.per_item and items_total is not None and items_done is not None and items_total > 0
        if whole is not None and fan_out:
            assert items_total is not None and items_done is not None
            remaining += whole * (items_total - items_done) / items_total
        elif whole is not None:
            remaining += max(whole - in_step, 0.0)
        elif fan_out and items_done:
            assert items_total is not None
            remaining += in_step / items_done * (items_total - items_done)  # the step's own pace
        else:
            remaining += max(pace - in_step, 0.0)
    for ahead in snap.steps[index + 1 :]:
        seconds = snap.step_seconds(ahead)
        remaining += pace if seconds is None else seconds
    return max(remaining, 0.0), "history" if history else "current_step"
