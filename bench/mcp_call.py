"""Benchmark: an MCP `tools/call` of a workflow → its job id, on the local runtime, with the official MCP client.

    .venv/bin/python bench/mcp_call.py [--calls 20]

One client session (the SDK's Streamable HTTP client over one HTTP connection, as an agent keeps it) calls the
`document-analysis` tool with the sample request and `wait_seconds: 0` (answer the job id at once: the figure is the
submission's, not the job's) `--calls` times, after one unmeasured call that warms the API function. Prints p50, p90
and max of the call (target: p50 ≤ 300 ms), and for comparison those of `tools/list` and of the same submission
through `POST /v1/jobs`. The tenant's policy would queue the
jobs past its slots; they are cancelled as they come (queued or running, a cancel is one call). Asserts nothing; the
machine's cores and load are printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx2
import requests
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.platform import LocalPlatform  # noqa: E402


def _load() -> str:
    return f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}"


def _percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"


async def _measure(url: str, headers: dict[str, str], calls: int) -> tuple[list[float], list[float]]:
    arguments: dict[str, Any] = {**json.loads((ROOT / "samples" / "request.json").read_text()), "wait_seconds": 0}
    arguments.pop("workflow")
    called: list[float] = []
    listed: list[float] = []
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for n in range(calls + 1):
            started = time.perf_counter()
            await session.list_tools()
            listed.append(time.perf_counter() - started)
            started = time.perf_counter()
            answer = await session.call_tool("document-analysis", arguments)
            took = time.perf_counter() - started
            if answer.is_error:
                raise SystemExit(f"the call was refused: {answer.structured_content}")
            if n:  # the first call warms the function
                called.append(took)
            await session.call_tool("cancel_job", {"job_id": answer.structured_content["job_id"]})
    return called, listed[1:]


def _rest(url: str, headers: dict[str, str], calls: int) -> list[float]:
    """The same submission through `POST /v1/jobs` (one keep-alive connection), each job cancelled after."""
    body = json.loads((ROOT / "samples" / "request.json").read_text())
    took: list[float] = []
    with requests.Session() as http:
        http.headers.update(headers)
        for n in range(calls + 1):
            started = time.perf_counter()
            accepted = http.post(f"{url}/v1/jobs", json=body, timeout=60).json()
            if n:
                took.append(time.perf_counter() - started)
            http.post(f"{url}/v1/jobs/{accepted['job_id']}/cancel", timeout=60)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    print(f"machine: {_load()}")
    platform = LocalPlatform.start(ROOT)
    try:
        headers = platform.auth_header(platform.keys[0].tenant)
        called, listed = anyio.run(_measure, platform.api_url, headers, args.calls)
        posted = _rest(platform.api_url, headers, args.calls)
    finally:
        platform.stop()
    print(
        f"MCP tools/call of a workflow -> job id ({len(called)} calls): {_percentiles(called)} (target p50 <= 300 ms)"
    )
    print(f"MCP tools/list ({len(listed)} calls): {_percentiles(listed)}")
    print(f"for comparison, POST /v1/jobs -> 202 ({len(posted)} calls): {_percentiles(posted)}")
    print(f"machine: {_load()}")


if __name__ == "__main__":
    main()
