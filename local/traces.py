"""The local platform's tracing: every job's spans kept in memory (bounded) for the trace routes, and also exported
over OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` when it is set (a user's collector or Jaeger)."""

from __future__ import annotations

import os
import threading

from longhaul.adapters.traces import LocalTraceStore
from longhaul.core import tracing

#: Local platform: an OTLP/HTTP collector (`http://127.0.0.1:4318`) that receives every span as well (the standard
#: OpenTelemetry variable; its `/v1/traces` path is added).
OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_lock = threading.Lock()
_store: LocalTraceStore | None = None


def install() -> LocalTraceStore:
    """Once per process: the span store (and the OTLP exporter when its endpoint is set)."""
    global _store
    with _lock:
        if _store is not None:
            return _store
        store = LocalTraceStore()
        processors: list[object] = [store]
        if os.environ.get(OTLP_ENDPOINT_ENV):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            processors.append(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=500))
        tracing.install(processors, reader=store)  # type: ignore[arg-type]
        _store = store
        return store


def store() -> LocalTraceStore | None:
    return _store
