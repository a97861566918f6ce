"""checkov on the synthesized template: no failed check, and every skipped one acknowledged with its reason.

The acknowledgments are in the template (`Metadata.checkov.skip`, written by `stacks/nag.py`), so each one sits on
the resource it excuses. checkov lives in its own virtualenv (`make infrastructure` makes `.venv-checkov` from
`requirements-checkov.txt`): it pins a boto3 the platform's pins cannot share.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure.conftest import ROOT

CHECKOV = Path(os.environ.get("LONGHAUL_CHECKOV", ROOT / ".venv-checkov" / "bin" / "checkov"))


def _scan(template: Path) -> dict[str, Any]:
    assert CHECKOV.exists(), f"{CHECKOV} is missing: `make infrastructure` installs it (requirements-checkov.txt)"
    completed = subprocess.run(
        [str(CHECKOV), "-f", str(template), "--framework", "cloudformation", "--quiet", "--compact", "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=template.parent,
    )
    assert completed.stdout, completed.stderr[-2000:]
    report = json.loads(completed.stdout)
    return dict(report[0] if isinstance(report, list) else report)


@pytest.mark.parametrize("which", ["assembly", "bedrock_assembly"])
def test_checkov_reports_no_failed_check_that_is_not_acknowledged_with_a_reason(
    which: str, request: pytest.FixtureRequest
) -> None:
    assembly: Path = request.getfixturevalue(which)
    report = _scan(next(assembly.glob("Longhaul-*.template.json")))
    results = report.get("results", {})
    failed = [(f["check_id"], f["resource"]) for f in results.get("failed_checks", [])]
    assert failed == [], f"checkov findings without an acknowledgment: {failed}"
    for skipped in results.get("skipped_checks", []):
        assert len(str(skipped.get("suppress_comment") or "").strip()) > 20, skipped["check_id"]
    assert report["summary"]["passed"] > 0
