"""One trace per job: the ids derived from the correlation id, the spans of a job's invocations joined under its
root, the bounded local store, the tenant's view and the timing split."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from opentelemetry import trace

from longhaul.adapters.traces import LocalTraceStore, xray_trace_id
from longhaul.api.traces import for_tenant, operator_only
from longhaul.core import correlation, tracing
from longhaul.core.contracts import EventView, TraceSpan
from longhaul.core.timing import job_timing

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STORE = LocalTraceStore(max_spans=50, max_traces=20)
tracing.install([STORE], reader=STORE)


def test_the_trace_id_is_the_first_128_bits_of_the_sha256_of_the_correlation_id() -> None:
    cid = "req-42"
    assert correlation.trace_id_for(cid) == hashlib.sha256(b"req-42").hexdigest()[:32]
    assert xray_trace_id("0123456789abcdef0123456789abcdef") == "1-01234567-89abcdef0123456789abcdef"


def test_every_invocation_of_a_job_joins_its_trace_under_the_submission() -> None:
    cid = correlation.new_id()
    with tracing.job_trace(cid, "submit job", root=True), tracing.span("submission transaction"):
        pass
    with tracing.job_trace(cid, "invoke step"), tracing.span("step extract", {tracing.ATTEMPT: 1}):
        tracing.record_span("queue wait", T0, T0 + timedelta(seconds=3))
    with tracing.job_trace(cid, "deliver webhook"), tracing.span("webhook delivery"):
        pass
    spans = STORE.spans(correlation.trace_id_for(cid))
    names = {s.name for s in spans}
    assert {"submit job", "submission transaction", "invoke step", "step extract", "queue wait"} <= names
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None]
    assert [r.name for r in roots] == ["submit job"]
    assert roots[0].span_id == format(tracing.root_span_id_for(cid), "016x")
    assert all(s.parent_id in ids for s in spans if s.parent_id is not None), "an orphaned span"
    step = next(s for s in spans if s.name == "step extract")
    assert step.attributes[tracing.ATTEMPT] == 1  # the attributes given at the start are kept
    wait = next(s for s in spans if s.name == "queue wait")
    assert (wait.end - wait.start).total_seconds() == 3


def test_a_failure_is_an_error_span_with_its_class() -> None:
    cid = correlation.new_id()
    try:
        with tracing.job_trace(cid, "invoke step"), tracing.span("step x"):
            raise KeyError("secret text")
    except KeyError:
        pass
    failed = [s for s in STORE.spans(correlation.trace_id_for(cid)) if s.status == "error"]
    assert {s.name for s in failed} == {"step x", "invoke step"}
    assert all(s.attributes["error.type"] == "KeyError" for s in failed)
    assert not any("secret text" in str(s.attributes) for s in failed)


def test_nothing_is_recorded_outside_a_job_or_with_tracing_off(monkeypatch) -> None:
    before = len(STORE.trace_ids())
    with trace.get_tracer(tracing.TRACER_NAME).start_as_current_span("a schedule's poll"):
        pass
    monkeypatch.setenv(tracing.TRACING_ENV, "off")
    with tracing.job_trace(correlation.new_id(), "invoke step") as span:
        assert span is None
    assert len(STORE.trace_ids()) == before


def test_the_store_is_bounded_per_trace_and_in_traces() -> None:
    store = LocalTraceStore(max_spans=3, max_traces=2)
    provider_spans = []
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("root") as root:
            for _ in range(5):
                with tracer.start_as_current_span("child"):
                    pass
        provider_spans.append(root)
    for span in provider_spans:  # already ended: feed the children's traces again through on_end
        store.on_end(span)
    assert len(store.trace_ids()) == 2
    store2 = LocalTraceStore(max_spans=3, max_traces=5)
    with tracer.start_as_current_span("r") as r:
        pass
    for _ in range(5):
        store2.on_end(r)
    assert len(store2.spans(format(r.get_span_context().trace_id, "032x"))) == 3
    assert store2.dropped == 2


def test_a_tenant_sees_no_operator_only_attribute() -> None:
    span = TraceSpan(
        span_id="1" * 16,
        parent_id=None,
        name="DynamoDB.Query",
        start=T0,
        end=T0,
        status="ok",
        attributes={"aws.request_id": "X", "longhaul.code_version": "abc", "longhaul.step": "s", "rpc.method": "Q"},
    )
    assert for_tenant(span).attributes == {"longhaul.step": "s"}
    assert operator_only("cloud.region") and not operator_only("gen_ai.request.model")


def _event(seq: int, kind: str, seconds: float, **fields: object) -> EventView:
    return EventView(seq=seq, type=kind, at=T0 + timedelta(seconds=seconds), **fields)  # type: ignore[arg-type]


def test_the_timing_splits_the_wall_time() -> None:
    events = [
        _event(1, "job_queued", 0),
        _event(2, "step_started", 5, step="a", attempt=1),
        _event(3, "step_attempt_failed", 7, step="a", attempt=1, detail={"kind": "transient"}),
        _event(4, "job_retrying", 7, step="a"),
        _event(5, "step_started", 10, step="a", attempt=2),
        _event(6, "step_finished", 12, step="a", attempt=2),
        _event(7, "step_started", 12, step="b", item=0, attempt=1),
        _event(8, "step_started", 12, step="b", item=1, attempt=1),
        _event(9, "step_finished", 15, step="b", item=0, attempt=1),
        _event(10, "step_finished", 16, step="b", item=1, attempt=1),
        _event(11, "review_requested", 16, step="review"),
        _event(12, "review_decided", 40, step="review"),
    ]
    timing = job_timing(
        events, created_at=T0, started_at=T0 + timedelta(seconds=5), finished_at=T0 + timedelta(seconds=41), now=T0
    )
    assert timing.queue_wait_seconds == 5
    assert timing.executing_seconds == 2 + 2 + 4  # the two items overlap: wall time
    assert timing.backoff_seconds == 3
    assert timing.review_wait_seconds == 24
    assert timing.total_seconds == 41


def test_a_retry_after_a_providers_failure_is_provider_wait_not_backoff() -> None:
    events = [
        _event(1, "step_started", 5, step="a", attempt=1),
        _event(2, "step_attempt_failed", 6, step="a", attempt=1, detail={"kind": "upstream-unavailable"}),
        _event(3, "job_retrying", 6, step="a"),
        _event(4, "step_started", 9, step="a", attempt=2),
        _event(5, "step_finished", 10, step="a", attempt=2),
        _event(6, "step_started", 10, step="b", item=3, attempt=1),
        _event(7, "step_attempt_failed", 11, step="b", item=3, attempt=1, detail={"kind": "rate-limited"}),
        _event(8, "step_started", 15, step="b", item=3, attempt=2),
        _event(9, "step_attempt_failed", 16, step="b", item=3, attempt=2, detail={"kind": "transient"}),
        _event(10, "job_retrying", 16, step="b", item=3),
        _event(11, "step_started", 18, step="b", item=3, attempt=3),
        _event(12, "step_finished", 19, step="b", item=3, attempt=3),
        _event(13, "step_started", 19, step="c", attempt=1),
        _event(14, "step_attempt_failed", 20, step="c", attempt=1, detail={"kind": "rate-limited"}),
    ]
    timing = job_timing(
        events, created_at=T0, started_at=T0 + timedelta(seconds=5), finished_at=None, now=T0 + timedelta(seconds=22)
    )
    assert timing.provider_wait_seconds == 3 + 4 + 2  # an outage, a rate limit, and one still waited on now
    assert timing.backoff_seconds == 2  # the transient failure's retry only
    assert timing.executing_seconds == 1 + 1 + 1 + 1 + 1 + 1


def test_the_local_platform_exports_to_the_collector_its_environment_names(monkeypatch) -> None:
    from local import traces

    named: list[str] = []
    monkeypatch.setattr(traces, "_store", None)
    monkeypatch.setattr(traces, "export_to", named.append)
    traces.install({traces.OTLP_ENDPOINT_ENV: "http://127.0.0.1:4318"})
    monkeypatch.setattr(traces, "_store", None)
    traces.install({})
    assert named == ["http://127.0.0.1:4318"]
