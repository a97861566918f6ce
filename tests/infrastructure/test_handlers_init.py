"""Every function's init phase ends as `handlers/__init__.py` says: importing `handlers` pauses the cyclic garbage
collector for the init phase, and each handler module must end with `init_complete()`, which freezes what init made
and resumes the collector. A handler module that forgot it would run every request without a cyclic collector."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.infrastructure.conftest import ROOT, resources

_PROBE = """
import gc, importlib, sys
importlib.import_module(sys.argv[1])
print(gc.isenabled(), gc.get_freeze_count())
"""


def _handler_modules(template: dict[str, Any]) -> set[str]:
    handlers = {f["Properties"].get("Handler", "") for f in resources(template, "AWS::Lambda::Function").values()}
    return {h.rsplit(".", 1)[0] for h in handlers if h.startswith("handlers.")}


def test_every_functions_handler_module_resumes_the_collector_at_the_end_of_its_import(
    template: dict[str, Any],
) -> None:
    modules = _handler_modules(template)
    assert {"handlers.api", "handlers.steps", "handlers.authorizer"} <= modules
    for module in sorted(modules):
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE, module],
            cwd=ROOT / "lambdas",
            capture_output=True,
            text=True,
            check=True,
        )
        enabled, frozen = probe.stdout.split()
        assert enabled == "True", f"{module} leaves the garbage collector paused: end it with init_complete()"
        assert int(frozen) > 10_000, f"{module} did not freeze what its init made ({frozen} objects frozen)"


def test_the_collector_is_paused_only_until_the_handler_module_is_imported() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import gc, handlers; print(gc.isenabled())"],
        cwd=ROOT / "lambdas",
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "False"  # the package alone: init is under way
