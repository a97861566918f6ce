"""Docs that run: every command the README and every page of the manual show, executed in order against the
platform `make run` starts, with the outputs they show compared by shape (`tests/docs/runner.py` says how). Each
document runs in a shell session of its own, and on a platform of its own from where it says `make run`; one without
a shell or Python block has nothing to run. The manual's longer Python
examples are files (`docs/examples/`, run by `test_examples.py`), and its reference pages are generated at build
time (not files here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.runner import blocks, run_document

ROOT = Path(__file__).resolve().parents[2]
# Documents a user follows: the README, every page of the manual (docs/, at any depth), the samples' notes.
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "samples").rglob("*.md"))]


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
