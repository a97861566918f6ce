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
from workers.ocr.engine import decode_line
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


# ---------------------------------------------------------------------- reading digits in numbers


def _frames(reading: str, second: dict[int, tuple[str, float]] | None = None) -> tuple[Any, list[str]]:
    """Label probabilities of a line the recogniser reads as `reading`: one frame per character and a blank between,
    each character's frame sure of it unless `second` gives that position another label and its probability."""
    import numpy as np

    characters = ["blank", *sorted(set(reading) | set("0123456789oOlI"))]
    frames = np.zeros((2 * len(reading), len(characters)))
    for position, character in enumerate(reading):
        frame = 2 * position
        other, p = (second or {}).get(position, (None, 0.0))
        frames[frame, characters.index(character)] = 1 - p
        if other is not None:
            frames[frame, characters.index(other)] = p
        frames[frame + 1, 0] = 1.0
    return frames, characters


def test_a_letter_read_between_digits_is_the_digit_the_model_also_saw() -> None:
    # The sample's page 2: "21,oo0", where the model gave 0 a probability of 0.28 and 0.49 on the two o's
    frames, characters = _frames("of 21,oo0 GBP", {6: ("0", 0.28), 7: ("0", 0.49)})
    text, confidence = decode_line(frames, characters)
    assert text == "of 21,000 GBP"
    assert confidence == pytest.approx((11 * 1.0 + 0.28 + 0.49) / 13)  # what it reports, not what it first read


@pytest.mark.parametrize(
    ("reading", "second", "expected"),
    [
        ("2o25", {1: ("0", 0.2)}, "2025"),
        ("1l0 mm", {1: ("1", 0.3)}, "110 mm"),
        ("1,0oo.5", {3: ("0", 0.4), 4: ("0", 0.3)}, "1,000.5"),
        ("21,oo0", {3: ("0", 0.0), 4: ("0", 0.0)}, "21,oo0"),  # the model never saw a digit there: left as read
        ("No. 2", {1: ("0", 0.45)}, "No. 2"),  # a word
        ("Lo10", {1: ("0", 0.45)}, "Lo10"),  # glued to a letter: an identifier
        ("10l", {2: ("1", 0.45)}, "10l"),  # after the number: a unit
        ("O2 o 5", {0: ("0", 0.45), 3: ("0", 0.45)}, "O2 o 5"),  # no digit before it
    ],
)
def test_only_letters_inside_numbers_are_read_as_digits(
    reading: str, second: dict[int, tuple[str, float]], expected: str
) -> None:
    frames, characters = _frames(reading, second)
    assert decode_line(frames, characters)[0] == expected


def test_repeated_frames_and_blanks_decode_as_ctc() -> None:
    import numpy as np

    characters = ["blank", "a", "b"]
    frames = np.eye(3)[[1, 1, 0, 1, 2, 2, 0]]  # a a _ a b b _ -> "aab"
    assert decode_line(frames, characters) == ("aab", 1.0)
    assert decode_line(np.eye(3)[[0, 0]], characters) == ("", 0.0)
