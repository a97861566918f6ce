"""Prints OCR pages per second on this machine: the worker's engine (pypdfium2 + PP-OCRv5 ONNX) over the scanned
sample, cold (models loaded and optimized) and warm. Run: `python bench/ocr.py [pdf] [rounds]`."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lambdas"))

from workers.ocr.engine import PpOcrEngine  # noqa: E402 - after the path set-up

SAMPLE = ROOT / "samples" / "documents" / "lease_amendment_scanned.pdf"


def main() -> None:
    pdf_path = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    pdf = pdf_path.read_bytes()
    import pypdfium2 as pdfium

    pages = len(pdfium.PdfDocument(pdf))
    with tempfile.TemporaryDirectory() as cache:
        engine = PpOcrEngine(cache_dir=cache, threads=1)
        start = time.perf_counter()
        engine.read_page(pdf, 1)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        lines = 0
        for _ in range(rounds):
            for number in range(1, pages + 1):
                lines += len(engine.read_page(pdf, number))
        warm = time.perf_counter() - start
    read = rounds * pages
    print(f"document: {pdf_path.name}, {pages} pages, {rounds} rounds, 1 thread")
    print(f"first page (loads and optimizes the models): {cold:.2f} s")
    print(f"warm: {read} pages in {warm:.2f} s = {read / warm:.2f} pages/s ({warm / read:.2f} s/page, {lines} lines)")


if __name__ == "__main__":
    main()
