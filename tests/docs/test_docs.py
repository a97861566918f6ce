"""Docs that run: every command the README shows, executed in order against the platform `make run` starts, with
the outputs it shows compared by shape (`tests/docs/runner.py` says how). Other documents a user follows are run
the same way when they hold shell blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.runner import blocks, run_document

ROOT = Path(__file__).resolve().parents[2]
# Documents a user follows; a document without a runnable block has nothing to run.
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "samples").rglob("*.md"))]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_documents_commands_print_what_it_shows(document: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not any(block.runnable for block in blocks(document)):
        pytest.skip("no shell or Python block")
    report = run_document(document, ROOT)

    # What ran and what was skipped (and why) is part of the suite's output, passed or not; output capture would
    # swallow it on a pass.
    with capsys.disabled():
        print("\n" + report.summary())
    assert not report.failures, report.summary() + "\n\n" + "\n\n".join(report.failures)
