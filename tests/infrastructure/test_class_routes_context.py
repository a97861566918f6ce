"""`-c longhaul:class_routes` reaches the stack, and a class route naming an unknown route fails synthesis with a
message that says which."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic import ValidationError


def test_the_class_routes_context_reaches_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import app

    seen: dict[str, Any] = {}

    def stack(scope: Any, construct_id: str, **kwargs: Any) -> None:
        seen.update(kwargs)

    monkeypatch.setattr(app, "LonghaulStack", stack)
    app.build_app({"longhaul:class_routes": '{"interactive": "fast"}'})
    assert seen["class_routes"] == {"interactive": "fast"}


def test_an_unknown_class_route_fails_synthesis(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path))
    from app import build_app

    with pytest.raises(ValidationError, match="class 'interactive' uses unknown route 'fast'"):
        build_app({"longhaul:class_routes": '{"interactive": "fast"}'})
