"""Logger and metrics in one place.

Metrics carry only the dimensions their emitter names (`workflow`, `step`, …), never Powertools' default `service`
dimension: each function has its own service name (`POWERTOOLS_SERVICE_NAME`), and the dashboard and alarms, which
query exact dimension sets, must not depend on which function emitted a metric.

No X-Ray SDK tracer: the functions and state machines run with X-Ray active tracing, which records each
invocation without it, and the SDK (the largest cold-start cost) would bundle a second botocore.
"""

from __future__ import annotations

import json

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.base import SingleMetric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

logger = Logger(service="longhaul")
NAMESPACE = "Longhaul"
# An empty service (not None, which falls back to POWERTOOLS_SERVICE_NAME) adds no `service` dimension.
NO_SERVICE = ""
metrics = Metrics(namespace=NAMESPACE, service=NO_SERVICE)

# A platform configuration error (e.g. Bedrock model access not enabled); an alarm watches it.
PLATFORM_MISCONFIGURED = "PlatformMisconfigured"
# Seconds a job waited for an admission slot (dimension `sla_class`; 0 when it started at once).
QUEUE_WAIT_METRIC = "QueueWaitSeconds"


def emit(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count, **dimensions: str) -> None:
    """One CloudWatch metric (EMF) with its own dimensions, written at once (unless metrics are disabled)."""
    if is_metrics_disabled():  # Powertools' single_metric itself does not look
        return
    metric = SingleMetric(namespace=NAMESPACE, service=NO_SERVICE)
    metric.add_metric(name=name, unit=unit, value=value)
    for key, dimension in dimensions.items():
        metric.add_dimension(name=key, value=dimension)
    # EMF: CloudWatch Logs turns this line into the metric.
    print(json.dumps(metric.serialize_metric_set(), separators=(",", ":")))
