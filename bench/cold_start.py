"""Benchmark: cold-import time of every Lambda handler module, against a bare `import boto3` handler in the same run.

    make bench            # or: .venv/bin/python bench/cold_start.py --runs 9

A cold start's init phase imports the handler's module; that is what is timed here (CPU milliseconds), in fresh
interpreter processes (median of `--runs`, after one warm-up of the file cache), in three layouts:
- source tree: `lambdas/` without bytecode for its own modules, dependencies from the virtualenv (compiled);
- bundle: the asset as `cdk deploy` builds it (same bundling code: wheels, source, unchecked hash-based pycs),
  with `-S` so nothing of the virtualenv is visible and boto3 from a separate folder, as the Lambda runtime
  provides it;
- bundle without bytecode: the same asset with every `__pycache__` removed (what a read-only code directory
  without pycs costs: each cold start compiles every module it imports).
The bundle is built for this machine's Python and architecture (the deployed one targets the Lambda runtime, which
may not run here); writing bytecode is disabled everywhere, as on Lambda's read-only code directory.
With valgrind installed, the bundle's imports are also counted in instructions (one run each, the interpreter's own
start-up subtracted): a figure a loaded or throttled machine does not move, for comparing two versions of the code.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stacks.bundling import CONSTRAINTS, LAMBDAS_DIR, TARGET, Platform, build_bundle  # noqa: E402

# The function → handler module of every Lambda of the stack (stacks/api.py, workflows.py, operations.py).
HANDLERS = {"api": "handlers.api", "steps": "handlers.steps", "sweep": "handlers.ops"}
BARE = "bare_handler"
# Targets (benchmark, not a test): the cold-start issue's API ≤ 250 ms and steps ≤ 2.5× boto3, and the lean-paths
# issue's API ≤ 2.0× (the row `bench/table.py` prints).
TARGETS = {"api": (250.0, 2.0), "steps": (None, 2.5)}
# CPU time of the import, not wall time: on a shared machine the wall clock also counts waiting for a core, while
# an import from the page cache is all CPU (on an idle machine the two agree).
_TIMER = (
    "import importlib, sys, time\n"
    "start = time.process_time()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print((time.process_time() - start) * 1000)\n"
)


# The API's import, then its composition root built as its first request builds it (every adapter and store; no
# call is made, so no AWS is needed): what a cold start pays before the request's own calls.
_FIRST_REQUEST = (
    "import os\n"
    "os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',"
    " LONGHAUL_TABLE='t', LONGHAUL_BUCKET='b', LONGHAUL_CONTAINER_CLUSTER='c', LONGHAUL_EMAIL_SENDER='a@example.com',"
    " LONGHAUL_ADMISSION_DISPATCHER='d')\n"
    "import handlers.api\n"
    "from longhaul.services import services\n"
    "services()\n"
)


class Layout:
    """Where a handler's modules come from: the interpreter flags and the import path."""

    def __init__(self, name: str, path: list[Path], *, isolated: bool) -> None:
        self.name = name
        self.path = path
        self.isolated = isolated  # -S: no site-packages, as in the Lambda runtime

    def _run(self, wrapper: list[str], code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """`code` in a fresh interpreter with this layout's import path (and flags), under `wrapper`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env |= {"PYTHONPATH": os.pathsep.join(map(str, self.path)), "PYTHONDONTWRITEBYTECODE": "1"}
        flags = ["-S"] if self.isolated else []
        command = [*wrapper, sys.executable, *flags, "-c", code, *args]
        return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)

    def time_import(self, module: str, cwd: Path) -> float:
        result = self._run([], _TIMER, module, cwd=cwd)
        if result.returncode != 0:
            raise RuntimeError(f"importing {module} from {self.name} failed:\n{result.stderr}")
        return float(result.stdout.strip().splitlines()[-1])

    def instructions(self, statement: str, cwd: Path) -> int:
        """Instructions a fresh interpreter executes running `statement` (valgrind's callgrind, which needs none of
        the machine's quiet: the count is the same on a loaded machine)."""
        result = self._run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"], statement, cwd=cwd)
        found = re.search(r"Collected : (\d+)", result.stderr)
        if result.returncode != 0 or found is None:
            raise RuntimeError(f"counting {statement!r} in {self.name} failed:\n{result.stderr[-2000:]}")
        return int(found.group(1))


def _prepare(work: Path) -> tuple[Layout, Layout, Layout, Layout, Layout]:
    bare = work / "bare"
    bare.mkdir()
    (bare / f"{BARE}.py").write_text("import boto3\n\n\ndef handler(event, context):\n    return {}\n")
    source = work / "source"
    shutil.copytree(LAMBDAS_DIR, source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    print("building the bundle for this machine (pip + bytecode) ...", file=sys.stderr)
    bundle = work / "bundle"
    build_bundle(bundle, Platform.this_machine())
    uncompiled = work / "bundle-without-bytecode"
    shutil.copytree(bundle, uncompiled, ignore=shutil.ignore_patterns("__pycache__"))
    # The Lambda runtime ships boto3 (compiled) outside the function's code: install it the same way, pinned.
    runtime = work / "runtime"
    boto3_pin = next(line for line in CONSTRAINTS.read_text().splitlines() if line.startswith("boto3=="))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--target", str(runtime), boto3_pin, "-c", str(CONSTRAINTS)], check=True)
    return (
        Layout("bare boto3 (virtualenv)", [bare], isolated=False),
        Layout("source tree", [source], isolated=False),
        Layout("bare boto3 (runtime)", [bare, runtime], isolated=True),
        Layout("bundle", [bundle, runtime], isolated=True),
        Layout("bundle without bytecode", [uncompiled, runtime], isolated=True),
    )


def _median(layout: Layout, module: str, runs: int, cwd: Path) -> float:
    layout.time_import(module, cwd)  # warm the file cache
    return statistics.median(layout.time_import(module, cwd) for _ in range(runs))


def measure(runs: int, handlers: dict[str, str] | None = None) -> dict[str, Any]:
    """The medians (ms) of the bare handler (`bare_venv`, `bare_runtime`) and, per function, of its handler module
    from the source tree, the bundle and the bundle without bytecode (`rows`: function, module, three medians)."""
    with tempfile.TemporaryDirectory(prefix="longhaul-cold-start-") as tmp:
        work = Path(tmp)
        venv_bare, source, runtime_bare, bundle, uncompiled = _prepare(work)
        cwd = work / "empty"
        cwd.mkdir()
        baseline_venv = _median(venv_bare, BARE, runs, cwd)
        baseline_runtime = _median(runtime_bare, BARE, runs, cwd)
        instructions = None
        if shutil.which("valgrind"):  # the bundle's figures again, counted: what a busy machine cannot blur
            start = bundle.instructions("pass", cwd)  # the interpreter's own start and exit, in both
            instructions = {"bare": runtime_bare.instructions(f"import {BARE}", cwd) - start}
            for function, module in (handlers or HANDLERS).items():
                instructions[function] = bundle.instructions(f"import {module}", cwd) - start
            if "api" in (handlers or HANDLERS):  # and what its first request adds before its own calls
                instructions["api_services"] = bundle.instructions(_FIRST_REQUEST, cwd) - start
        rows = []
        for function, module in (handlers or HANDLERS).items():
            rows.append(
                (
                    function,
                    module,
                    _median(source, module, runs, cwd),
                    _median(bundle, module, runs, cwd),
                    _median(uncompiled, module, runs, cwd),
                )
            )
    return {"bare_venv": baseline_venv, "bare_runtime": baseline_runtime, "rows": rows, "instructions": instructions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure (median)")
    args = parser.parse_args()
    measured = measure(args.runs)
    baseline_venv, baseline_runtime, rows = measured["bare_venv"], measured["bare_runtime"], measured["rows"]
    here = Platform.this_machine()
    print(
        f"cold import (CPU time) of each handler module, median of {args.runs} fresh processes, "
        f"Python {platform.python_version()} {here.machine}"
    )
    print(
        f"(bundle built for this machine; the deployed bundle targets Python {TARGET.python} {TARGET.machine}, "
        f"bytecode {TARGET.cache_tag})"
    )
    header = f"{'function':<8} {'module':<16} {'source tree':>12} {'×boto3':>7} {'bundle':>9} {'×boto3':>7}"
    print(f"{header} {'bundle, no pyc':>15} {'×boto3':>7}")
    print(
        f"{'bare':<8} {'import boto3':<16} {baseline_venv:>9.0f} ms {1:>7.2f} {baseline_runtime:>6.0f} ms "
        f"{1:>7.2f} {baseline_runtime:>12.0f} ms {1:>7.2f}"
    )
    for function, module, from_source, from_bundle, without_pyc in rows:
        print(
            f"{function:<8} {module:<16} {from_source:>9.0f} ms {from_source / baseline_venv:>7.2f} "
            f"{from_bundle:>6.0f} ms {from_bundle / baseline_runtime:>7.2f} "
            f"{without_pyc:>12.0f} ms {without_pyc / baseline_runtime:>7.2f}"
        )
    counted = measured["instructions"]
    if counted:
        each = ", ".join(
            f"{function} {counted[function] / 1e6:.0f} M ({counted[function] / counted['bare']:.2f}×)"
            for function, *_ in rows
        )
        bare = f"bare {counted['bare'] / 1e6:.0f} M"
        print(f"bundle imports in instructions (callgrind, start-up subtracted): {bare}, {each}")
        if "api_services" in counted:
            first = counted["api_services"]
            print(
                f"api import and its services built (a first request's set-up): {first / 1e6:.0f} M "
                f"({first / counted['bare']:.2f}×)"
            )
    else:
        print("(valgrind is not installed: no instruction counts)")
    for function, _module, _, from_bundle, _ in rows:
        if function not in TARGETS:
            continue
        limit_ms, limit_ratio = TARGETS[function]
        ratio = from_bundle / baseline_runtime
        met = ratio <= limit_ratio and (limit_ms is None or from_bundle <= limit_ms)
        wanted = f"≤ {limit_ratio}×" + (f" and ≤ {limit_ms:.0f} ms" if limit_ms else "")
        print(f"target {function} (bundle) {wanted}: {'met' if met else 'MISSED'} ({from_bundle:.0f} ms, {ratio:.2f}×)")


if __name__ == "__main__":
    main()
