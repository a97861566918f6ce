"""The manual's Python examples (docs/examples/*.py, which pages include with `--8<--`) run to their end against a
local platform of their own, as a user runs them: `LONGHAUL_URL` and `LONGHAUL_API_KEY` set, the project's
interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.platform import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))


@pytest.fixture(scope="module")
def platform() -> Iterator[LocalPlatform]:
    running = LocalPlatform.current() or LocalPlatform.start(ROOT, time_scale=0.1)
    yield running
    running.stop()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_runs(example: Path, platform: LocalPlatform) -> None:
    assert platform.api_url
    environment = {
        **os.environ,
        "LONGHAUL_URL": platform.api_url,
        "LONGHAUL_API_KEY": platform.key_for("alpha"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "client" / "src"), str(ROOT / "lambdas")]),
    }
    ran = subprocess.run(
        [sys.executable, str(example)], env=environment, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, f"{example.name} exited {ran.returncode}:\n{ran.stdout}\n{ran.stderr}"
    assert ran.stdout.strip(), f"{example.name} printed nothing"
