"""OCR of scanned pages, the domain side: which pages need reading, in what batches, and how the text read there
joins the parsed documents (pure functions and models; the engine that reads pixels is the worker's, behind
`OcrEngine`).

A PDF page without a text layer is `needs_ocr` after parsing. `plan_batches` groups those pages into batches of at
most `MAX_BATCH_PAGES` (one container task each); the worker reads a batch into an `OcrBatchResult` at a
deterministic key; `apply_ocr` puts the text of the pages it read into the parsed documents, marked as OCR text with
their confidence. A page the engine could not read (blank, or below `MIN_PAGE_CONFIDENCE`) stays `needs_ocr` and is
listed as unreadable: reported, never silently dropped.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import Field

from longhaul.core.errors import InternalError
from longhaul.core.model import Model
from longhaul.documents.intake import StoredDocument
from longhaul.documents.members import ArchiveMember
from longhaul.documents.parsing import ParsedDocument, ParsedPage

# Pages per container task: a batch must end well inside the task's timeout at ~2-4 s a page on one vCPU.
MAX_BATCH_PAGES = 8
# A page whose lines average below this is not trusted as text (noise read as letters).
MIN_PAGE_CONFIDENCE = 0.5
STEP = "ocr_pages"


class OcrLine(Model):
    text: str
    confidence: float = Field(ge=0, le=1)


class OcrDocumentPages(Model):
    """The pages of one stored document a batch reads."""

    index: int
    name: str
    key: str  # the document's bytes in the artifact store (with `member`: the archive holding them)
    member: ArchiveMember | None = None
    pages: list[int]

    def source(self) -> StoredDocument:
        """The stored document to read (with `submission.read_document`)."""
        return StoredDocument(
            index=self.index, name=self.name, media_type="application/pdf", key=self.key, member=self.member
        )


class OcrBatch(Model):
    """One container task's work: at most `MAX_BATCH_PAGES` pages, maybe of several documents."""

    number: int
    documents: list[OcrDocumentPages]

    @property
    def page_count(self) -> int:
        return sum(len(d.pages) for d in self.documents)


class OcrPage(Model):
    document_index: int
    number: int
    status: Literal["read", "unreadable"]
    text: str = ""
    confidence: float = Field(default=0.0, ge=0, le=1)
    lines: list[OcrLine] = Field(default_factory=list)
    reason: str | None = None  # why a page is unreadable


class OcrBatchResult(Model):
    batch: int
    engine: str
    pages: list[OcrPage]


class OcrEngine(Protocol):
    """Reads the text lines of one page of a PDF (the worker's adapter; tests use a fake)."""

    name: str

    def read_page(self, pdf: bytes, page_number: int) -> list[OcrLine]: ...


@dataclass(frozen=True)
class OcrWorker:
    """What the worker's entrypoint gives the `ocr_pages` step: its engine, and a check that raises
    `CancelledError` when the worker must stop (its task token was refused, the task is being stopped)."""

    engine: OcrEngine
    check: Callable[[], None]


_worker: ContextVar[OcrWorker | None] = ContextVar("longhaul_ocr_worker", default=None)


@contextmanager
def running_in(worker: OcrWorker) -> Iterator[None]:
    token = _worker.set(worker)
    try:
        yield
    finally:
        _worker.reset(token)


def current() -> OcrWorker:
    worker = _worker.get()
    if worker is None:
        raise InternalError(f"{STEP} runs in the OCR worker's container task, not in a Lambda function")
    return worker


def plan_batches(
    documents: Iterable[tuple[ParsedDocument, StoredDocument]], batch_size: int = MAX_BATCH_PAGES
) -> list[OcrBatch]:
    """Batches of the pages needing OCR, in document then page order; `documents` pairs each with its stored
    document (where its bytes are)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    pending = [(doc, stored, page) for doc, stored in documents for page in doc.pages_needing_ocr]
    batches: list[OcrBatch] = []
    for start in range(0, len(pending), batch_size):
        by_document: dict[int, OcrDocumentPages] = {}
        for doc, stored, page in pending[start : start + batch_size]:
            entry = by_document.setdefault(
                doc.index,
                OcrDocumentPages(index=doc.index, name=doc.name, key=stored.key, member=stored.member, pages=[]),
            )
            entry.pages.append(page)
        batches.append(OcrBatch(number=len(batches), documents=list(by_document.values())))
    return batches


def page_result(document_index: int, number: int, lines: Sequence[OcrLine]) -> OcrPage:
    """What the engine read on a page: its lines joined by newlines, their mean confidence; unreadable if none."""
    kept = [line for line in lines if line.text.strip()]
    if not kept:
        return OcrPage(document_index=document_index, number=number, status="unreadable", reason="no text found")
    confidence = round(sum(line.confidence for line in kept) / len(kept), 4)
    if confidence < MIN_PAGE_CONFIDENCE:
        return OcrPage(
            document_index=document_index,
            number=number,
            status="unreadable",
            confidence=confidence,
            lines=kept,
            reason=f"confidence {confidence:.2f} below {MIN_PAGE_CONFIDENCE}",
        )
    text = "\n".join(line.text.strip() for line in kept)
    return OcrPage(
        document_index=document_index, number=number, status="read", text=text, confidence=confidence, lines=kept
    )


def read_batch(
    batch: OcrBatch,
    *,
    fetch: Callable[[OcrDocumentPages], bytes],
    engine: OcrEngine,
    between_pages: Callable[[], None],
) -> OcrBatchResult:
    """Read every page of the batch; `between_pages` runs before each page (it raises to stop: a cancelled job)."""
    pages: list[OcrPage] = []
    for document in batch.documents:
        pdf = fetch(document)
        for number in document.pages:
            between_pages()
            pages.append(page_result(document.index, number, engine.read_page(pdf, number)))
    between_pages()
    return OcrBatchResult(batch=batch.number, engine=engine.name, pages=pages)


def apply_ocr(document: ParsedDocument, results: Iterable[OcrBatchResult]) -> ParsedDocument:
    """The document with the text of its pages that OCR read (marked `ocr`, with confidence) and its unreadable
    pages listed; pages with a text layer are untouched."""
    read: dict[int, OcrPage] = {}
    unreadable: set[int] = set()
    for result in results:
        for found in result.pages:
            if found.document_index != document.index:
                continue
            if found.status == "read":
                read[found.number] = found
            else:
                unreadable.add(found.number)
    pages: list[ParsedPage] = []
    for page in document.pages:
        if page.needs_ocr and page.number in read:
            text = read[page.number]
            pages.append(ParsedPage(number=page.number, text=text.text, source="ocr", ocr_confidence=text.confidence))
        elif page.needs_ocr and page.number in unreadable:
            pages.append(page.model_copy(update={"ocr_unreadable": True}))
        else:
            pages.append(page)
    return document.model_copy(update={"pages": pages})
