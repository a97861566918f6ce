"""One trace per job: OpenTelemetry spans from the submission to the last webhook, under the job's trace id.

The trace id is derived from the job's correlation id (`correlation.trace_id_for`), and the job's root span id from
it too (`root_span_id_for`): the submission opens the root span with that id, and every later invocation of the job
(a step, an item, a retry, a review decision, the dispatcher, a webhook delivery, a replay) makes the same root its
remote parent with `job_trace(...)`, so its spans join the trace without any id travelling in the execution's state.
Inside, code opens spans with the plain OTel API (`trace.get_tracer(TRACER_NAME).start_as_current_span(...)`); span
names and attribute keys come from the semantic-conventions package where it has them.

The SDK is imported on the first span of an invocation, never with a handler's module (the API function's cold start:
`bench/cold_start.py`). Where spans go:
- on AWS (a real Lambda sandbox), a batch processor exports OTLP to X-Ray's endpoint, signed with SigV4 by the
  runtime's botocore (`longhaul.adapters.traces.XRayOtlpExporter`), flushed when the invocation's outermost
  `job_trace` ends (a frozen sandbox sends nothing);
- locally, the runtime installs its processors (`install`): a bounded in-memory store the trace routes read, and an
  OTLP/HTTP exporter to `OTEL_EXPORTER_OTLP_ENDPOINT` when that is set.
`LONGHAUL_TRACING=off` turns spans off (`job_trace` then opens nothing). Content (prompts, documents, model output)
is never an attribute unless `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true` (`capture_content`).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from longhaul.core import correlation
from longhaul.core.settings import environ

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import Sampler
    from opentelemetry.trace import Span

#: `off` turns the platform's spans off (every function and the local runtime); anything else, or unset, keeps them.
TRACING_ENV = "LONGHAUL_TRACING"
#: `true` lets spans hold content (prompts, documents, model output), as the GenAI conventions name the switch; off by
#: default, and the platform's own spans never hold any.
CONTENT_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Set by Lambda when the invocation is traced by X-Ray's active tracing: its trace header (a dead letter names it
#: when the failure happened outside any job's trace).
TRACE_HEADER_ENV = "_X_AMZN_TRACE_ID"
#: Set by Lambda: the function's name (on AWS, with no local runtime's processors installed, spans go to X-Ray).
FUNCTION_NAME_ENV = "AWS_LAMBDA_FUNCTION_NAME"
#: The one tracer name every span of the platform is opened with.
TRACER_NAME = "longhaul"
SERVICE_NAME = "longhaul"
# Attribute keys of the platform's own (no convention names them).
JOB_ID = "longhaul.job_id"
TENANT_ID = "longhaul.tenant_id"
WORKFLOW = "longhaul.workflow"
WORKFLOW_VERSION = "longhaul.workflow_version"
STEP = "longhaul.step"
ITEM = "longhaul.item"
ATTEMPT = "longhaul.attempt"
SLA_CLASS = "longhaul.sla_class"
CORRELATION_ID = "longhaul.correlation_id"
CODE_VERSION = "longhaul.code_version"

_lock = threading.Lock()
_provider: TracerProvider | None = None
_installed = False  # the local runtime's processors: no X-Ray export
_reader: Any = None  # the local runtime's span store, read by the trace routes
_instrumented = False
_root_ids: ContextVar[tuple[int, int] | None] = ContextVar("longhaul_root_ids", default=None)
_depth: ContextVar[int] = ContextVar("longhaul_trace_depth", default=0)


def enabled() -> bool:
    value = environ().get(TRACING_ENV) or os.environ.get(TRACING_ENV, "")
    return value.strip().lower() != "off"


def capture_content() -> bool:
    """Whether spans may hold content (prompts, documents, model output): off unless set to `true`."""
    return environ().get(CONTENT_CAPTURE_ENV, "").strip().lower() == "true"


def root_span_id_for(correlation_id: str) -> int:
    """The job's root span id: the next 64 bits of the SHA-256 whose first 128 are the trace id (never 0)."""
    value = int(hashlib.sha256(correlation_id.encode()).hexdigest()[32:48], 16)
    return value or 1


def trace_id_int(correlation_id: str) -> int:
    return int(correlation.trace_id_for(correlation_id), 16)


def provider() -> TracerProvider:
    """The process's tracer provider (the global one), built on first use; on AWS with its X-Ray export."""
    global _provider
    if _provider is not None:
        return _provider
    with _lock:
        if _provider is None:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.semconv.attributes.service_attributes import SERVICE_NAME as SERVICE

            built = TracerProvider(
                resource=Resource.create({SERVICE: SERVICE_NAME}),
                id_generator=cast("IdGenerator", _JobIds()),
                sampler=cast("Sampler", _JobSampler()),
            )
            trace.set_tracer_provider(built)
            _provider = built
            if os.environ.get(FUNCTION_NAME_ENV):  # a real Lambda sandbox (the local runtime never sets os.environ)
                _export_to_xray(built)
            _instrument_botocore()
    return _provider


def install(processors: Sequence[SpanProcessor], *, reader: Any = None) -> None:
    """The local runtime's processors (its span store, an OTLP exporter), added to the process's provider; `reader`:
    the store the trace routes read (`installed_reader`)."""
    global _installed, _reader
    built = provider()
    with _lock:
        for processor in processors:
            built.add_span_processor(processor)
        _installed = True
        _reader = reader if reader is not None else _reader


def installed_reader() -> Any:
    """The local runtime's span store (a `TraceReader`), None on AWS."""
    return _reader


def flush() -> None:
    if _provider is not None:
        _provider.force_flush()


@contextmanager
def job_trace(
    correlation_id: str | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    root: bool = False,
    links: Sequence[str] = (),
) -> Iterator[Span | None]:
    """Make the job's trace current and open the span `name` in it: the job's root span when `root` (the
    submission), else a child of the root (or of the span current now, when it is in the same trace). `links` are
    correlation ids of other jobs whose roots this span links to (a replay's original). Without a correlation id, or
    with tracing off, nothing is opened (the block gets None)."""
    if not correlation_id or not enabled():
        yield None
        return
    from opentelemetry import context, trace

    provider()
    trace_id = trace_id_int(correlation_id)
    root_id = root_span_id_for(correlation_id)
    token = None
    if root:  # a new trace: its ids are the job's (`_JobIds`), whatever is current
        token = context.attach(context.Context())
    elif trace.get_current_span().get_span_context().trace_id != trace_id:
        parent = trace.SpanContext(trace_id, root_id, is_remote=True, trace_flags=trace.TraceFlags(1))
        token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(parent)))
    ids_token = _root_ids.set((trace_id, root_id) if root else None)
    depth_token = _depth.set(_depth.get() + 1)
    span_links = [
        trace.Link(
            trace.SpanContext(trace_id_int(other), root_span_id_for(other), is_remote=True), {CORRELATION_ID: other}
        )
        for other in links
    ]
    try:
        with _tracer().start_as_current_span(
            name,
            attributes={CORRELATION_ID: correlation_id, **_clean(attributes or {})},
            links=span_links,
            record_exception=False,
            set_status_on_exception=False,
        ) as opened:
            try:
                yield opened
            except BaseException as error:
                fail(opened, error)
                raise
    finally:
        _depth.reset(depth_token)
        _root_ids.reset(ids_token)
        if token is not None:
            context.detach(token)
        if _depth.get() == 0 and not _installed and os.environ.get(FUNCTION_NAME_ENV):
            flush()  # the sandbox may be frozen once the invocation returns


def record_span(
    name: str,
    start: datetime,
    end: datetime,
    attributes: Mapping[str, Any] | None = None,
    *,
    error: str | None = None,
) -> None:
    """A span of something that happened between two recorded times (a queue wait, a review wait): opened and closed
    now, with those times, under the current span. `error`: the error class, for a wait that ended in a failure."""
    if not enabled():
        return

    span = _tracer().start_span(name, attributes=_clean(attributes or {}), start_time=_nanos(start))
    if error is not None:
        fail(span, error)
    span.end(end_time=max(_nanos(end), _nanos(start)))


def fail(span: Any, error: BaseException | str) -> None:
    """Span status ERROR with the error's class (`error.type`) and its message only when it is not content."""
    from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
    from opentelemetry.trace import Status, StatusCode

    kind = error if isinstance(error, str) else type(error).__name__
    span.set_attribute(ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR, kind))


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A child span of the current one, its status ERROR (with the error class) when the block raises; a no-op when
    tracing is off or no job's trace is current."""
    if not enabled():
        yield None
        return
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        yield None
        return
    with _tracer().start_as_current_span(
        name, attributes=_clean(attributes or {}), record_exception=False, set_status_on_exception=False
    ) as opened:
        try:
            yield opened
        except BaseException as error:
            fail(opened, error)
            raise


def current_trace_id() -> str | None:
    """The trace id of the current span (32 hex), None outside a trace."""
    if not enabled():
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def _tracer() -> Any:

    return provider().get_tracer(TRACER_NAME)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


def _nanos(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _export_to_xray(built: TracerProvider) -> None:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from longhaul.core.otlp_xray import XRayOtlpExporter

    built.add_span_processor(BatchSpanProcessor(XRayOtlpExporter.from_environment()))


def _instrument_botocore() -> None:
    """Every AWS call of the platform's clients is a span (the maintained instrumentation, once per process)."""
    global _instrumented
    if _instrumented:
        return
    _instrumented = True
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor

    BotocoreInstrumentor().instrument(tracer_provider=_provider)  # type: ignore[no-untyped-call]


class _JobSampler:
    """Spans of a job's trace only: a span with a parent follows it; a new trace only for a job's root span (an AWS
    call outside any job's work, such as a schedule's poll, records nothing)."""

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> Any:
        from opentelemetry import trace
        from opentelemetry.sdk.trace.sampling import Decision, SamplingResult

        parent = trace.get_current_span(parent_context).get_span_context()
        keep = parent.trace_flags.sampled if parent.is_valid else _root_ids.get() is not None
        # The SDK gives a span the attributes its sampler's result holds: the span's own.
        return SamplingResult(Decision.RECORD_AND_SAMPLE if keep else Decision.DROP, attributes if keep else None)

    def get_description(self) -> str:
        return "JobSampler"


class _JobIds:
    """The SDK's random ids, except the job's root span, whose id is derived (`root_span_id_for`)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        ids = _root_ids.get()
        if ids is not None:
            _root_ids.set(None)  # only the root span itself: the spans under it get random ids
            return ids[1]
        return self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return False  # a job's trace id is derived, not random

    def generate_trace_id(self) -> int:
        ids = _root_ids.get()
        return ids[0] if ids is not None else self._random.generate_trace_id()
