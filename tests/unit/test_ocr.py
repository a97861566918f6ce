"""OCR's domain side: batches of the pages needing it, what a page read gives, how OCR text joins the documents;
and the worker's heartbeat, which stops the work once its token is refused."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from longhaul.core.errors import CancelledError, InternalError
from longhaul.documents import ocr
from longhaul.documents.intake import StoredDocument
from longhaul.documents.parsing import ParsedDocument, ParsedPage, chunk_document
from workers.ocr.entrypoint import Heartbeat


def _doc(index: int, pages: list[str]) -> ParsedDocument:
    return ParsedDocument(
        index=index,
        name=f"d{index}.pdf",
        media_type="application/pdf",
        pages=[ParsedPage(number=n, text=t, needs_ocr=not t) for n, t in enumerate(pages, start=1)],
    )


def _stored(doc: ParsedDocument, key: str) -> StoredDocument:
    return StoredDocument(index=doc.index, name=doc.name, media_type=doc.media_type, key=key)


def test_batches_hold_only_pages_without_text_and_are_bounded() -> None:
    first, second = _doc(0, ["text", "", "", ""]), _doc(1, ["", "more"])
    batches = ocr.plan_batches([(first, _stored(first, "k0")), (second, _stored(second, "k1"))], batch_size=2)
    assert [[(d.index, d.pages) for d in b.documents] for b in batches] == [[(0, [2, 3])], [(0, [4]), (1, [1])]]
    assert [b.number for b in batches] == [0, 1] and all(b.page_count <= 2 for b in batches)
    assert ocr.plan_batches([(text := _doc(0, ["all text"]), _stored(text, "k"))]) == []


def test_a_page_is_read_with_its_mean_confidence_or_reported_unreadable() -> None:
    lines = [ocr.OcrLine(text="3. Security deposit", confidence=0.9), ocr.OcrLine(text="21,000 GBP", confidence=0.7)]
    read = ocr.page_result(0, 2, lines)
    assert read.status == "read" and read.text == "3. Security deposit\n21,000 GBP" and read.confidence == 0.8
    assert ocr.page_result(0, 3, []).status == "unreadable"
    noise = ocr.page_result(0, 4, [ocr.OcrLine(text="~#", confidence=0.2)])
    assert noise.status == "unreadable" and noise.reason and "confidence" in noise.reason


def test_ocr_text_joins_chunking_marked_as_ocr_and_unreadable_pages_stay_reported() -> None:
    doc = _doc(0, ["A text page.", "", "", ""])
    result = ocr.OcrBatchResult(
        batch=0,
        engine="fake",
        pages=[
            ocr.page_result(0, 2, [ocr.OcrLine(text="The deposit is returned within 45 days.", confidence=0.95)]),
            ocr.page_result(0, 3, []),
            ocr.page_result(1, 2, [ocr.OcrLine(text="another document", confidence=0.99)]),
        ],
    )
    merged = ocr.apply_ocr(doc, [result])
    # Each scanned page is in exactly one list: read, tried and unreadable, or not read at all (page 4: no batch)
    assert merged.pages_ocr == [2] and merged.pages_unreadable == [3] and merged.pages_needing_ocr == [4]
    chunks = chunk_document(merged)
    assert [(c.page, c.source, c.ocr_confidence) for c in chunks] == [(1, "text", None), (2, "ocr", 0.95)]
    assert chunks[1].text == "The deposit is returned within 45 days."


def test_reading_a_batch_checks_between_pages_and_stops_when_told() -> None:
    class Engine:
        name = "fake"

        def read_page(self, pdf: bytes, page_number: int) -> list[ocr.OcrLine]:
            return [ocr.OcrLine(text=f"page {page_number}", confidence=0.9)]

    batch = ocr.plan_batches([(scan := _doc(0, ["", "", ""]), _stored(scan, "k"))])[0]
    checks: list[int] = []

    def between_pages() -> None:
        checks.append(1)
        if len(checks) == 3:
            raise CancelledError("job cancelled")

    with pytest.raises(CancelledError):
        ocr.read_batch(batch, fetch=lambda pages: b"%PDF", engine=Engine(), between_pages=between_pages)
    assert len(checks) == 3  # two pages read, stopped before the third
    result = ocr.read_batch(batch, fetch=lambda pages: b"%PDF", engine=Engine(), between_pages=lambda: None)
    assert [p.text for p in result.pages] == ["page 1", "page 2", "page 3"]


def test_the_ocr_step_refuses_to_run_outside_the_worker() -> None:
    with pytest.raises(InternalError, match="container task"):
        ocr.current()


class _Client:
    def __init__(self, code: str | None) -> None:
        self.code, self.beats = code, 0

    def send_task_heartbeat(self, taskToken: str) -> dict[str, Any]:
        self.beats += 1
        if self.code:
            raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "SendTaskHeartbeat")
        return {}


def test_a_refused_heartbeat_stops_the_work_and_a_throttled_one_does_not() -> None:
    gone = Heartbeat(_Client("TaskTimedOut"), "token", interval=60)
    gone.beat()
    with pytest.raises(CancelledError, match="TaskTimedOut"):
        gone.check()
    throttled = Heartbeat(_Client("ThrottlingException"), "token", interval=60)
    throttled.beat()
    throttled.check()
    throttled.stopping.set()  # SIGTERM
    with pytest.raises(CancelledError, match="stopped"):
        throttled.check()
