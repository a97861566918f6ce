"""A job's trace read back (`GET /v1/ops/jobs/{job_id}/trace`, `GET /v1/jobs/{job_id}/trace`).

The trace id is the job's (derived from its correlation id); the spans come through the `TraceReader` port. A
tenant's view drops the operator-only attributes: what names the platform's inside (its code version, functions,
cloud resources and AWS calls' request ids, hosts and URLs), never what says where the job's time went.
"""

from __future__ import annotations

from longhaul.core import correlation
from longhaul.core.auth import Principal
from longhaul.core.contracts import JobTrace, TraceSpan
from longhaul.services import Services

# Attribute keys (or, ending in ".", key prefixes) a tenant never sees.
OPERATOR_ONLY = (
    "longhaul.code_version",
    "longhaul.tenant_id",
    "aws.",
    "rpc.",
    "faas.",
    "cloud.",
    "server.",
    "url.",
    "http.url",
    "net.",
    "network.",
    "db.",
    "messaging.",
    "code.",
)


def operator_only(key: str) -> bool:
    return any(key.startswith(prefix) if prefix.endswith(".") else key == prefix for prefix in OPERATOR_ONLY)


def for_tenant(span: TraceSpan) -> TraceSpan:
    kept = {k: v for k, v in span.attributes.items() if not operator_only(k)}
    return span.model_copy(update={"attributes": kept})


def job_trace(services: Services, principal: Principal, job_id: str, *, operator: bool) -> JobTrace:
    from longhaul.api.jobs import JobService

    job = JobService(services).job(principal, job_id, any_tenant=operator)
    if not job.correlation_id:
        return JobTrace(trace_id="", spans=[])
    trace_id = correlation.trace_id_for(job.correlation_id)
    spans = services.traces.spans(trace_id)
    return JobTrace(trace_id=trace_id, spans=spans if operator else [for_tenant(s) for s in spans])
