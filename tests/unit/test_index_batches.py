"""Batches of documents for chunking and indexing: consecutive, bounded in documents and characters, each with the
OCR batches that read its pages; a chunk's batch follows from its id."""

from __future__ import annotations

import pytest

from longhaul.documents.ocr import OcrBatch, OcrDocumentPages
from longhaul.documents.parsing import ParsedDocument, ParsedPage
from longhaul.workflows.document_analysis.batches import (
    IndexBatch,
    batch_of,
    chunk_document_index,
    document_chars,
    plan,
)


def _document(index: int, chars: int = 100, scanned: int = 0) -> ParsedDocument:
    pages = [ParsedPage(number=1, text="x" * chars)]
    pages += [ParsedPage(number=2 + n, text="", needs_ocr=True) for n in range(scanned)]
    return ParsedDocument(index=index, name=f"doc-{index}.pdf", media_type="application/pdf", pages=pages)


def test_documents_are_batched_in_order_up_to_the_document_bound() -> None:
    batches = plan([_document(i) for i in range(7)], max_documents=3)

    assert [(b.number, b.first, b.end) for b in batches] == [(0, 0, 3), (1, 3, 6), (2, 6, 7)]


def test_a_batch_closes_before_the_character_bound_and_a_heavier_document_is_a_batch_of_its_own() -> None:
    documents = [_document(0, 400), _document(1, 400), _document(2, 5000), _document(3, 100)]

    batches = plan(documents, max_documents=10, max_chars=1000)

    assert [(b.first, b.end) for b in batches] == [(0, 2), (2, 3), (3, 4)]


def test_pages_left_to_ocr_weigh_a_page_each_and_name_the_ocr_batches_reading_them() -> None:
    documents = [_document(0, 10), _document(1, 10, scanned=2), _document(2, 10, scanned=1)]
    ocr = [
        OcrBatch(number=0, documents=[OcrDocumentPages(index=1, name="doc-1.pdf", key="k", pages=[2, 3])]),
        OcrBatch(number=1, documents=[OcrDocumentPages(index=2, name="doc-2.pdf", key="k", pages=[2])]),
    ]

    (only,) = plan(documents, ocr)
    first, second = plan(documents, ocr, max_documents=2)

    assert document_chars(documents[1]) > document_chars(documents[0])
    assert only.ocr_batches == [0, 1]
    assert (first.ocr_batches, second.ocr_batches) == ([0], [1])


def test_no_documents_no_batches_and_bounds_below_one_are_refused() -> None:
    assert plan([]) == []
    with pytest.raises(ValueError):
        plan([_document(0)], max_documents=0)


@pytest.mark.parametrize(
    ("chunk_id", "document", "batch"),
    [("d0-p1-c1", 0, 0), ("d4-p2-c3", 4, 1), ("d9-p1-c1", 9, 2), ("d10-p1-c1", 10, None), ("passage-7", None, None)],
)
def test_a_chunks_batch_follows_from_its_id(chunk_id: str, document: int | None, batch: int | None) -> None:
    batches = [
        IndexBatch(number=0, first=0, end=3),
        IndexBatch(number=1, first=3, end=9),
        IndexBatch(number=2, first=9, end=10),
    ]

    found = chunk_document_index(chunk_id)
    held = batch_of(batches, found) if found is not None else None

    assert found == document
    assert (held.number if held else None) == batch
