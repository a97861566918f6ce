"""Spans to AWS X-Ray over OTLP: the SDK's protobuf encoding, signed with SigV4 (`xray`) and sent by the Lambda
runtime's own botocore, so the function's asset ships no HTTP client and no OTLP/HTTP exporter of its own.

X-Ray's OTLP endpoint (`https://xray.<region>.amazonaws.com/v1/traces`) takes OTLP/HTTP protobuf; the function's
role needs `xray:PutSpans` (and `xray:PutSpansForIndexing`, `xray:PutTraceSegments` for the service's own segments).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

LOG = logging.getLogger(__name__)
#: Set by Lambda: the region whose X-Ray endpoint receives the spans.
REGION_ENV = "AWS_REGION"
TIMEOUT_SECONDS = 5


class XRayOtlpExporter(SpanExporter):
    def __init__(self, region: str, session: Any = None) -> None:
        self.endpoint = f"https://xray.{region}.amazonaws.com/v1/traces"
        self.region = region
        self._session = session

    @classmethod
    def from_environment(cls) -> XRayOtlpExporter:
        return cls(os.environ.get(REGION_ENV, "us-east-1"))

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.httpsession import URLLib3Session
        from botocore.session import get_session
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        body = encode_spans(spans).SerializeToString()
        session = self._session or get_session()
        request = AWSRequest(
            method="POST", url=self.endpoint, data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        credentials = session.get_credentials()
        if credentials is None:
            LOG.warning("no credentials to sign the spans with: %d spans dropped", len(spans))
            return SpanExportResult.FAILURE
        SigV4Auth(credentials.get_frozen_credentials(), "xray", self.region).add_auth(request)
        try:
            response = URLLib3Session(timeout=TIMEOUT_SECONDS).send(request.prepare())
        except Exception as error:  # an export never fails the invocation
            LOG.warning("spans not exported to X-Ray: %s", type(error).__name__)
            return SpanExportResult.FAILURE
        if response.status_code >= 300:
            LOG.warning("X-Ray refused %d spans: HTTP %d", len(spans), response.status_code)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
