"""The local platform's tracing: every job's spans kept in memory (bounded) for the trace routes, and also exported
over OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT` when it is set (a user's collector or Jaeger)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from longhaul.adapters.traces import LocalTraceStore
from longhaul.core import tracing

#: Local platform: an OTLP/HTTP collector (`http://127.0.0.1:4318`) that receives every span as well (the standard
#: OpenTelemetry variable; its `/v1/traces` path is added). Read when the platform starts (`make run` with it set).
OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTLP_TRACES_PATH = "/v1/traces"
EXPORT_DELAY_MILLIS = 500  # how long finished spans wait to be sent together
_lock = threading.Lock()
_store: LocalTraceStore | None = None


def install(environment: Mapping[str, str] | None = None) -> LocalTraceStore:
    """Once per process: the span store, and the OTLP export when `environment` (the process's) names an endpoint."""
    global _store
    with _lock:
        if _store is not None:
            return _store
        store = LocalTraceStore()
        tracing.install([store], reader=store)  # type: ignore[list-item]
        endpoint = (os.environ if environment is None else environment).get(OTLP_ENDPOINT_ENV, "").strip()
        if endpoint:
            export_to(endpoint)
        _store = store
        return store


def store() -> LocalTraceStore | None:
    return _store


def export_to(endpoint: str) -> Callable[[], None]:
    """Export every finished span over OTLP/HTTP to the collector at `endpoint` (`http://host:4318`; its
    `/v1/traces` added) as well; returns a function that flushes what is pending and stops it."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    url = endpoint.rstrip("/") + ("" if endpoint.rstrip("/").endswith(OTLP_TRACES_PATH) else OTLP_TRACES_PATH)
    processor = _Detachable(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=url), schedule_delay_millis=EXPORT_DELAY_MILLIS)
    )
    tracing.install([processor])  # type: ignore[list-item]
    return processor.detach


class _Detachable:
    """A span processor that can be stopped (the SDK's provider keeps its processors for good)."""

    def __init__(self, inner: Any) -> None:
        self._inner: Any = inner

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        inner = self._inner
        if inner is not None:
            inner.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Any) -> None:
        return None

    def on_end(self, span: Any) -> None:
        inner = self._inner
        if inner is not None:
            inner.on_end(span)

    def shutdown(self) -> None:
        self.detach()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True if self._inner is None else bool(self._inner.force_flush(timeout_millis))

    def detach(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            inner.shutdown()  # sends what is pending
