"""Aggregate packages whose names are imported on first use: a function's init imports only the modules it uses.

Two of Powertools' packages import every module they hold from their `__init__`: `event_handler` (every resolver,
AppSync's with asyncio among them) and `utilities.data_classes` (some thirty event classes). A handler that uses
the REST resolver, or one event class, paid for all of them at every cold start (about a tenth of the API
function's import). `defer_exports` installs such a package as a module whose exported names are resolved on first
access from the submodule its own `__init__` takes each from, read from that `__init__` (never a copied list: a new
Powertools release keeps working). Submodules import as always (the module keeps the package's `__path__`).

A package whose `__init__` does anything but import names (and set `__all__`) is left as it is, and so is one
already imported: deferring is an optimisation, never a change of what a name means. A name that is also the name of
a submodule (`data_classes.event_source`, a function in a module of that name) is resolved at once, as the real
`__init__` leaves it bound to the function, not the module an import would set.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

# The aggregate packages deferred by `handlers` (before anything imports them).
DEFERRED = ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes")


def _exports(package: str, source: str) -> dict[str, tuple[str, str]] | None:
    """name → (module, attribute) of every name `source` (a package's `__init__`) imports, or None when it does
    anything else."""
    exports: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module and all(a.name != "*" for a in node.names):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.level else node.module
            exports.update({alias.asname or alias.name: (module, alias.name) for alias in node.names})
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
            isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
        ):  # the docstring, `__all__`
            continue
        else:
            return None
    return exports


def defer_exports(package: str) -> bool:
    """Install `package` so its exported names are imported on first use (False: left as it is; see the module)."""
    if package in sys.modules:
        return False
    spec = importlib.util.find_spec(package)  # imports the parent packages, as importing `package` would
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        return False
    try:  # only a package installed with its source (a sourceless one is left as it is)
        source = Path(spec.origin).read_text(encoding="utf-8") if spec.origin.endswith(".py") else None
    except (OSError, UnicodeDecodeError):
        source = None
    exports = None if source is None else _exports(package, source)
    if exports is None:
        return False
    module = importlib.util.module_from_spec(spec)  # __path__, __spec__, __file__ as the real package's

    def __getattr__(name: str) -> Any:
        found = exports.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(found[0]), found[1])
        setattr(module, name, value)
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__all__ = list(exports)  # type: ignore[attr-defined]
    sys.modules[package] = module
    parent, _, child = package.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    for name, (source, _attribute) in exports.items():
        if source == f"{package}.{name}":  # a name shadowing its own submodule: bound as the real __init__ binds it
            setattr(module, name, __getattr__(name))
    return True


def defer_aggregate_packages() -> list[str]:
    """Defer every package of `DEFERRED` that can be; the ones deferred."""
    return [package for package in DEFERRED if defer_exports(package)]
