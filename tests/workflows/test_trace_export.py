"""Scenario: a collector named by `OTEL_EXPORTER_OTLP_ENDPOINT` receives a local job's spans. A tiny HTTP server
stands for the collector; what it receives on `/v1/traces` decodes (OTLP protobuf) to the spans of the job's trace,
the same span ids as `GET /v1/ops/jobs/{id}/trace` answers."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from local import traces
from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core.correlation import trace_id_for
from tests.unit.receiver import Received, receiver
from tests.workflows.conftest import Client


def exported_spans(received: list[Received]) -> dict[str, set[str]]:
    """Trace id -> the span ids the collector received."""
    found: dict[str, set[str]] = {}
    for request in received:
        assert request.path == traces.OTLP_TRACES_PATH
        assert request.headers["content-type"] == "application/x-protobuf"
        batch = ExportTraceServiceRequest.FromString(request.body)
        for resource in batch.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    found.setdefault(span.trace_id.hex(), set()).add(span.span_id.hex())
    return found


def test_a_collector_receives_the_same_spans_as_the_trace_route(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    ops = Client(platform, "ops")
    with receiver(status=200) as collector:
        stop = traces.export_to(collector.origin)
        try:
            job_id = alpha.submit(sample_request, **{"X-Request-Id": "trace-export-1"})
            assert alpha.wait(job_id)["status"] == "completed"
            trace_id = trace_id_for("trace-export-1")

            def same() -> set[str] | None:
                answered = {s["span_id"] for s in ops.get(f"/v1/ops/jobs/{job_id}/trace").json()["spans"]}
                received = exported_spans(collector.received).get(trace_id, set())
                return answered if answered and answered == received else None

            spans = wait_until(same, timeout=30, what="the collector to receive the job's spans")
        finally:
            stop()
    assert len(spans) > 10  # the submission, the queue wait, every step
