"""A handler's cold start imports only what every invocation needs: heavy step libraries load where they are used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
# `handlers.resolver` is the API's thread-safe resolver class, imported by `handlers.api`: not a handler of its own.
HANDLER_MODULES = sorted(
    f"handlers.{p.stem}" for p in (LAMBDAS / "handlers").glob("*.py") if p.stem not in ("__init__", "resolver")
)
# Libraries only some steps use (BM25 retrieval, PDF parsing, output repair), and the X-Ray SDK nothing uses.
HEAVY = ("numpy", "bm25s", "pypdf", "json_repair", "aws_xray_sdk")


def modules_loaded_by_importing(module: str) -> set[str]:
    """Top-level packages in `sys.modules` after importing `module` in a fresh interpreter."""
    probe = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted({name.partition('.')[0] for name in sys.modules})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS, capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout))


def test_every_handler_module_is_checked():
    assert {"handlers.api", "handlers.steps", "handlers.ops"} <= set(HANDLER_MODULES)


@pytest.mark.parametrize("module", HANDLER_MODULES)
def test_importing_a_handler_loads_no_heavy_library(module: str):
    loaded = modules_loaded_by_importing(module)
    assert "longhaul" in loaded  # the probe imported the handler for real
    assert loaded.isdisjoint(HEAVY), f"{module} imports {sorted(loaded & set(HEAVY))} at cold start"
