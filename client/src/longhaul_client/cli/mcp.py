"""`longhaul mcp`: a stdio bridge to a deployment's MCP endpoint, for desktop clients that launch MCP servers as
commands (Claude Desktop, IDEs).

The deployment's server is stateless Streamable HTTP (`POST /mcp`, one JSON-RPC message a request, JSON answers), so
the bridge is a relay, not a second server: each line the client writes on stdin (a JSON-RPC message, MCP's stdio
framing) is POSTed to `{LONGHAUL_URL}/mcp` with the key as Bearer, and each answer is written back as one line on
stdout; a notification's 202 writes nothing. Requests are relayed concurrently (a `wait_job` does not hold up a ping),
the protocol version the server negotiated is sent as `MCP-Protocol-Version` on later requests, as the HTTP transport
requires, and a refusal of the HTTP layer (401 unknown key, 403, 413, 5xx) is answered as a JSON-RPC error of the
request it refused, naming the problem. Nothing but MCP messages goes to stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import httpx
import typer

from longhaul_client.cli.common import EXIT_ERROR, KEY_ENV, URL_ENV, Key, Url

PROTOCOL_HEADER = "MCP-Protocol-Version"
_META_VERSION = "io.modelcontextprotocol/protocolVersion"
#: The longest a relayed request may take: above the server's longest wait (`wait_job`, 20 s) and the gateway's 29 s.
TIMEOUT_SECONDS = 60.0
INTERNAL_ERROR = -32603


class Bridge:
    """Relays MCP messages between a line-framed stream pair and a deployment's `/mcp`."""

    def __init__(self, url: str, key: str, out: IO[str], *, http: httpx.Client | None = None) -> None:
        self.endpoint = url.rstrip("/") + "/mcp"
        self.http = http or httpx.Client(timeout=TIMEOUT_SECONDS)
        self.headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.protocol_version: str | None = None
        self.out = out
        self._writing = threading.Lock()

    def run(self, lines: IO[str], workers: int = 8) -> None:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mcp-relay") as pool:
            for line in lines:
                if line.strip():
                    pool.submit(self.relay, line)

    def relay(self, line: str) -> None:
        """POST one message and write what answers it."""
        try:
            message = json.loads(line)
        except ValueError:
            self._write({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "not JSON"}})
            return
        request_id = message.get("id") if isinstance(message, dict) else None
        headers = dict(self.headers)
        version = self._version_of(message) or self.protocol_version
        if version:
            headers[PROTOCOL_HEADER] = version
        try:
            response = self.http.post(self.endpoint, content=line.encode(), headers=headers)
        except httpx.HTTPError as error:
            self._refused(request_id, f"{self.endpoint} did not answer: {error}")
            return
        if response.status_code == 202 or not response.content:
            return
        media = response.headers.get("content-type", "").split(";")[0].strip()
        if media == "text/event-stream":
            for answer in _events(response.text):
                self._answered(answer)
        elif media == "application/json":
            self._answered(response.json())
        else:
            self._refused(request_id, _problem_text(response))

    def _answered(self, answer: Any) -> None:
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):  # the initialize result
            self.protocol_version = result["protocolVersion"]
        self._write(answer)

    def _refused(self, request_id: Any, text: str) -> None:
        print(f"longhaul mcp: {text}", file=sys.stderr)
        if request_id is not None:
            self._write({"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": text}})

    def _write(self, answer: Any) -> None:
        with self._writing:
            self.out.write(json.dumps(answer, separators=(",", ":")) + "\n")
            self.out.flush()

    @staticmethod
    def _version_of(message: Any) -> str | None:
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_META_VERSION) if isinstance(meta, dict) else None
        return version if isinstance(version, str) else None


def _events(text: str) -> list[Any]:
    """The JSON-RPC messages of a Server-Sent Events body (its `data:` lines)."""
    found = []
    for block in text.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.splitlines() if line.startswith("data:"))
        if data:
            found.append(json.loads(data))
    return found


def _problem_text(response: httpx.Response) -> str:
    try:
        problem = response.json()
        return f"{response.status_code} {problem.get('title', '')}: {problem.get('detail', '')}".rstrip(": ")
    except ValueError:
        return f"{response.status_code} {response.reason_phrase}"


def mcp(url: Url = None, key: Key = None) -> None:
    """Bridge a desktop MCP client (stdio) to this deployment's MCP endpoint (`POST /mcp`), with your key."""
    if not url or not key:
        missing = URL_ENV if not url else KEY_ENV
        print(f"error: no {'API URL' if not url else 'API key'}: set {missing} (or pass --url/--key)", file=sys.stderr)
        raise typer.Exit(EXIT_ERROR)
    Bridge(url, key, sys.stdout).run(sys.stdin)
