"""The contract suite's own local platform (free ports): the fuzzer's tenant, reviewer and operator keys, and a
policy for the tenants that submit (the tenant's and the operator's own) whose ceilings are the schema's own bounds
(so every schema-valid budget is within them) and which runs one job at a time (accepted jobs wait `queued`: the
fuzzer exercises the API, not the workflows)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from local import lambda_runtime
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core import limits

ROOT = Path(__file__).resolve().parents[2]
TENANT = "fuzz"
KEYS = {
    TENANT: "lh_fuzz_tenant_3b9d0e6a1c7f4285",
    f"{TENANT}-ops": "lh_fuzz_ops_8a2f6c1e9d3b0475:operator",
    f"{TENANT}-reviewer": f"lh_fuzz_reviewer_5e0c7a9f2d4b6183:reviewer@{TENANT}",
}
MOST_USD = "99999999.999999"  # the largest amount the schema's pattern allows
POLICY = {
    "jobs_in_flight": 1,
    "max_job_tokens": limits.MAX_TOKENS,
    "daily_tokens": limits.MAX_TOKENS,
    "max_job_cost_usd": MOST_USD,
    "daily_cost_usd": MOST_USD,
    "agent_max_turns": limits.MAX_AGENT_TURNS,
    "agent_max_tool_calls": limits.MAX_AGENT_TOOL_CALLS,
}


@pytest.fixture(scope="session")
def platform() -> Iterator[LocalPlatform]:
    running = LocalPlatform.start(
        ROOT,
        time_scale=0.1,
        keys=KEYS,
        env_overrides={"LONGHAUL_TENANT_POLICIES": json.dumps({TENANT: POLICY, f"{TENANT}-ops": POLICY})},
    )
    yield running
    lambda_runtime.interrupt_waits()
    wait_until(lambda: not lambda_runtime.hanging() or None, timeout=30, what="hung invocations to end")
    running.stop()


@pytest.fixture(scope="session")
def keys(platform: LocalPlatform) -> dict[str, str]:
    """The key of each role the fuzzer calls the API as."""
    return {
        "tenant": platform.key_for(TENANT),
        "reviewer": platform.key_for(f"{TENANT}-reviewer"),
        "operator": platform.key_for(f"{TENANT}-ops"),
    }
