"""Item lists: the manifest a Distributed Map reads, batched; the inline list only while short; the tally after a
Distributed Map; a fan-out's progress counted once per item."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.core import limits
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import CancelledError
from longhaul.core.records import FAN_OUT_UNIT
from longhaul.engine.items import ItemBatch, ItemList, item_count, tally, write_item_list
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore, done_attribute
from longhaul.storage.jobs import JobStore
from tests.unit.test_job_store import new_job, read

S = JobStatus


def _manifest(services: Services, listed: ItemList) -> list[ItemBatch]:
    return [ItemBatch.model_validate(b) for b in services.artifacts.get_json(listed.manifest_key)]


def test_a_short_list_travels_inline_and_its_manifest_has_the_same_items(services: Services) -> None:
    refs = [f"work/job_1/x/{n}.json" for n in range(limits.INLINE_MAP_MAX_ITEMS)]
    listed = ItemList.model_validate(write_item_list(services.artifacts, "job_1", "split", "parts", refs))
    assert listed.count == len(refs) and listed.inline
    assert [(i.index, i.ref) for i in listed.items or []] == list(enumerate(refs))
    (batch,) = _manifest(services, listed)
    assert [i.ref for i in batch.items] == refs


def test_a_long_list_stays_in_its_manifest_in_batches_that_keep_every_item_once_in_order(services: Services) -> None:
    refs = [{"index": n, "name": f"doc-{n}.txt"} for n in range(2 * limits.MAP_BATCH_ITEMS + 7)]
    output = write_item_list(services.artifacts, "job_1", "list_documents", "documents", refs)
    listed = ItemList.model_validate(output)
    assert listed.count == len(refs) and listed.items is None and not listed.inline
    assert len(str(output)) < 200, "only the reference travels in the state"
    batches = _manifest(services, listed)
    assert [len(b.items) for b in batches] == [limits.MAP_BATCH_ITEMS, limits.MAP_BATCH_ITEMS, 7]
    flat = [i for b in batches for i in b.items]
    assert [i.index for i in flat] == list(range(len(refs))) and [i.ref for i in flat] == refs


def test_an_empty_list_has_no_batch(services: Services) -> None:
    listed = ItemList.model_validate(write_item_list(services.artifacts, "job_1", "plan_ocr", "ocr_batches", []))
    assert listed.count == 0 and listed.items == [] and _manifest(services, listed) == []


def test_item_counts_read_item_lists_and_plain_lists() -> None:
    assert item_count({"count": 3, "manifest_key": "k", "items": None}) == 3
    assert item_count(["a", "b"]) == 2
    assert item_count(None) is None and item_count({"key": "x"}) is None


def _running(store: JobStore, job_id: str = "job_1") -> str:
    store.create_job(new_job(job_id))
    store.transition(job_id, S.RUNNING, event="job_started")
    return job_id


def _tally(job_id: str, count: int) -> dict[str, Any]:
    return {"job_id": job_id, "step": "parse_documents", "workflow": "document-analysis", "count": count}


def test_the_tally_after_a_distributed_map_counts_committed_items(
    services: Services, store: JobStore, checkpoints: CheckpointStore
) -> None:
    job_id = _running(store)
    for item in (0, 1, 2):
        checkpoints.commit_step(job_id, "parse_documents", item, {"status": "succeeded", "output": {}})
    checkpoints.put_step(job_id, "parse_documents", 3, {"status": "failed"})
    assert tally(_tally(job_id, 4), services) == {"any_failed": True, "committed": 3, "count": 4}
    checkpoints.commit_step(job_id, "parse_documents", 3, {"status": "succeeded", "output": {}})
    assert tally(_tally(job_id, 4), services) == {"any_failed": False, "committed": 4, "count": 4}


def test_the_tally_stops_the_execution_of_a_job_that_no_longer_runs(services: Services, store: JobStore) -> None:
    job_id = _running(store)
    store.transition(job_id, S.CANCEL_REQUESTED, event="cancel_requested")
    with pytest.raises(CancelledError):
        tally(_tally(job_id, 4), services)


def test_an_items_progress_counts_each_item_once_and_a_replay_forgets_the_dropped_ones(
    store: JobStore, checkpoints: CheckpointStore
) -> None:
    # Given a fan-out of 9 documents whose items commit, item 1 twice (a duplicate delivery)
    job_id = _running(store)
    fan_out = {"step": "parse_documents", "total": 9, "unit": "document"}
    running = {"completed": 0, "total": 9, "unit": FAN_OUT_UNIT, "message": "parse_documents running"}
    store.write(
        read(store, job_id), [], fields={"current_step": "parse_documents", "fan_out": fan_out, "progress": running}
    )
    for item in (0, 1, 1, 2):
        store.write(read(store, job_id), [], add={done_attribute("parse_documents"): {item}})

    # Then the job shows each item once
    progress = read(store, job_id).view().progress
    assert (progress.completed, progress.total, progress.unit) == (3, 9, "documents")
    assert progress.message == "parse_documents: 3 of 9 documents"

    # and a replay that drops items 1 and 2 forgets them
    checkpoints.delete_steps(job_id, [("parse_documents", 1), ("parse_documents", 2)])
    assert read(store, job_id).items_done == {"parse_documents": 1}
