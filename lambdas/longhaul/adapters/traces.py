"""Where a job's spans are read back from (`TraceReader`): the local runtime's bounded span store, or X-Ray.

The local store is a `SpanProcessor` the local runtime installs (`longhaul.core.tracing.install`): it keeps each
trace's finished spans, at most `max_spans` per trace and `max_traces` traces (the oldest trace is forgotten first).
On AWS, `XRayTraces` reads the trace with `BatchGetTraces`, by the trace id in X-Ray's form (`1-<8 hex>-<24 hex>`),
and turns each segment and subsegment back into a span.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from longhaul.core.contracts import TraceSpan

#: The local runtime keeps at most this many spans of one trace (the later ones are dropped and counted).
MAX_SPANS_PER_TRACE = 5000
#: The local runtime keeps the spans of at most this many traces (jobs): the oldest is forgotten first.
MAX_TRACES = 500
_STATUS = {0: "unset", 1: "ok", 2: "error"}


def xray_trace_id(trace_id: str) -> str:
    """`1-<first 8 hex>-<last 24 hex>`: X-Ray's form of a W3C trace id (its epoch part is the first 8 digits)."""
    return f"1-{trace_id[:8]}-{trace_id[8:]}"


def _iso(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos / 1e9, tz=UTC)


def span_record(span: Any) -> TraceSpan:
    """An SDK `ReadableSpan` as the API's record."""
    parent = span.parent
    return TraceSpan(
        span_id=format(span.context.span_id, "016x"),
        parent_id=format(parent.span_id, "016x") if parent is not None and parent.is_valid else None,
        name=span.name,
        start=_iso(span.start_time or 0),
        end=_iso(span.end_time or span.start_time or 0),
        status=_STATUS.get(span.status.status_code.value, "unset"),
        attributes={k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()},
    )


class LocalTraceStore:
    """A `SpanProcessor` keeping finished spans by trace id, bounded; also the local `TraceReader`."""

    def __init__(self, *, max_spans: int = MAX_SPANS_PER_TRACE, max_traces: int = MAX_TRACES) -> None:
        self.max_spans = max_spans
        self.max_traces = max_traces
        self.dropped = 0
        self._traces: OrderedDict[int, list[Any]] = OrderedDict()
        self._lock = threading.Lock()

    # SpanProcessor
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def _on_ending(self, span: Any) -> None:
        return None

    def on_end(self, span: Any) -> None:
        trace_id = span.context.trace_id
        with self._lock:
            kept = self._traces.get(trace_id)
            if kept is None:
                kept = self._traces[trace_id] = []
                while len(self._traces) > self.max_traces:
                    self._traces.popitem(last=False)
            if len(kept) >= self.max_spans:
                self.dropped += 1
                return
            kept.append(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # TraceReader
    def spans(self, trace_id: str) -> list[TraceSpan]:
        with self._lock:
            kept = list(self._traces.get(int(trace_id, 16), ()))
        return sorted((span_record(s) for s in kept), key=lambda s: (s.start, s.end))

    def forget(self, trace_id: str) -> int:
        """Drop a trace's spans (an erased job's: their attributes hold its prompts and answers); how many."""
        with self._lock:
            return len(self._traces.pop(int(trace_id, 16), ()))

    def trace_ids(self) -> list[str]:
        with self._lock:
            return [format(t, "032x") for t in self._traces]


class XRayTraces:
    """A trace read back from X-Ray (`xray:BatchGetTraces`)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def spans(self, trace_id: str) -> list[TraceSpan]:
        found: list[TraceSpan] = []
        token: str | None = None
        while True:
            page = self.client.batch_get_traces(
                TraceIds=[xray_trace_id(trace_id)], **({"NextToken": token} if token else {})
            )
            for trace in page.get("Traces", []):
                for segment in trace.get("Segments", []):
                    found.extend(_segment_spans(json.loads(segment["Document"]), None))
            token = page.get("NextToken")
            if not token:
                break
        return sorted(found, key=lambda s: (s.start, s.end))


def _segment_spans(document: dict[str, Any], parent: str | None) -> Iterator[TraceSpan]:
    """A segment (or subsegment) and those nested in it; its OTel attributes are its `metadata`/`annotations`."""
    attributes: dict[str, Any] = {}
    for values in (document.get("metadata") or {}).values():
        if isinstance(values, dict):
            attributes.update({k: v for k, v in values.items() if isinstance(v, str | int | float | bool)})
    attributes.update({k: v for k, v in (document.get("annotations") or {}).items() if v is not None})
    failed = document.get("fault") or document.get("error")
    start = float(document.get("start_time", 0))
    yield TraceSpan(
        span_id=str(document.get("id", "")),
        parent_id=document.get("parent_id") or parent,
        name=str(document.get("name", "")),
        start=datetime.fromtimestamp(start, tz=UTC),
        end=datetime.fromtimestamp(float(document.get("end_time", start)), tz=UTC),
        status="error" if failed else "ok",
        attributes=attributes,
    )
    for child in document.get("subsegments") or []:
        yield from _segment_spans(child, str(document.get("id", "")))
