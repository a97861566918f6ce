"""Aggregate packages deferred at a function's init (`handlers.lean_imports`): a name is imported on first use from
the submodule the package's `__init__` takes it from, and nothing else changes."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from handlers.lean_imports import DEFERRED, defer_exports


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An aggregate package `agg` on the path: `agg.light` and `agg.heavy` export classes, `agg.tool` a function
    named after its module; importing `agg.heavy` records itself in `agg.log`."""
    root = tmp_path / "agg"
    root.mkdir()
    (root / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """An aggregate package."""
            from .light import Light
            from .heavy import Heavy as Renamed
            from .tool import tool
            from agg.sub.deep import Deep

            __all__ = ["Light", "Renamed", "tool", "Deep"]
            '''
        )
    )
    (root / "light.py").write_text("class Light:\n    pass\n")
    (root / "heavy.py").write_text("import agg.log\nagg.log.imported.append('heavy')\n\nclass Heavy:\n    pass\n")
    (root / "log.py").write_text("imported = []\n")
    (root / "tool.py").write_text("def tool():\n    return 'the function'\n")
    (root / "sub").mkdir()
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "deep.py").write_text("from .. import light\n\nclass Deep(light.Light):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in [m for m in sys.modules if m == "agg" or m.startswith("agg.")]:
        del sys.modules[name]


def test_a_deferred_package_imports_a_name_when_it_is_first_used(package: Path) -> None:
    assert defer_exports("agg")
    import agg
    import agg.log

    assert "agg.heavy" not in sys.modules and "agg.light" not in sys.modules
    from agg import Light

    assert Light.__module__ == "agg.light" and "agg.heavy" not in sys.modules
    assert agg.Renamed.__name__ == "Heavy" and agg.log.imported == ["heavy"]
    assert agg.Deep.__mro__[1] is Light  # an absolute import of a nested module
    assert sorted(agg.__all__) == ["Deep", "Light", "Renamed", "tool"]
    with pytest.raises(AttributeError, match="no attribute 'Missing'"):
        agg.Missing  # noqa: B018


def test_a_name_shadowing_its_submodule_is_the_function_as_the_real_init_binds_it(package: Path) -> None:
    assert defer_exports("agg")
    import agg
    import agg.tool  # importing the submodule must not rebind the name to the module

    assert agg.tool() == "the function"


def test_a_package_whose_init_does_more_than_import_names_is_left_as_it_is(package: Path) -> None:
    init = package / "__init__.py"
    init.write_text(init.read_text() + "\nSETTING = Light()\n")
    assert not defer_exports("agg")
    assert "agg" not in sys.modules


def test_a_package_without_its_source_is_left_as_it_is(package: Path) -> None:
    import py_compile

    init = package / "__init__.py"
    py_compile.compile(str(init), cfile=str(package / "__init__.pyc"))
    init.unlink()  # a sourceless package: its __init__ is the pyc beside it
    assert not defer_exports("agg")
    assert "agg" not in sys.modules


def test_an_imported_package_is_left_as_it_is(package: Path) -> None:
    import agg

    assert not defer_exports("agg")
    assert sys.modules["agg"] is agg and "agg.heavy" in sys.modules


@pytest.mark.parametrize("name", DEFERRED)
def test_the_deferred_powertools_packages_can_be_deferred(name: str) -> None:
    """Read their `__init__` as `defer_exports` does: a Powertools release that made either do more than import names
    would silently end the deferral (this fails instead)."""
    from importlib.util import find_spec

    from handlers.lean_imports import _exports

    spec = find_spec(name)
    assert spec is not None and spec.origin is not None
    exports = _exports(name, Path(spec.origin).read_text(encoding="utf-8"))
    assert exports and all(module.startswith(name) for module, _ in exports.values())
