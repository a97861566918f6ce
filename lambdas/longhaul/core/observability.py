"""Logger and metrics in one place.

Metrics carry only the dimensions their emitter names (`workflow`, `step`, …), never Powertools' default `service`
dimension: each function has its own service name (`POWERTOOLS_SERVICE_NAME`), and the dashboard and alarms, which
query exact dimension sets, must not depend on which function emitted a metric.

Tracing: see `longhaul.core.tracing` (OpenTelemetry spans, one trace per job) and `longhaul.core.genai` (model calls,
ladder rungs, agent turns and tool calls under the GenAI conventions).

The logger's keys (`append_keys`, `inject_lambda_context(clear_state=True)`) are kept per thread: the local runtime
runs several invocations of one function at once in one interpreter, where one shared set of keys would give a
request's log lines another request's `tenant_id` or `job_id`, or lose them to another's `clear_state`. On AWS a
sandbox runs one invocation at a time, on one thread: the same behaviour as upstream's.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.base import SingleMetric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from longhaul.core.correlation import trace_id_for
from longhaul.core.redaction import scrub


class PerThreadKeysFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter whose keys (`log_format`) belong to the thread that set them.

    A thread starts from the keys the formatter had when `seal()` was called (the service and the defaults the
    `Logger` adds when it is built); what it appends or clears after that is its own.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._threads = threading.local()
        self._template: dict[str, Any] | None = None
        super().__init__(**kwargs)

    @property
    def log_format(self) -> dict[str, Any]:
        own: dict[str, Any] | None = getattr(self._threads, "log_format", None)
        if own is None:
            own = dict(self._template or {})
            self._threads.log_format = own
        return own

    @log_format.setter
    def log_format(self, value: dict[str, Any]) -> None:
        self._threads.log_format = value
        if self._template is None:  # until `seal()`: the constructing thread's keys, which the Logger completes
            self._template = value

    def seal(self) -> None:
        """Fix the keys every thread starts from to the current ones (call once the `Logger` is built)."""
        self._template = dict(self.log_format)

    def serialize(self, log: Any) -> str:
        """Every line goes through `redact` before it is written."""
        return super().serialize(redact(log))


#: Keys whose values never reach a log line: credentials, tokens, signatures, and document or model text.
SECRET_KEYS = frozenset(
    {
        "authorization", "api_key", "apikey", "token", "task_token", "tasktoken", "secret", "secrets",
        "password", "signature", "webhook-signature", "x-api-key", "cookie", "session_token", "current", "previous",
        "text", "prompt", "system", "document", "documents", "content", "body", "response", "answer", "quote",
    }
)  # fmt: skip
#: Secrets recognized by their form wherever they appear in text: the platform's API keys, webhook secrets, bearer
#: tokens, AWS session tokens and Step Functions task tokens (long base64 runs).
SECRET_PATTERNS = (
    re.compile(r"lh_[A-Za-z0-9_]{8,}"),
    re.compile(r"whsec_[A-Za-z0-9+/=]{8,}"),
    re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"[A-Za-z0-9+/=_-]{120,}"),
)
REDACTED = "[redacted]"


def redact(value: Any, key: str | None = None) -> Any:
    """`value` with the values of `SECRET_KEYS` replaced and `SECRET_PATTERNS` masked in every string, and the
    personal data of the kinds a tenant's policy redacts replaced by placeholders while a step of that tenant writes
    (`longhaul.core.redaction.bound`)."""
    if key is not None and key.lower() in SECRET_KEYS and value not in (None, "", [], {}):
        return REDACTED
    if isinstance(value, str):
        for pattern in SECRET_PATTERNS:
            value = pattern.sub(REDACTED, value)
        return scrub(value)
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


#: The keys every log line of a job's work carries (a step's, a lane's, a webhook delivery's), so one search by any of
#: them finds the job's whole story: `trace_id` is the job's trace (`correlation.trace_id_for`), `attempt` the step's
#: (or the delivery's) attempt, `item` a fan-out's item (absent otherwise).
JOB_LOG_KEYS = ("job_id", "trace_id", "correlation_id", "step", "item", "attempt", "workflow_version")
#: The keys of the lines written during a model call (and removed after it): which model, route and prompt.
MODEL_LOG_KEYS = ("model", "route", "prompt_version")


def bind_job(job_id: str | None, correlation_id: str | None, **keys: Any) -> None:
    """Append a job's keys (`JOB_LOG_KEYS`) to every later log line of this invocation: its trace id is derived from
    the correlation id. Keys given as None are left out (Powertools drops them)."""
    trace_id = trace_id_for(correlation_id) if correlation_id else None
    logger.append_keys(job_id=job_id, correlation_id=correlation_id, trace_id=trace_id, **keys)


_formatter = PerThreadKeysFormatter()
logger = Logger(service="longhaul", logger_formatter=_formatter)
_formatter.seal()
NAMESPACE = "Longhaul"
# An empty service (not None, which falls back to POWERTOOLS_SERVICE_NAME) adds no `service` dimension.
NO_SERVICE = ""
metrics = Metrics(namespace=NAMESPACE, service=NO_SERVICE)

# A platform configuration error (e.g. Bedrock model access not enabled); an alarm watches it.
PLATFORM_MISCONFIGURED = "PlatformMisconfigured"
# Seconds a job waited for an admission slot (dimension `sla_class`; 0 when it started at once).
QUEUE_WAIT_METRIC = "QueueWaitSeconds"
# Model usage settled per call, by `workflow` and (separately) by `tenant`: tokens, and USD.
MODEL_TOKENS_METRIC = "ModelTokens"
MODEL_COST_METRIC = "ModelCostUSD"
# Model tokens and dollars by lane (`lane`: on_demand, batch); prompt tokens and those read from a provider's cache
# (`lane`), whose ratio is the cache-read share the dashboard shows.
MODEL_LANE_TOKENS_METRIC = "ModelLaneTokens"
MODEL_LANE_COST_METRIC = "ModelLaneCostUSD"
MODEL_PROMPT_TOKENS_METRIC = "ModelPromptTokens"
MODEL_CACHE_READ_METRIC = "ModelCacheReadTokens"
# A step attempt that failed and will be retried (`workflow`, `step`).
STEP_RETRIES_METRIC = "StepRetries"
# Seconds a review waited for its decision (`workflow`).
REVIEW_WAIT_METRIC = "ReviewWaitSeconds"
# An invalid field of a model's answer (`model`, `route`, `prompt_version`, `field`: the schema's top-level field).
VALIDATION_FAILURES_METRIC = "ValidationFailures"
# Per answer the validation ladder judged (`route`): 1 if it escalated to the stronger route, else 0 (average = rate).
ESCALATIONS_METRIC = "ValidationEscalations"
# Jobs the sweep found with no state change for `LONGHAUL_STUCK_AFTER_MINUTES` (no dimension).
STUCK_JOBS_METRIC = "StuckJobs"
# A tenant's model spend reached its daily allowance (no dimension, for the alarm; and by `tenant`).
ALLOWANCE_REACHED_METRIC = "TenantDailyAllowanceReached"
# Shared route limits (`storage/route_limits.py`): calls that found no room within their bounded wait (count), and how
# long admitted calls waited (seconds); by route.
ROUTE_LIMITED_METRIC = "RouteRateLimited"
ROUTE_WAIT_METRIC = "RouteLimitWaitSeconds"


#: The dimensions a metric may carry, each with few values: CloudWatch keeps (and bills, and the metrics route reads)
#: a metric per dimension set, so a job id, an item or a document name would make one per job or document. Bounded by
#: the code or the deployment's configuration: `workflow`, `step`, `kind` (error kinds), `outcome`, `sla_class`,
#: `provider`, `route`, `state` (a breaker's), `event` (webhook events), `model`, `prompt_version`, `field` (an output
#: schema's top-level field); by the tenants: `tenant`.
BOUNDED_DIMENSIONS = frozenset(
    {"workflow", "step", "kind", "outcome", "sla_class", "provider", "route", "state", "event", "model",
     "prompt_version", "field", "tenant", "lane"}
)  # fmt: skip

#: Where metrics go besides EMF: the local runtime, which has no CloudWatch agent, puts them into its in-memory
#: CloudWatch so the operators' metrics route reads the same numbers there as on AWS. (name, value, unit, dimensions)
MetricSink = Callable[[str, float, str, dict[str, str]], None]
_sinks: list[MetricSink] = []


def add_metric_sink(sink: MetricSink) -> Callable[[], None]:
    """Send every metric to `sink` too; returns a function that removes it."""
    _sinks.append(sink)
    return lambda: _sinks.remove(sink) if sink in _sinks else None


def emit(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count, **dimensions: str) -> None:
    """One CloudWatch metric (EMF) with its own dimensions, written at once (unless metrics are disabled)."""
    for sink in list(_sinks):
        sink(name, float(value), unit.value, dict(dimensions))
    if is_metrics_disabled():  # Powertools' single_metric itself does not look
        return
    metric = SingleMetric(namespace=NAMESPACE, service=NO_SERVICE)
    metric.add_metric(name=name, unit=unit, value=value)
    for key, dimension in dimensions.items():
        metric.add_dimension(name=key, value=dimension)
    # EMF: CloudWatch Logs turns this line into the metric.
    print(json.dumps(metric.serialize_metric_set(), separators=(",", ":")))
