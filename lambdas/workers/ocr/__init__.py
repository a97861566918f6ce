"""The OCR worker: reads batches of scanned PDF pages for the `ocr_pages` step of document analysis."""
