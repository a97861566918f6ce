"""Grouped fan-outs: a list's items in groups of consecutive items (bounded in count and weight), one invocation per
group that runs each item as its own item, and a failed group's items told apart by the failure recorder."""

from __future__ import annotations

from typing import Any

import pytest

from longhaul.core.errors import ITEMS_FAILED, CancelledError, InvalidInputError, TransientError
from longhaul.core.records import Job
from longhaul.engine.context import StepContext
from longhaul.engine.failures import record_failure
from longhaul.engine.items import ItemBatch, ItemList, groups_of, write_item_list
from longhaul.engine.runner import GROUP_COMMIT_ITEMS, run_group
from longhaul.engine.spec import fan_out, step
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore
from longhaul.workflows import WorkflowSpec
from tests.unit.step_support import JOB_ID, WORKFLOW, spec_of, step_event
from tests.unit.step_support import job as job  # the fixture

LIMITS = {"task_timeout_seconds": 375, "function_timeout_seconds": 300, "timeout_attempts": 2}


def test_groups_are_consecutive_and_bounded_in_count_and_weight() -> None:
    assert groups_of([1] * 7, max_items=3, max_weight=100) == [range(0, 3), range(3, 6), range(6, 7)]
    assert groups_of([4, 4, 4, 1], max_items=10, max_weight=8) == [range(0, 2), range(2, 4)]
    assert groups_of([], max_items=3, max_weight=10) == []


def test_an_item_of_unknown_or_excessive_weight_runs_alone() -> None:
    weights = [1, 1, None, 1, 50, 1]
    assert groups_of(weights, max_items=10, max_weight=10) == [
        range(0, 2),
        range(2, 3),
        range(3, 4),
        range(4, 5),
        range(5, 6),
    ]
    with pytest.raises(ValueError):
        groups_of([1], max_items=0, max_weight=1)


def test_a_grouped_list_carries_its_groups_inline_and_as_its_manifest(services: Services) -> None:
    refs = [f"doc-{n}" for n in range(5)]
    output = write_item_list(services.artifacts, "job_1", "list", "docs", refs, weights=[10, 10, None, 10, 10])
    listed = ItemList.model_validate(output)
    assert listed.count == 5 and listed.group_count == 3
    assert [[i.index for i in g.items] for g in listed.groups or []] == [[0, 1], [2], [3, 4]]
    assert [i.ref for i in listed.items or []] == refs  # the items as any list has them
    manifest = [ItemBatch.model_validate(b) for b in services.artifacts.get_json(listed.manifest_key)]
    assert manifest == listed.groups


def test_a_long_grouped_list_keeps_its_groups_in_its_manifest_only(services: Services) -> None:
    refs = list(range(120))
    output = write_item_list(services.artifacts, "job_1", "list", "docs", refs, weights=[1] * 120)
    listed = ItemList.model_validate(output)
    assert listed.items is None and listed.groups is None and listed.group_count == 3
    assert len(str(output)) < 200, "only the reference travels in the state"
    manifest = [ItemBatch.model_validate(b) for b in services.artifacts.get_json(listed.manifest_key)]
    assert [len(g.items) for g in manifest] == [50, 50, 20]
    with pytest.raises(ValueError):
        write_item_list(services.artifacts, "job_1", "list", "docs", refs, weights=[1])


def test_an_ungrouped_list_is_as_it_was(services: Services) -> None:
    output = write_item_list(services.artifacts, "job_1", "list", "docs", ["a"])
    assert set(output) == {"count", "manifest_key", "items"}


def test_only_a_fan_out_without_a_model_runs_in_groups() -> None:
    with pytest.raises(ValueError, match="groups"):
        step("a", grouped=True)
    with pytest.raises(ValueError, match="groups"):
        fan_out("a", over="l.items", grouped=True, calls_model=True)


# ---------------------------------------------------------------------- a group's invocation

SPEC: WorkflowSpec = spec_of("l")
SPEC = WorkflowSpec(
    name=SPEC.name,
    description=SPEC.description,
    input_model=SPEC.input_model,
    result_model=SPEC.result_model,
    steps=(step("l"), fan_out("p", over="l.items", grouped=True, item_unit="document"), step("z")),
    domain=SPEC.domain,
)


def group_event(indices: list[int], attempt: int = 0) -> dict[str, Any]:
    event = step_event("p", attempt=attempt, steps={"l": {"items": {"count": 4, "manifest_key": "k"}}})
    return {**event, "items": [{"index": i, "ref": f"doc-{i}"} for i in indices]}


class ItemWork:
    """Fails each item with the failures it is given for it, one per run, then succeeds; records what it ran."""

    def __init__(self, failures: dict[int, list[Exception]]) -> None:
        self.failures = failures
        self.ran: list[int] = []

    def __call__(self, ctx: StepContext) -> dict[str, Any]:
        item = ctx.event.item
        assert item is not None and ctx.event.ref == f"doc-{item}"
        self.ran.append(item)
        pending = self.failures.get(item)
        if pending:
            raise pending.pop(0)
        return {"parsed_key": f"work/{item}.json"}


def committed(checkpoints: CheckpointStore) -> list[int]:
    return sorted(r.item for r in checkpoints.steps(JOB_ID) if r.step == "p" and r.item is not None and r.succeeded)


def test_a_group_runs_every_item_and_fails_with_a_retryable_failure_first(
    services: Services, checkpoints: CheckpointStore, job: Job
) -> None:
    work = ItemWork({1: [InvalidInputError("not a document")] * 2, 2: [TransientError("blip")]})

    with pytest.raises(TransientError):  # the state machine retries the group
        run_group(group_event([0, 1, 2, 3]), services, work=work, spec=SPEC)
    assert work.ran == [0, 1, 2, 3] and committed(checkpoints) == [0, 3]

    work.ran.clear()
    with pytest.raises(InvalidInputError):  # the retry runs only what did not commit; item 1 fails for good
        run_group(group_event([0, 1, 2, 3], attempt=1), services, work=work, spec=SPEC)
    assert work.ran == [1, 2] and committed(checkpoints) == [0, 2, 3]
    record = checkpoints.get_step(JOB_ID, "p", 1)
    assert record is not None and record.status == "failed"


def test_a_group_whose_items_all_commit_answers_how_many(
    services: Services, checkpoints: CheckpointStore, job: Job
) -> None:
    work = ItemWork({})
    assert run_group(group_event([2, 3]), services, work=work, spec=SPEC) == {"committed": 2}
    assert run_group(group_event([2, 3], attempt=1), services, work=work, spec=SPEC) == {"committed": 2}
    assert work.ran == [2, 3], "a redelivered group runs nothing again"
    assert committed(checkpoints) == [2, 3]


def test_a_stopped_job_stops_its_group_at_once(services: Services, store: JobStore, job: Job) -> None:
    work = ItemWork({0: [CancelledError("the job stopped")]})
    with pytest.raises(CancelledError):
        run_group(group_event([0, 1]), services, work=work, spec=SPEC)
    assert work.ran == [0]


def test_a_failed_group_records_each_item_that_did_not_commit_and_returns_their_dead_letters(
    services: Services, checkpoints: CheckpointStore, store: JobStore, job: Job
) -> None:
    # Given a group whose item 0 committed, item 1 failed for good, and whose invocation then timed out in item 2
    # (here: the part of the group it got through; items 2 and 3 never returned)
    with pytest.raises(InvalidInputError):
        run_group(group_event([0, 1]), services, work=ItemWork({1: [InvalidInputError("not a document")]}), spec=SPEC)
    failure = {"job_id": JOB_ID, "step": "p", "workflow": WORKFLOW, "error": "States.Timeout", "limits": LIMITS}
    items = [{"index": i, "ref": f"doc-{i}"} for i in range(4)]

    answer = record_failure({**failure, "items": items}, services)

    letters = answer["dead_letters"]
    assert [(d["item"], d["error"], d["kind"]) for d in letters] == [
        (1, "InvalidInputError", "invalid-input"),
        (2, "States.Timeout", "timeout"),
        (3, "States.Timeout", "timeout"),
    ]
    assert letters[1]["message"] == "timed out after 375 s on each of 2 attempts"
    assert letters[0]["item_name"] is None  # a plain reference names no document
    for item in (1, 2, 3):
        record = checkpoints.get_step(JOB_ID, "p", item)
        assert record is not None and record.status == "failed"
    failed_events = [e for e in store.list_events(JOB_ID, limit=200)[0] if e.type == "item_failed"]
    assert sorted(e.item for e in failed_events) == [1, 2, 3]
    assert store.get_job(JOB_ID).status != "failed", "an item's failure leaves the job to the fan-out's summary"

    summary = record_failure({**failure, "error": ITEMS_FAILED, "count": 4, "limits": None}, services)
    assert summary["message"].startswith("3 of 4 items failed (items [1, 2, 3]); first: not a document")
    failed = store.get_job(JOB_ID)
    assert failed is not None and failed.error is not None and failed.error.items == [1, 2, 3]


def test_a_group_is_billed_as_one_invocation_whatever_its_items(
    services: Services, store: JobStore, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1769")  # as in a Lambda sandbox
    run_group(group_event([0, 1, 2]), services, work=ItemWork({}), spec=SPEC)
    metered = store.get_job(JOB_ID).metered
    assert metered.lambda_invocations == 1 and metered.lambda_mb_ms >= 3 * 1769  # each item's time, rounded up


def test_a_group_reads_its_records_once_and_marks_only_its_first_item_running(
    services: Services, checkpoints: CheckpointStore, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[list[int | None]] = []
    read_items = checkpoints.read_items

    def counted(job_id: str, step: str, items: list[int | None]) -> Any:
        reads.append(list(items))
        return read_items(job_id, step, items)

    monkeypatch.setattr(checkpoints, "read_items", counted)
    monkeypatch.setattr(checkpoints, "read", lambda *_: pytest.fail("an item of a group read its record alone"))
    marked: list[int | None] = []
    running_write = checkpoints.running_write
    monkeypatch.setattr(
        checkpoints, "running_write", lambda j, s, item, f: marked.append(item) or running_write(j, s, item, f)
    )
    # the job runs (its first step marked it so): a fan-out's items then start with their commit
    run_group(group_event([0]), services, work=ItemWork({}), spec=SPEC)
    reads.clear(), marked.clear()

    with pytest.raises(InvalidInputError):
        run_group(group_event([1, 2, 3]), services, work=ItemWork({3: [InvalidInputError("bad")]}), spec=SPEC)
    assert reads == [[1, 2, 3]] and marked == [1]
    for item in (1, 2):  # each attempt counted all the same, and the start of each recorded
        record = checkpoints.get_step(JOB_ID, "p", item)
        assert record is not None and record.succeeded and record.attempts == 1 and record.started_at is not None
    failed = checkpoints.get_step(JOB_ID, "p", 3)
    assert failed is not None and (failed.status, failed.attempts) == ("failed", 1)


def _transactions(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of items' records each of the job's writes carries, as they happen."""
    written: list[int] = []
    write = store.write

    def counted(current: Job, events: Any, **kw: Any) -> Job:
        written.append(len(kw.get("items") or ()))
        return write(current, events, **kw)

    monkeypatch.setattr(store, "write", counted)
    return written


def test_the_items_after_a_groups_first_commit_together_a_bounded_number_per_transaction(
    services: Services, checkpoints: CheckpointStore, store: JobStore, job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_group(group_event([0]), services, work=ItemWork({}), spec=SPEC)  # the job runs
    written = _transactions(store, monkeypatch)

    assert run_group(group_event(list(range(1, 42))), services, work=ItemWork({}), spec=SPEC) == {"committed": 41}

    # the first item starts and commits alone (it marks the fan-out running); the 40 others in two transactions
    assert written == [1, 1, GROUP_COMMIT_ITEMS, 40 - GROUP_COMMIT_ITEMS]
    assert committed(checkpoints) == list(range(42))
    for kind in ("step_started", "step_finished"):
        assert sorted(e.item for e in store.list_events(JOB_ID, limit=500)[0] if e.type == kind) == list(range(42))
    record = checkpoints.get_step(JOB_ID, "p", 7)
    assert record is not None and record.attempts == 1 and record.started_at is not None


def test_an_item_a_concurrent_delivery_committed_meanwhile_is_left_out_of_the_groups_commit(
    services: Services, checkpoints: CheckpointStore, store: JobStore, job: Job
) -> None:
    run_group(group_event([0]), services, work=ItemWork({}), spec=SPEC)  # the job runs
    inner = ItemWork({})

    class Redelivering(ItemWork):
        def __call__(self, ctx: StepContext) -> dict[str, Any]:
            if ctx.event.item == 3:  # item 2 is pending in this group: another delivery commits it now
                run_group(group_event([2]), services, work=inner, spec=SPEC)
            return super().__call__(ctx)

    run_group(group_event([1, 2, 3]), services, work=Redelivering({}), spec=SPEC)

    assert committed(checkpoints) == [0, 1, 2, 3] and inner.ran == [2]
    finished = [e.item for e in store.list_events(JOB_ID, limit=200)[0] if e.type == "step_finished"]
    assert sorted(finished) == [0, 1, 2, 3], "each item committed once"
