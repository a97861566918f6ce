"""Batches of documents for chunking and indexing: what each item of the `build_index` fan-out reads.

A batch is a run of consecutive documents (by index), so the chunks of all batches in batch order are the chunks of
all documents in document order, and the batch holding a chunk follows from its id (`d<document>-p<page>-c<n>`).
A batch closes at `limits.INDEX_BATCH_MAX_DOCUMENTS` documents or `limits.INDEX_BATCH_MAX_CHARS` characters, so one
item's time and memory stay bounded whatever the job's size; an item carries only this descriptor, never text.
"""

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence

from pydantic import Field

from longhaul.core import limits
from longhaul.core.model import Model
from longhaul.documents.ocr import OcrBatch
from longhaul.documents.parsing import ParsedDocument

_CHUNK_DOCUMENT = re.compile(r"d(\d+)-")


class IndexBatch(Model):
    """Documents `first` to `end - 1`, and the OCR batches that read pages of them (whose results it applies)."""

    number: int = Field(ge=0)
    first: int = Field(ge=0)
    end: int = Field(ge=1)
    ocr_batches: list[int] = Field(default_factory=list)


def document_chars(document: ParsedDocument) -> int:
    """A document's weight in a batch: its text, and a page's worth for each page OCR is still to read."""
    text = sum(len(page.text) for page in document.pages)
    return text + len(document.pages_needing_ocr) * limits.INDEX_BATCH_OCR_PAGE_CHARS


def plan(
    documents: Sequence[ParsedDocument],
    ocr_batches: Iterable[OcrBatch] = (),
    *,
    max_documents: int = limits.INDEX_BATCH_MAX_DOCUMENTS,
    max_chars: int = limits.INDEX_BATCH_MAX_CHARS,
) -> list[IndexBatch]:
    """Consecutive batches of `documents` (in index order), each at most `max_documents` long and `max_chars` heavy
    (a heavier document alone); none when there are no documents."""
    if max_documents < 1 or max_chars < 1:
        raise ValueError("a batch holds at least one document")
    read_by: dict[int, set[int]] = {}
    for batch in ocr_batches:
        for pages in batch.documents:
            read_by.setdefault(pages.index, set()).add(batch.number)
    ranges: list[tuple[int, int]] = []
    first, chars = 0, 0
    for position, document in enumerate(documents):
        weight = document_chars(document)
        if position > first and (position - first >= max_documents or chars + weight > max_chars):
            ranges.append((first, position))
            first, chars = position, 0
        chars += weight
    if documents:
        ranges.append((first, len(documents)))
    return [
        IndexBatch(
            number=number,
            first=documents[start].index,
            end=documents[end - 1].index + 1,
            ocr_batches=sorted({n for d in documents[start:end] for n in read_by.get(d.index, ())}),
        )
        for number, (start, end) in enumerate(ranges)
    ]


def chunk_document_index(chunk_id: str) -> int | None:
    """The index of the document a chunk id names, or None for an id no chunk has."""
    found = _CHUNK_DOCUMENT.match(chunk_id)
    return int(found.group(1)) if found else None


def batch_of(batches: Sequence[IndexBatch], document: int) -> IndexBatch | None:
    """The batch holding a document (`batches` in order), or None."""
    position = bisect_right([b.first for b in batches], document) - 1
    if position < 0 or document >= batches[position].end:
        return None
    return batches[position]
