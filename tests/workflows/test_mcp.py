"""The MCP endpoint with the official SDK's client (`mcp.client.streamable_http`) against the local platform: the tools
a key sees, a workflow called and followed through its review to completed, its result and resource, a cancel, a
reviewer's tools, another tenant's job not found, and no key a 401."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
import requests
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from local.platform import LocalPlatform

T = TypeVar("T")


def as_key(platform: LocalPlatform, name: str, use: Callable[[ClientSession], Awaitable[T]]) -> T:
    """`use` a session of the official client, over Streamable HTTP with `name`'s key."""

    async def run() -> T:
        headers = platform.auth_header(name)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(f"{platform.api_url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await use(session)

    return anyio.run(run)


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    found: dict[str, Any] = result.structured_content
    return found


def test_a_workflow_called_from_an_mcp_client_is_followed_through_review_to_its_result(
    platform: LocalPlatform, sample_request: dict[str, Any]
) -> None:
    arguments = {"input": sample_request["input"], "review": {"mode": "always", "deadline_seconds": 3600}}

    async def start(session: ClientSession) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
        tools = (await session.list_tools()).tools
        called = structured(await session.call_tool("document-analysis", {**arguments, "wait_seconds": 0}))
        waited = structured(await session.call_tool("wait_job", {"job_id": called["job_id"], "seconds": 20}))
        return tools, called, waited

    tools, called, waited = as_key(platform, "alpha", start)
    by_name = {tool.name: tool for tool in tools}
    assert {"document-analysis", "get_job", "wait_job", "get_result", "list_jobs", "cancel_job"} <= set(by_name)
    assert not {"list_reviews", "decide_review"} & set(by_name)
    schema = by_name["document-analysis"].input_schema
    assert "input" in schema["required"] and "workflow" not in schema["properties"]
    assert called["job_id"].startswith("job_") and called["task_state"] in ("working", "input_required")
    assert waited["status"] == "waiting_for_review" and waited["task_state"] == "input_required"
    review_id = waited["review"]["review_id"]
    assert review_id in waited["awaiting"]

    async def review(session: ClientSession) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        names = [tool.name for tool in (await session.list_tools()).tools]
        pending = structured(await session.call_tool("list_reviews", {}))
        decided = structured(await session.call_tool("decide_review", {"review_id": review_id, "decision": "approve"}))
        return names, pending, decided

    names, pending, decided = as_key(platform, "alpha-reviewer", review)
    assert sorted(names) == ["decide_review", "get_review", "list_reviews"]
    assert review_id in [r["review_id"] for r in pending["reviews"]]
    assert decided["decision"] == "approve"

    async def finish(session: ClientSession) -> tuple[dict[str, Any], Any, Any]:
        done = structured(await session.call_tool("wait_job", {"job_id": called["job_id"], "seconds": 20}))
        result = await session.call_tool("get_result", {"job_id": called["job_id"]})
        resource = await session.read_resource(done["resource"])
        return done, result, resource

    done, result, resource = as_key(platform, "alpha", finish)
    assert done["status"] == "completed" and done["task_state"] == "completed"
    assert done["result"]["answer"] == structured(result)["result"]["answer"]
    links = [block for block in result.content if block.type == "resource_link"]
    assert [str(link.uri) for link in links] == [f"longhaul://jobs/{called['job_id']}/result"]
    media = {content.mime_type: content.text for content in resource.contents}
    assert json.loads(media["application/json"])["answer"] == done["result"]["answer"]
    assert media["text/markdown"].strip()

    async def as_beta(session: ClientSession) -> tuple[Any, str]:
        job = await session.call_tool("get_job", {"job_id": called["job_id"]})
        with pytest.raises(MCPError) as refused:
            await session.read_resource(done["resource"])
        return job, refused.value.message

    job, refused = as_key(platform, "beta", as_beta)
    assert job.is_error and job.structured_content["status"] == 404
    assert "not found" in refused


def test_another_call_is_cancelled_and_a_repeated_key_is_the_same_job(
    platform: LocalPlatform, sample_request: dict[str, Any]
) -> None:
    arguments = {
        "input": sample_request["input"],
        "review": {"mode": "always", "deadline_seconds": 3600},
        "idempotency_key": "mcp-cancel-1",
        "wait_seconds": 0,
    }

    async def use(session: ClientSession) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        first = structured(await session.call_tool("document-analysis", arguments))
        again = structured(await session.call_tool("document-analysis", arguments))
        cancelled = structured(await session.call_tool("cancel_job", {"job_id": first["job_id"]}))
        after = structured(await session.call_tool("get_job", {"job_id": first["job_id"]}))
        return first, again, cancelled, after

    first, again, cancelled, after = as_key(platform, "alpha", use)
    assert again["job_id"] == first["job_id"]
    assert cancelled["status"] in ("cancelled", "cancel_requested")
    assert after["task_state"] in ("cancelled", "working")


def test_the_mcp_endpoint_needs_a_key_and_serves_no_stream(platform: LocalPlatform) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    anonymous = requests.post(f"{platform.api_url}/mcp", json=initialize, timeout=30)
    stream = requests.get(
        f"{platform.api_url}/mcp", headers={**platform.auth_header("alpha"), "Accept": "text/event-stream"}, timeout=30
    )
    assert anonymous.status_code == 401 and anonymous.headers["Content-Type"].startswith("application/problem+json")
    assert stream.status_code == 405 and stream.headers["Allow"] == "POST"


def test_longhaul_mcp_bridges_a_stdio_client_to_the_deployment(platform: LocalPlatform) -> None:
    """What a desktop client does: launch `longhaul mcp` with the URL and key in its environment, speak stdio."""
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = StdioServerParameters(
        command=str(Path(sys.executable).with_name("longhaul")),
        args=["mcp"],
        env={**os.environ, "LONGHAUL_URL": platform.api_url, "LONGHAUL_API_KEY": platform.key_for("alpha-reviewer")},
    )

    async def run() -> tuple[list[str], Any]:
        async with stdio_client(command) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = [tool.name for tool in (await session.list_tools()).tools]
            return names, await session.call_tool("get_review", {"review_id": "rev_nobody"})

    names, missing = anyio.run(run)
    assert sorted(names) == ["decide_review", "get_review", "list_reviews"]
    assert missing.is_error and missing.structured_content["status"] == 404
