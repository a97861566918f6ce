"""Item lists: what a fan-out runs over, by reference, whatever its length.

A step whose output a later fan-out (or container step) runs `over` returns an `ItemList`: how many items, the S3 key
of its manifest, and the items themselves only while they are few (`limits.INLINE_MAP_MAX_ITEMS`). The state machine
runs a short list as an inline Map over `items`, a long one as a Distributed Map reading the manifest, whose elements
are batches of `limits.MAP_BATCH_ITEMS` items (moto's interpreter has no `ItemBatcher`, and a pre-batched manifest is
as legal on AWS). Either way an item is one `{index, ref}`: one checkpoint, one fault index, one dead letter; the
batch is only how the Distributed Map carries items.

A grouped list (the producer passes each item's `weights`) also holds its items in groups of consecutive items
(`groups`, while they are few; the manifest's batches are then the groups): one Lambda invocation runs a group's
items one after the other, each as its own item, so that many light items (small documents) do not cost a Lambda
invocation and a state transition each. A group closes at `limits.ITEM_GROUP_MAX_ITEMS` items or
`limits.ITEM_GROUP_MAX_WEIGHT` (bytes to read, say); an item of unknown weight runs in a group of its own.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from longhaul.core import limits
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import CancelledError, JobPaused
from longhaul.core.model import Model
from longhaul.core.records import StepRecord
from longhaul.core.step_events import Item, ItemTally, TallyEvent
from longhaul.storage import artifacts as keys
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.jobs import ACTIVE

if TYPE_CHECKING:
    from longhaul.services import Services


class ItemBatch(Model):
    """One element of a manifest: what one child execution of a Distributed Map runs."""

    items: list[Item]


class ItemList(Model):
    """A fan-out's items by reference: `items` only when there are at most `INLINE_MAP_MAX_ITEMS` of them; a grouped
    list's `group_count`, and its `groups` when its `items` are there."""

    count: int = Field(ge=0)
    manifest_key: str
    items: list[Item] | None = None
    group_count: int | None = Field(default=None, exclude_if=lambda count: count is None)
    groups: list[ItemBatch] | None = Field(default=None, exclude_if=lambda groups: groups is None)

    @property
    def inline(self) -> bool:
        return self.items is not None


def manifest_key(job_id: str, step: str, name: str) -> str:
    return keys.work_key(job_id, step, f"{name}.manifest.json")


def batches(items: Sequence[Item], size: int = limits.MAP_BATCH_ITEMS) -> list[ItemBatch]:
    return [ItemBatch(items=list(items[start : start + size])) for start in range(0, len(items), size)]


def groups_of(
    weights: Sequence[int | None],
    *,
    max_items: int = limits.ITEM_GROUP_MAX_ITEMS,
    max_weight: int = limits.ITEM_GROUP_MAX_WEIGHT,
) -> list[range]:
    """Consecutive groups of items (by position): each at most `max_items` long and `max_weight` heavy; an item of
    unknown weight (None), or heavier than `max_weight`, alone."""
    if max_items < 1 or max_weight < 1:
        raise ValueError("a group holds at least one item")
    groups: list[range] = []
    first, weight, solo = 0, 0, False
    for position, item_weight in enumerate(weights):
        alone = item_weight is None or item_weight > max_weight
        if position > first and (
            solo or alone or position - first >= max_items or weight + (item_weight or 0) > max_weight
        ):
            groups.append(range(first, position))
            first, weight = position, 0
        solo = alone
        weight += item_weight or 0
    if len(weights) > first:
        groups.append(range(first, len(weights)))
    return groups


def write_item_list(
    store: ArtifactStore,
    job_id: str,
    step: str,
    name: str,
    refs: Iterable[Any],
    *,
    weights: Sequence[int | None] | None = None,
    inline_max: int = limits.INLINE_MAP_MAX_ITEMS,
    batch_size: int = limits.MAP_BATCH_ITEMS,
) -> dict[str, Any]:
    """Write the manifest of `refs` (item i is refs[i]) at a deterministic key of (job, step, name) and return the
    `ItemList` as the step output field (a plain dict: step outputs are JSON). With `weights` (one per item), a
    grouped list: its manifest's batches are its groups (`groups_of`)."""
    items = [Item(index=i, ref=ref) for i, ref in enumerate(refs)]
    key = manifest_key(job_id, step, name)
    inline = len(items) <= inline_max
    if weights is None:
        store.put_json(key, [b.model_dump(mode="json") for b in batches(items, batch_size)])
        listed = ItemList(count=len(items), manifest_key=key, items=items if inline else None)
        return listed.model_dump(mode="json")
    if len(weights) != len(items):
        raise ValueError(f"{len(weights)} weights for {len(items)} items")
    groups = [ItemBatch(items=items[r.start : r.stop]) for r in groups_of(weights)]
    store.put_json(key, [g.model_dump(mode="json") for g in groups])
    listed = ItemList(
        count=len(items),
        manifest_key=key,
        items=items if inline else None,
        group_count=len(groups),
        groups=groups if inline else None,
    )
    return listed.model_dump(mode="json")


def item_count(value: Any) -> int | None:
    """The number of items of a step output field a fan-out runs over (an `ItemList`, or a plain list)."""
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict) and isinstance(value.get("count"), int):
        return int(value["count"])
    return None


def committed_items(records: Iterable[StepRecord], step: str) -> set[int]:
    """The items of `step` with a committed checkpoint."""
    return {r.item for r in records if r.step == step and r.item is not None and r.succeeded}


def tally(raw_event: Mapping[str, Any], services: "Services") -> dict[str, Any]:
    """After a Distributed Map: did every item of the step commit? Its children's results stay in S3, so the
    checkpoint store answers (an item commits once, whatever its retries). A job that no longer runs stops the
    execution (`CancelledError`, as a step would)."""
    event = TallyEvent.model_validate(raw_event)
    job = services.jobs.get_job(event.job_id)
    if job is not None and job.status == JobStatus.PAUSED:  # a batch's item found it paused: wait, then enter again
        raise JobPaused(f"job {event.job_id} is paused in fan-out {event.step}", step=event.step)
    if job is None or job.status not in ACTIVE:
        status = job.status.value if job else "gone"
        raise CancelledError(f"job {event.job_id} is {status}; fan-out {event.step} not tallied", step=event.step)
    committed = committed_items(services.checkpoints.steps(event.job_id), event.step)
    done = len({i for i in committed if i < event.count})
    return ItemTally(any_failed=done < event.count, committed=done, count=event.count).model_dump()
