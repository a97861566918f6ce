"""The eval gate catches a regression: with a broken invoice parser (it misses the last row of every table) the small
invoice set scores worse than the committed baseline, and `python -m evals` says which score and exits non-zero."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from evals import run as evals
from local.platform import LocalPlatform
from longhaul.workflows.invoice_reconciliation import offline


def test_a_broken_parser_fails_the_eval_gate_naming_the_scores_it_lowered(
    platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a parser that loses the last line item of every invoice it reads
    parse = offline.extract_invoice

    def broken(document: str, pages: Any) -> Any:
        invoice = parse(document, pages)
        return invoice.model_copy(update={"line_items": invoice.line_items[:-1]})

    monkeypatch.setattr(offline, "extract_invoice", broken)
    out = io.StringIO()

    # When the small invoice set runs through the gate
    code = evals.main(
        ["--small", "--workflow", "invoice-reconciliation", "--out", str(tmp_path / "scores.json")], out=out
    )

    # Then it fails, naming the workflow and the scores that dropped below the baseline's tolerance
    report = json.loads((tmp_path / "scores.json").read_text())
    lowered = {(r["workflow"], r["metric"]) for r in report["regressions"]}
    assert code == 1, out.getvalue()
    assert ("invoice-reconciliation", "discrepancy_recall") in lowered
    assert ("invoice-reconciliation", "success_rate") in lowered
    assert "REGRESSION invoice-reconciliation: discrepancy_recall" in out.getvalue()
