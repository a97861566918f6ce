"""`longhaul mcp`'s relay (`longhaul_client.cli.mcp.Bridge`) against a stand-in HTTP endpoint: each stdio line is one
POST with the key, answers come back as lines, the negotiated protocol version is sent after `initialize`, a
notification's 202 writes nothing, and an HTTP refusal is a JSON-RPC error of the request it refused."""

from __future__ import annotations

import io
import json

import httpx

from longhaul_client.cli.mcp import PROTOCOL_HEADER, Bridge


def test_the_bridge_relays_each_message_and_answers_refusals_as_errors() -> None:
    seen: list[httpx.Request] = []

    def endpoint(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        message = json.loads(request.content)
        if message["method"] == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "longhaul"}}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": result})
        if message["method"] == "notifications/initialized":
            return httpx.Response(202)
        if message["method"] == "ping":
            event = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return httpx.Response(
                200, text=f"event: message\ndata: {event}\n\n", headers={"content-type": "text/event-stream"}
            )
        problem = {"type": "…/unauthorized", "title": "Unauthorized", "status": 401, "detail": "unknown key"}
        return httpx.Response(401, json=problem, headers={"content-type": "application/problem+json"})

    out = io.StringIO()
    bridge = Bridge("http://api/", "lh_key", out, http=httpx.Client(transport=httpx.MockTransport(endpoint)))
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    for line in lines:  # in order (`run` relays them concurrently)
        bridge.relay(json.dumps(line) + "\n")

    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [answer["id"] for answer in answers] == [1, 2, 3]
    assert answers[2]["error"]["message"] == "401 Unauthorized: unknown key"
    assert all(str(r.url) == "http://api/mcp" and r.headers["Authorization"] == "Bearer lh_key" for r in seen)
    assert PROTOCOL_HEADER not in seen[0].headers and seen[3].headers[PROTOCOL_HEADER] == "2025-11-25"
