"""Logger and metrics in one place.

No X-Ray SDK tracer: the functions and state machines run with X-Ray active tracing, which records each
invocation without it, and the SDK (the largest cold-start cost) would bundle a second botocore.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

logger = Logger(service="longhaul")
NAMESPACE = "Longhaul"
metrics = Metrics(namespace=NAMESPACE, service="longhaul")


def emit(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count, **dimensions: str) -> None:
    """One CloudWatch metric (EMF) with its own dimensions, written at once (unless metrics are disabled)."""
    if is_metrics_disabled():  # single_metric itself does not look
        return
    with single_metric(name=name, unit=unit, value=value, namespace=NAMESPACE) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(name=key, value=dimension)
