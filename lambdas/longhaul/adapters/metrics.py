"""The platform's CloudWatch metrics read back (`operations.metrics`): every series of the namespace in a window.

On AWS the functions' EMF lines are the metrics; locally the runtime puts the same metrics into its in-memory
CloudWatch (`observability.add_metric_sink`), so this adapter reads the same numbers in both places.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from longhaul.core.contracts import MetricSeries
from longhaul.core.observability import NAMESPACE


class CloudWatchMetrics:
    def __init__(self, client: Any) -> None:
        self._client = client

    def series(self, start: datetime, end: datetime) -> list[MetricSeries]:
        found: list[MetricSeries] = []
        # CloudWatch's windows are whole seconds (moto drops the fraction): a point put in `end`'s own second is in
        # the window only if the query ends at the next one.
        end = end.replace(microsecond=0) + timedelta(seconds=1)
        for metric in self._metrics():
            dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            period = max(60, int((end - start).total_seconds()) // 60 * 60)
            points = self._client.get_metric_statistics(
                Namespace=NAMESPACE,
                MetricName=metric["MetricName"],
                Dimensions=metric.get("Dimensions", []),
                StartTime=start,
                EndTime=end,
                Period=period,
                Statistics=["Sum", "SampleCount", "Maximum", "Average"],
            ).get("Datapoints", [])
            if not points:
                continue
            total = sum(float(p.get("Sum", 0)) for p in points)
            count = sum(float(p.get("SampleCount", 0)) for p in points)
            found.append(
                MetricSeries(
                    name=metric["MetricName"],
                    dimensions=dimensions,
                    sum=round(total, 6),
                    count=int(count),
                    maximum=round(max(float(p.get("Maximum", 0)) for p in points), 6),
                    average=round(total / count, 6) if count else 0.0,
                )
            )
        return sorted(found, key=lambda s: (s.name, sorted(s.dimensions.items())))

    def _metrics(self) -> list[dict[str, Any]]:
        metrics: list[dict[str, Any]] = []
        token = None
        while True:
            page = self._client.list_metrics(Namespace=NAMESPACE, **({"NextToken": token} if token else {}))
            metrics.extend(page.get("Metrics", []))
            token = page.get("NextToken")
            if not token:
                return metrics
