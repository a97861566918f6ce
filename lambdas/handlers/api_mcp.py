"""The MCP endpoint (`POST /mcp`): the official MCP SDK's server in stateless Streamable HTTP mode, JSON responses.

The API function has authenticated the key (Bearer; 401 before this) and routed the request here; each request is
served on its own: a fresh `StreamableHTTPSessionManager` (stateless: no session id, nothing kept between requests,
so any warm Lambda sandbox can answer any request), driven as the ASGI app it is by the API Gateway proxy event (one
request in, one JSON response out: a Lambda behind a REST API's buffered integration cannot stream). So a client's
`GET /mcp` (the server-to-client stream) is a 405, and there are no progress notifications: `wait_job` follows a job.

The tools and resources are `longhaul.api.mcp`'s, for the request's principal (a context variable the SDK's handlers
read). The SDK (with Starlette under it) is imported on the first MCP request, not at a cold start.
"""

from __future__ import annotations

import base64
import contextvars
import json
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from longhaul.api.mcp import MARKDOWN, RESULT_URI, McpTools
from longhaul.core.auth import Principal
from longhaul.core.problems import ApiProblem
from longhaul.services import services

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

SERVER_NAME = "longhaul"
_CALLER: contextvars.ContextVar[tuple[Principal, str]] = contextvars.ContextVar("mcp_caller")
_server: Server[Any] | None = None


def _tools() -> McpTools:
    principal, base = _CALLER.get()
    return McpTools(services(), principal, base)


def server() -> Server[Any]:
    """The MCP server (built once per sandbox): its handlers act for the request's caller."""
    global _server
    if _server is not None:
        return _server
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import INVALID_PARAMS

    from handlers.api import API_VERSION

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    title=spec.title,
                    description=spec.description,
                    input_schema=spec.input_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=spec.read_only, destructive_hint=spec.name == "cancel_job"
                    ),
                )
                for spec in _tools().tools()
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = _tools().call(params.name, dict(params.arguments or {}))
        content: list[types.ContentBlock] = [types.TextContent(text=answer.text)]
        content += [
            types.ResourceLink(uri=uri, name=uri.removeprefix("longhaul://"), mime_type=MARKDOWN)
            for uri in answer.links
        ]
        return types.CallToolResult(content=content, structured_content=answer.structured, is_error=answer.is_error)

    async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=uri, name=name, mime_type="application/json")
                for uri, name in _tools().recent_results()
            ]
        )

    async def list_templates(_ctx: Any, _params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=RESULT_URI,
            name="job result",
            description="A completed job's result: its JSON and its Markdown rendering.",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(_ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        try:
            found = _tools().read_result(str(params.uri))
        except ApiProblem as problem:  # another tenant's job, no such job, no result yet: not found
            raise MCPError(INVALID_PARAMS, f"resource not found: {problem.detail}", {"uri": str(params.uri)}) from None
        contents = [types.TextResourceContents(uri=found.uri, mime_type="application/json", text=found.json_text)]
        if found.markdown is not None:
            contents.append(types.TextResourceContents(uri=found.uri, mime_type=MARKDOWN, text=found.markdown))
        return types.ReadResourceResult(contents=contents)

    _server = Server(
        SERVER_NAME,
        version=API_VERSION,
        instructions="Longhaul runs long LLM jobs. Call a workflow's tool to start a job; if it is not finished, "
        "follow it with wait_job until task_state is completed (then read its result) or input_required (a review, "
        "a resume or a signal is awaited).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    return _server


def respond(event: dict[str, Any], principal: Principal, base_url: str) -> tuple[int, dict[str, str], str]:
    """Serve one MCP request (a REST proxy event with a text body): its status, headers and body."""
    token = _CALLER.set((principal, base_url))
    try:
        return _serve(event)
    finally:
        _CALLER.reset(token)


def _serve(event: dict[str, Any]) -> tuple[int, dict[str, str], str]:
    import anyio
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else str(body).encode()
    headers = [
        (str(k).lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (event.get("headers") or {}).items()
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": str(event.get("httpMethod", "POST")),
        "scheme": "https",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": None,
        "server": ("longhaul", 443),
    }
    status = 500
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def serve() -> None:
        nonlocal status
        done = anyio.Event()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for key, value in message.get("headers", []):
                    out_headers[key.decode("latin-1")] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    done.set()

        # Stateless and JSON: a transport per request, no session kept, one JSON body (or 202 for a notification).
        manager = StreamableHTTPSessionManager(app=server(), stateless=True, json_response=True)
        async with manager.run():
            await manager.handle_request(scope, receive, send)
        done.set()

    anyio.run(serve)
    out_headers.pop("content-length", None)
    text = b"".join(chunks).decode()
    return status, out_headers, text


def not_streamed() -> tuple[int, dict[str, str], str]:
    """`GET /mcp` (the server-to-client stream a stateful server keeps): this deployment serves each request on its
    own, so it is a 405 naming POST."""
    body = {
        "type": "https://longhaul.dev/problems/method-not-allowed",
        "title": "Method not allowed",
        "status": 405,
        "detail": "this MCP server is stateless (Streamable HTTP, JSON responses): POST each message to /mcp; there "
        "is no server-to-client stream to GET",
    }
    return 405, {"Allow": "POST", "Content-Type": "application/problem+json"}, json.dumps(body)
