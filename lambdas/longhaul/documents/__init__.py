"""The document library the workflows share: intake of a job's documents (inline, uploads, ZIP archives), reading
and parsing them (text, Markdown, PDF), planning OCR of scanned pages.

May import: storage, core."""
