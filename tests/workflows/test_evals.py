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
from tests.workflows.conftest import TEST_ROUTES


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


def test_two_routes_compared_print_a_column_each_and_the_cheaper_model_costs_less(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    # Given the platform's routes and the offline model's loose sibling (an eval's own platform has it as `loose`)
    routes = {**TEST_ROUTES, **evals.EVAL_ROUTES}
    platform.set_function_environment(LONGHAUL_MODEL_ROUTES=json.dumps(routes))
    out = io.StringIO()
    try:
        # When the small invoice set runs on both routes
        code = evals.main(
            ["--small", "--workflow", "invoice-reconciliation", "--compare", "default,loose", "--out",
             str(tmp_path / "compare.json")],
            out=out,
        )  # fmt: skip
    finally:
        platform.set_function_environment(LONGHAUL_MODEL_ROUTES=json.dumps(TEST_ROUTES))

    # Then the table has a column per route and every figure, and the JSON the same figures per route
    printed = out.getvalue()
    assert code == 0, printed
    assert "routes compared" in printed and "first-try schema adherence" in printed
    assert "output variance under retry" in printed
    report = json.loads((tmp_path / "compare.json").read_text())
    default, loose = (report["routes"][r]["summary"] for r in ("default", "loose"))
    assert default["success_rate"] == loose["success_rate"] == 1.0  # the same answers, less tidily written
    assert default["first_try_schema_adherence"] == 1.0 and default["repair_rate"] == 0.0
    assert loose["usd_per_completed_job"] < default["usd_per_completed_job"]  # priced as a smaller model
    assert {r["model_id"] for r in _calls(platform, report["routes"]["loose"]["runs"])} == {"longhaul-offline-loose-1"}


def _calls(platform: LocalPlatform, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model calls of the runs' jobs, as an operator reads them."""
    import requests

    found: list[dict[str, Any]] = []
    for run in runs:
        url = f"{platform.api_url}/v1/ops/jobs/{run['job_id']}/calls"
        found += requests.get(url, headers=platform.auth_header("ops"), timeout=30).json()["calls"]
    return found
