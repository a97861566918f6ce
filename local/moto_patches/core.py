"""What every patch shares: replace an attribute of moto and keep the original once, restore it, find it; the moto
configuration the runtime needs."""

from __future__ import annotations

import copy
import importlib
import types
from typing import Any

from moto.core.config import DefaultConfig

_ORIGINALS: dict[tuple[int, str], tuple[object, Any]] = {}
_MISSING = object()

#: moto user configuration the runtime needs: execute state machines, run Lambda without Docker.
RUNTIME_CONFIG: DefaultConfig = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


def _replace(owner: object, name: str, value: object) -> None:
    _ORIGINALS.setdefault((id(owner), name), (owner, getattr(owner, name, _MISSING)))
    setattr(owner, name, value)


def _define(owner: type, name: str, value: object) -> None:
    """Set a class's own attribute, keeping what the class itself had (not what it inherits): restoring an attribute
    the class did not define removes it again, so inheritance answers as before (a resource type's methods)."""
    _ORIGINALS.setdefault((id(owner), name), (owner, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, value)


def _restore(owner: object, name: str) -> None:
    saved = _ORIGINALS.pop((id(owner), name), None)
    if saved is None:
        return
    if saved[1] is _MISSING:  # a patch added it (a resource type's method, an API action): take it away again
        delattr(owner, name)
    else:
        setattr(owner, name, saved[1])


def _original(owner: object, name: str) -> Any:
    """The attribute moto had before `_replace` (a replacement called after `revert` finds moto's own again)."""
    saved = _ORIGINALS.get((id(owner), name))
    return saved[1] if saved is not None else getattr(owner, name)


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


_CONFIG_BEFORE: dict[str, Any] = {}


def enable_execution() -> None:
    """Turn on moto's Step Functions interpreter and the Docker-free Lambda backend.

    Without it, moto's Step Functions backend records executions but never runs them, and Lambda tries Docker.
    """
    from moto.core.config import default_user_config

    config: dict[str, Any] = default_user_config  # type: ignore[assignment]
    runtime: dict[str, Any] = RUNTIME_CONFIG  # type: ignore[assignment]
    for section, values in runtime.items():
        _CONFIG_BEFORE.setdefault(section, copy.deepcopy(config.get(section, {})))
        config.setdefault(section, {}).update(values)


def disable_execution() -> None:
    from moto.core.config import default_user_config

    config: dict[str, Any] = default_user_config  # type: ignore[assignment]
    for section, values in _CONFIG_BEFORE.items():
        config[section] = values
    _CONFIG_BEFORE.clear()
