"""A webhook receiver to try completion webhooks locally: it saves each delivery and answers 204.

    python3 samples/webhook_receiver.py 9000 /tmp/longhaul-webhooks &

Listens on 127.0.0.1:<port> and writes every POST to <dir>/<webhook-id>.http (the delivery as an HTTP message:
request line, headers, a blank line, the raw body as signed, which `longhaul verify-webhook --secret … < it` checks),
<dir>/<webhook-id>.body and <dir>/<webhook-id>.headers.json, and the latest also as last.http / last.body /
last.headers.json. The standard library only (any python3). It verifies
nothing itself: a real receiver verifies the raw body before it parses it (see the README's Receivers).
"""

from __future__ import annotations

import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def serve(port: int, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = json.dumps(dict(self.headers.items()), indent=2)
            webhook_id = self.headers.get("webhook-id") or "unsigned"
            names = [webhook_id, "last"] if SAFE_ID.match(webhook_id) else ["last"]
            head = f"POST {self.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
            for name in names:  # the body last, each renamed into place: a reader that sees a body has the rest
                _write(directory / f"{name}.http", head.encode() + b"\r\n" + body)
                _write(directory / f"{name}.headers.json", headers.encode())
                _write(directory / f"{name}.body", body)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            print(f"received {self.headers.get('webhook-id')} on {self.path}", file=sys.stderr, flush=True)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 samples/webhook_receiver.py <port> <directory>")
    serve(int(sys.argv[1]), Path(sys.argv[2]))
