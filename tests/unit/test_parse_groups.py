"""The documents' parse in groups: a group's inline documents are read with one ranged GET and written as one object;
each item answers for its own document; a retried group writes the same object; the steps after it read a group's
object and pick their documents."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from longhaul.core.contracts import DocumentInput
from longhaul.core.errors import InvalidInputError
from longhaul.core.step_events import Item, StepEvent
from longhaul.documents.intake import ByteSpan, DocumentReader, Intake, StoredDocument, read_document
from longhaul.engine.context import ItemGroup, StepContext
from longhaul.engine.items import write_item_list
from longhaul.services import Services
from longhaul.storage.artifacts import ArtifactStore
from longhaul.workflows.document_analysis import steps
from longhaul.workflows.document_analysis.batches import IndexBatch
from tests.unit.step_support import JOB_ID, TENANT, WORKFLOW

TEXTS = [f"Clause {n}: the supplier's liability cap is {n + 1} million euros.\n" for n in range(6)]


class CountingStore(ArtifactStore):
    """The S3 adapter, counting its requests by kind."""

    def __init__(self, s3: Any, bucket: str) -> None:
        super().__init__(s3, bucket)
        self.requests: list[tuple[str, str]] = []

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        self.requests.append(("put", key))
        return super().put_bytes(key, data, content_type)

    def get_bytes(self, key: str) -> bytes:
        self.requests.append(("get", key))
        return super().get_bytes(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self.requests.append(("range", key))
        return super().get_range(key, start, end)


@pytest.fixture
def counting(s3: Any, bucket: str) -> CountingStore:
    return CountingStore(s3, bucket)


def _stored(store: ArtifactStore, texts: list[str]) -> list[dict[str, Any]]:
    """The documents as a submission stores them (inline texts in one object, each a span of it)."""
    intake = Intake(job_id=JOB_ID, tenant_id=TENANT, artifacts=store)
    documents = intake.documents(
        [DocumentInput(name=f"d{n}.txt", text=text) for n, text in enumerate(texts)], loc=["documents"]
    )
    store.put_bytes(intake.inline_key, bytes(intake._inline))
    return [d.model_dump(mode="json") for d in documents]


def _context(services: Services, store: ArtifactStore, refs: list[dict[str, Any]], item: int, **kw: Any) -> StepContext:
    listed = write_item_list(store, JOB_ID, "list_documents", "documents", refs, weights=[len(t) for t in TEXTS])
    event = StepEvent.model_validate(
        {
            "step": "parse_documents",
            "item": item,
            "ref": refs[item],
            "input": {
                "job_id": JOB_ID,
                "tenant_id": TENANT,
                "workflow": WORKFLOW,
                "input_key": f"work/{JOB_ID}/input.json",
                "steps": {"list_documents": {"documents": listed}},
            },
        }
    )
    return StepContext(event, dataclasses.replace(services, artifacts=store), **kw)


def test_a_group_is_read_with_one_ranged_get_and_written_as_one_object(
    services: Services, counting: CountingStore
) -> None:
    refs = _stored(counting, TEXTS)
    group = ItemGroup(items=[Item(index=i, ref=ref) for i, ref in enumerate(refs)])
    counting.requests.clear()

    outputs = [steps.parse_documents(_context(services, counting, refs, i, group=group)) for i in range(len(refs))]

    key = steps._group_key(JOB_ID, 0)
    parse = [r for r in counting.requests if "/list_documents/" not in r[1]]  # not the test's own item list
    assert parse == [("range", f"work/{JOB_ID}/source/inline"), ("put", key)]
    assert {o["parsed_key"] for o in outputs} == {key} and all(o["pages"] == 1 for o in outputs)
    written = steps.ParsedGroup.model_validate(counting.get_json(key))
    assert [d.index for d in written.documents] == list(range(len(TEXTS)))
    assert [d.pages[0].text.strip() for d in written.documents] == [t.strip() for t in TEXTS]


def test_a_document_that_cannot_be_parsed_fails_its_item_alone_and_is_absent_from_the_object(
    services: Services, counting: CountingStore
) -> None:
    refs = _stored(counting, TEXTS)
    refs[2] = {**refs[2], "media_type": "application/pdf"}  # text that is no PDF
    group = ItemGroup(items=[Item(index=i, ref=ref) for i, ref in enumerate(refs)])

    assert steps.parse_documents(_context(services, counting, refs, 0, group=group))["pages"] == 1
    with pytest.raises(InvalidInputError, match=r"d2\.txt"):
        steps.parse_documents(_context(services, counting, refs, 2, group=group))
    written = steps.ParsedGroup.model_validate(counting.get_json(steps._group_key(JOB_ID, 0)))
    assert [d.index for d in written.documents] == [0, 1, 3, 4, 5]


def test_a_retried_group_writes_the_same_object_and_an_item_run_alone_writes_its_groups(
    services: Services, counting: CountingStore
) -> None:
    refs = _stored(counting, TEXTS)
    items = [Item(index=i, ref=ref) for i, ref in enumerate(refs)]
    key = steps._group_key(JOB_ID, 0)
    steps.parse_documents(_context(services, counting, refs, 0, group=ItemGroup(items=items)))
    first = counting.get_bytes(key)

    # a retry whose first items committed: its first uncommitted item writes the whole group again
    steps.parse_documents(_context(services, counting, refs, 4, group=ItemGroup(items=items)))
    assert counting.get_bytes(key) == first
    # an item run outside a group (no group in its context) writes its group's object, never one of its own
    assert steps.parse_documents(_context(services, counting, refs, 3))["parsed_key"] == key
    assert counting.get_bytes(key) == first


def test_the_steps_after_the_parse_read_a_groups_object_once_for_its_documents(
    services: Services, counting: CountingStore
) -> None:
    refs = _stored(counting, TEXTS)
    group = ItemGroup(items=[Item(index=i, ref=ref) for i, ref in enumerate(refs)])
    ctx = _context(services, counting, refs, 0, group=group)
    steps.parse_documents(ctx)
    counting.requests.clear()

    documents = steps._batch_documents(ctx, IndexBatch(number=0, first=2, end=4))

    assert [d.index for d in documents] == [2, 3]
    assert [kind for kind, _ in counting.requests] == ["get"]  # the group's object (its list is in the state)


def test_prefetch_reads_consecutive_spans_once_and_leaves_far_apart_ones_alone(counting: CountingStore) -> None:
    documents = [StoredDocument.model_validate(ref) for ref in _stored(counting, TEXTS)]
    counting.requests.clear()
    reader = DocumentReader(counting)
    reader.prefetch(documents[1:4])
    assert [reader.read(d) for d in documents[1:4]] == [t.encode() for t in TEXTS[1:4]]
    assert [kind for kind, _ in counting.requests] == ["range"]

    far = documents[0].model_copy(update={"index": 9, "span": ByteSpan(offset=10_000_000, length=10)})
    apart = [documents[0], far]
    counting.requests.clear()
    DocumentReader(counting).prefetch(apart)
    assert counting.requests == []  # mostly bytes of no document: each is read when asked for
    assert read_document(counting, documents[0]) == TEXTS[0].encode()
