"""The domain package shows its architecture and keeps it: a dozen parts, imports that run one way (the layers in
`pyproject.toml`, checked by import-linter), no import circle between modules (`TYPE_CHECKING` and function-level
imports included), every part saying what it owns and what it may import, and workflows found by their folder."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from longhaul.engine.spec import registry

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lambdas" / "longhaul"
MAX_TOP_LEVEL = 12


def layers() -> list[list[str]]:
    """The layers contract, top first; each layer a list of its sibling parts."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    return [[part.strip() for part in layer.split("|")] for layer in contract["layers"]]


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_import_linter_contracts_are_kept() -> None:
    """The layers (each part imports only the parts below it), workflows independent of each other, a workflow's
    library imported by no platform part, the handlers by no domain module, the command line by neither."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(ROOT / path) for path in ("lambdas", "client/src"))}
    linter = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run(
        [str(linter), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("longhaul", exclude_type_checking_imports=False, cache_dir=None)
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert import_cycles(graph) == [["p.a", "p.b"]]


def test_the_package_has_a_dozen_parts_at_most() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name not in {"__init__.py", "__pycache__"})
    assert len(entries) <= MAX_TOP_LEVEL, entries


def test_every_part_is_in_the_layers_and_says_what_it_may_import() -> None:
    """A part's `__init__` docstring names what it owns and, after "May import:", only parts below it."""
    ordered = layers()
    parts = [part for layer in ordered for part in layer]
    on_disk = sorted(
        p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.name not in {"__init__.py", "__pycache__"}
    )
    assert sorted(parts) == on_disk
    for depth, layer in enumerate(ordered):
        below = {part for lower in ordered[depth + 1 :] for part in lower}
        for part in layer:
            path = PACKAGE / part / "__init__.py" if (PACKAGE / part).is_dir() else PACKAGE / f"{part}.py"
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert len(doc) > 60, f"{part}: say what it owns"
            if part == "core":
                assert "Imports nothing else of longhaul" in doc
                continue
            assert "May import:" in doc, f"{part}: say what it may import"
            named = doc.split("May import:", 1)[1].split(".")[0]
            if "every other part" in named:
                assert depth == 0, f"{part} is not the top layer"
                continue
            mentioned = {word.strip(" ,\n") for word in named.replace(" and ", ",").split(",")} - {""}
            assert mentioned <= below, f"{part} says it may import {sorted(mentioned - below)}, above or beside it"


@pytest.mark.parametrize(
    "workflow", sorted(p.name for p in (PACKAGE / "workflows").iterdir() if (p / "spec.py").exists())
)
def test_a_workflow_is_its_folder(workflow: str) -> None:
    """Each folder with a spec is a registered workflow; nothing else lists it."""
    spec = __import__(f"longhaul.workflows.{workflow}.spec", fromlist=["SPEC"]).SPEC
    assert registry()[spec.name] is spec
    assert spec.domain.startswith(f"longhaul.workflows.{workflow}.")
