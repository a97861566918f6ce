"""A stand-in for an OpenTelemetry collector, to see the spans the local platform exports over OTLP/HTTP.

    .venv/bin/python samples/otlp_collector.py 4318 > /tmp/spans.txt &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 make run

Listens on 127.0.0.1:<port>, accepts OTLP/HTTP protobuf on `/v1/traces` (what the platform's exporter sends; a real
collector or Jaeger takes the same) and prints one line per span received: `<trace id> <span id> <status> <name>`.
It needs the project's interpreter (`opentelemetry-proto` decodes the requests); it keeps nothing else.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

STATUS = {0: "unset", 1: "ok", 2: "error"}  # OTLP's status codes
_print = threading.Lock()


def serve(port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest.FromString(body)
            lines = [
                f"{span.trace_id.hex()} {span.span_id.hex()} {STATUS.get(span.status.code, 'unset')} {span.name}"
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]
            with _print:
                print("\n".join(lines), flush=True)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: .venv/bin/python samples/otlp_collector.py <port>")
    serve(int(sys.argv[1]))
