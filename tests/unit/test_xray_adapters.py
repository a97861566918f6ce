"""The AWS side of tracing: a trace read back from X-Ray (`XRayTraces`, against moto's X-Ray: segments put with
PutTraceSegments, read with BatchGetTraces) and spans sent to X-Ray's OTLP endpoint (`XRayOtlpExporter`: the
request it signs and sends, received by a local HTTP server standing in for the endpoint)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import botocore.session
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from longhaul.adapters.traces import XRayTraces, xray_trace_id
from longhaul.core.otlp_xray import XRayOtlpExporter

TRACE = "5f8e1a2b0123456789abcdef01234567"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def segment(**fields: Any) -> str:
    return json.dumps({"trace_id": xray_trace_id(TRACE), **fields})


# ------------------------------------------------------------------------------------- XRayTraces (moto's X-Ray)


def test_a_trace_read_back_from_xray_is_every_segment_and_subsegment_as_a_span(aws: None) -> None:
    # Given two functions' segments of one trace in X-Ray: the API's, with a nested subsegment that failed, and a
    # step's, whose parent is the API's transaction subsegment; and a segment of another trace
    client = boto3.client("xray", region_name="us-east-1")
    api = segment(
        id="a000000000000001",
        name="submit job",
        start_time=T0,
        end_time=T0 + 0.5,
        annotations={"longhaul_job_id": "job_1"},
        metadata={"default": {"longhaul.workflow": "document-analysis", "nested": {"not": "a value"}}},
        subsegments=[
            {
                "id": "a000000000000002",
                "name": "submission transaction",
                "start_time": T0 + 0.1,
                "end_time": T0 + 0.3,
                "metadata": {"default": {"longhaul.try": 1}},
                "subsegments": [
                    {
                        "id": "a000000000000003",
                        "name": "DynamoDB.TransactWriteItems",
                        "start_time": T0 + 0.15,
                        "end_time": T0 + 0.25,
                        "fault": True,
                    }
                ],
            }
        ],
    )
    step = segment(
        id="b000000000000001",
        parent_id="a000000000000002",
        name="step extract",
        start_time=T0 + 2,
        end_time=T0 + 3,
        metadata={"default": {"longhaul.attempt": 2, "longhaul.step": "extract"}},
    )
    other = json.dumps(
        {"trace_id": xray_trace_id("0" * 32), "id": "c000000000000001", "name": "x", "start_time": T0, "end_time": T0}
    )
    answer = client.put_trace_segments(TraceSegmentDocuments=[step, api, other])
    assert answer["UnprocessedTraceSegments"] == []

    # When the trace is read back
    spans = XRayTraces(client).spans(TRACE)

    # Then each segment and subsegment is a span, in start order, with its parent, status, times and attributes
    assert [(s.name, s.span_id, s.parent_id, s.status) for s in spans] == [
        ("submit job", "a000000000000001", None, "ok"),
        ("submission transaction", "a000000000000002", "a000000000000001", "ok"),
        ("DynamoDB.TransactWriteItems", "a000000000000003", "a000000000000002", "error"),
        ("step extract", "b000000000000001", "a000000000000002", "ok"),
    ]
    root, transaction, _, step_span = spans
    assert root.attributes == {"longhaul.workflow": "document-analysis", "longhaul_job_id": "job_1"}
    assert transaction.attributes == {"longhaul.try": 1}
    assert step_span.attributes == {"longhaul.attempt": 2, "longhaul.step": "extract"}
    assert root.start == datetime(2026, 1, 1, tzinfo=UTC)
    assert (step_span.end - step_span.start).total_seconds() == pytest.approx(1.0)


def test_a_trace_xray_does_not_have_is_no_span(aws: None) -> None:
    assert XRayTraces(boto3.client("xray", region_name="us-east-1")).spans(TRACE) == []


# ------------------------------------------------------------------------ XRayOtlpExporter (a local endpoint)


class Endpoint(BaseHTTPRequestHandler):
    """Stands in for X-Ray's OTLP endpoint: keeps each request and answers `status`."""

    received: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.received.append((self.path, dict(self.headers.items()), body))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def endpoint() -> Iterator[tuple[str, type[Endpoint]]]:
    handler = type("Received", (Endpoint,), {"received": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", handler
    finally:
        server.shutdown()
        server.server_close()


def finished_spans() -> list[ReadableSpan]:
    """A parent and a failed child span, finished by the SDK."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("longhaul")
    parent = tracer.start_as_current_span("invoke step", attributes={"longhaul.job_id": "job_1"})
    with parent, tracer.start_as_current_span("chat primary", attributes={"gen_ai.usage.input_tokens": 12}) as child:
        child.set_status(Status(StatusCode.ERROR))
    return list(memory.get_finished_spans())


def exporter_to(url: str, credentials: Credentials | None) -> XRayOtlpExporter:
    session = botocore.session.Session()
    session.get_credentials = lambda: credentials  # type: ignore[method-assign]
    exporter = XRayOtlpExporter("eu-west-1", session=session)
    assert exporter.endpoint == "https://xray.eu-west-1.amazonaws.com/v1/traces"
    exporter.endpoint = url  # the local stand-in, over plain HTTP
    return exporter


def test_spans_reach_the_otlp_endpoint_as_protobuf_signed_with_sigv4_for_xray(endpoint) -> None:
    url, received = endpoint
    credentials = Credentials("AKIDEXAMPLE", "secret-example", "session-token")
    spans = finished_spans()

    assert exporter_to(url, credentials).export(spans) is SpanExportResult.SUCCESS

    [(path, headers, body)] = received.received
    assert path == "/v1/traces"
    assert headers["Content-Type"] == "application/x-protobuf"
    authorization = headers["Authorization"]
    date = headers["X-Amz-Date"]
    assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{date[:8]}/eu-west-1/xray/aws4_request,")
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "content-type", "x-amz-date", "x-amz-security-token"} <= set(signed)
    assert headers["X-Amz-Security-Token"] == "session-token"
    # the signature is SigV4's over this very request (method, path, signed headers, body)
    kept = {k: v for k, v in headers.items() if k.lower() in signed and k.lower() != "host"}  # host: from the URL
    request = AWSRequest(method="POST", url=url, data=body, headers=kept)
    request.context["timestamp"] = date
    signer = SigV4Auth(credentials.get_frozen_credentials(), "xray", "eu-west-1")
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    assert authorization.endswith(f"Signature={expected}")
    # the body decodes to the spans
    decoded = ExportTraceServiceRequest.FromString(body)
    sent = [s for rs in decoded.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(s.name for s in sent) == ["chat primary", "invoke step"]
    by_name = {s.name: s for s in sent}
    assert by_name["chat primary"].trace_id == spans[0].context.trace_id.to_bytes(16, "big")
    assert by_name["chat primary"].parent_span_id == by_name["invoke step"].span_id
    assert by_name["chat primary"].status.code == 2  # STATUS_CODE_ERROR
    tokens = {a.key: a.value.int_value for a in by_name["chat primary"].attributes}
    assert tokens == {"gen_ai.usage.input_tokens": 12}


def test_an_export_the_endpoint_refuses_fails_without_raising(endpoint) -> None:
    url, received = endpoint
    received.status = 403
    exporter = exporter_to(url, Credentials("AKIDEXAMPLE", "secret-example"))
    assert exporter.export(finished_spans()) is SpanExportResult.FAILURE
    assert len(received.received) == 1


def test_without_credentials_nothing_is_sent(endpoint) -> None:
    url, received = endpoint
    assert exporter_to(url, None).export(finished_spans()) is SpanExportResult.FAILURE
    assert received.received == []


def test_an_endpoint_that_cannot_be_reached_fails_the_export_not_the_invocation() -> None:
    exporter = exporter_to("http://127.0.0.1:9/v1/traces", Credentials("AKIDEXAMPLE", "secret-example"))
    assert exporter.export(finished_spans()) is SpanExportResult.FAILURE
