"""Recorded jobs run again on the local runtime, every model call answered from its recording: the platform's
`default` route becomes a `replay` route over all the recordings' calls (a call with no recording fails its step)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
from local.recording import Recording, merged_fixtures, recordings

ROOT = Path(__file__).resolve().parents[2]
# The model the recordings were made with (the offline model): its prices make the recorded costs.
RECORDED_MODEL = "longhaul-offline-extractive-1"


def replay_routes(fixtures: Path) -> str:
    return json.dumps({"default": {"provider": "replay", "model_id": RECORDED_MODEL, "fixtures": str(fixtures)}})


@pytest.fixture(scope="session")
def recorded() -> list[Recording]:
    found = recordings()
    assert {r.request["workflow"] for r in found} >= {"document-analysis", "invoice-reconciliation"}
    return found


@pytest.fixture(scope="session")
def replaying(recorded: list[Recording], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """The platform (the one this session runs, or a new one) answering every model call from the recordings."""
    fixtures = merged_fixtures(recorded, tmp_path_factory.mktemp("replay") / "model_calls.json")
    running = LocalPlatform.current()
    platform = running or LocalPlatform.start(ROOT, time_scale=0.1)
    before = lambda_runtime.environment_overrides()
    platform.set_function_environment(LONGHAUL_MODEL_ROUTES=replay_routes(fixtures))
    yield platform
    lambda_runtime.configure(environment_overrides=before)
    if running is None:
        lambda_runtime.interrupt_waits()
        wait_until(lambda: not lambda_runtime.hanging() or None, timeout=30, what="hung invocations to end")
        platform.stop()
