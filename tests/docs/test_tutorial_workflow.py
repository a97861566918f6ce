"""The tutorial's workflow of your own (docs/tutorial/your-own-workflow.md) is real code: its files are
`docs/examples/clause_summary/`, which the page includes. Here they go where the tutorial puts them, in a copy of the
checkout, and the page's own test runs there as the tutorial runs it (`pytest tests/workflows/test_clause_summary.py`):
the new folder is found, synthesized into its state machine, deployed and run on the local platform."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "clause_summary"
# What the copy needs: the CDK app, the domain package and handlers, the local runtime, the tests' fixtures.
COPIED = ("app.py", "cdk.json", "pyproject.toml", "stacks", "state_machines", "lambdas", "local", "tests", "samples")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules", "cdk.out", "recordings")


def test_the_tutorials_workflow_runs_its_own_test_in_a_copy_of_the_checkout(tmp_path: Path) -> None:
    for name in COPIED:
        source, target = ROOT / name, tmp_path / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=IGNORED)
        else:
            shutil.copy2(source, target)
    workflow = tmp_path / "lambdas" / "longhaul" / "workflows" / "clause_summary"
    workflow.mkdir()
    for module in EXAMPLE.glob("*.py"):
        if module.name.startswith("test_"):
            shutil.copy2(module, tmp_path / "tests" / "workflows" / module.name)
        else:
            shutil.copy2(module, workflow / module.name)

    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LONGHAUL_FAULTS")}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/workflows/test_clause_summary.py"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    assert "1 passed" in ran.stdout
