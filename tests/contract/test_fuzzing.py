"""Schemathesis against the local platform, with all of its checks, as a tenant, a reviewer and an operator: on a
fixed seed and a bounded number of examples, it finds nothing (a longer run: `python -m tests.contract.fuzzing`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from local.platform import LocalPlatform
from tests.contract import fuzzing

MAX_EXAMPLES = 5  # per operation and phase: the whole test stays within a few minutes on 2 cores


def test_the_fuzzer_runs_every_check_schemathesis_has() -> None:
    import schemathesis.specs.openapi.checks  # noqa: F401 - registers the OpenAPI checks
    from schemathesis.checks import CHECKS

    assert set(fuzzing.CHECKS) == set(CHECKS.get_all_names())  # (and not the response-time limit: see CHECKS)


@pytest.mark.parametrize("role", ["tenant", "reviewer", "operator"])
def test_schemathesis_finds_nothing(platform: LocalPlatform, keys: dict[str, str], role: str, tmp_path: Path) -> None:
    assert platform.api_url
    outcome = fuzzing.run(platform.api_url, keys[role], role, max_examples=MAX_EXAMPLES, report_dir=tmp_path)

    print(outcome.line)  # the figures (`pytest -s`)
    assert outcome.cases > 0, outcome.output
    assert outcome.returncode == 0 and outcome.failures == 0, outcome.output
