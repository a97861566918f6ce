"""Prints OCR pages per second on this machine: the worker's engine (pypdfium2 + PP-OCRv5 ONNX) over the scanned
sample, cold (models loaded and optimized) and warm. Run: `.venv/bin/python bench/ocr.py [pdf] [rounds] [--markdown]`
(`--markdown`: the sentence the README quotes, with the machine it was measured on; `make figures` pastes it)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from machine import machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "lambdas"))

from workers.ocr.engine import PpOcrEngine  # noqa: E402 - after the path set-up

SAMPLE = ROOT / "samples" / "documents" / "lease_amendment_scanned.pdf"


def main() -> None:
    markdown = "--markdown" in sys.argv
    arguments = [a for a in sys.argv[1:] if a != "--markdown"]
    pdf_path = Path(arguments[0]) if arguments else SAMPLE
    rounds = int(arguments[1]) if len(arguments) > 1 else 3
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
    if markdown:
        print(
            f"`.venv/bin/python bench/ocr.py` prints pages per second (one thread, the scanned sample: "
            f"{read / warm:.2f} pages/s warm, {warm / read:.1f} s a page, after {cold:.1f} s for the first page, which "
            f"loads the models; measured on {machine()})."
        )
        return
    print(f"document: {pdf_path.name}, {pages} pages, {rounds} rounds, 1 thread")
    print(f"first page (loads and optimizes the models): {cold:.2f} s")
    print(f"warm: {read} pages in {warm:.2f} s = {read / warm:.2f} pages/s ({warm / read:.2f} s/page, {lines} lines)")


if __name__ == "__main__":
    main()
