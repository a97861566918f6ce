"""The platform's CloudWatch metrics read back (`operations.metrics`): every series of the namespace in a window.

On AWS the functions' EMF lines are the metrics; locally the runtime puts the same metrics into its in-memory
CloudWatch (`observability.add_metric_sink`), so this adapter reads the same numbers in both places.

A series is a metric: its name and its whole dimension set. The metrics are listed once (`ListMetrics`, paged), and
read in `GetMetricData` requests of up to 500 queries, one query per metric and statistic, its period the whole
window: one value each, whatever the number of data points behind it. The work grows with the number of metrics
(bounded: the emitters' dimensions are bounded) and at most `limit` of them are read.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from longhaul.core.contracts import MetricSeries
from longhaul.core.observability import NAMESPACE
from longhaul.core.ports import MetricsRead

#: The statistics read per metric (the average is their quotient).
STATISTICS = ("Sum", "SampleCount", "Maximum")
#: `GetMetricData`'s limit of queries in one request.
QUERIES_PER_REQUEST = 500

Dimensions = tuple[tuple[str, str], ...]


class CloudWatchMetrics:
    def __init__(self, client: Any) -> None:
        self._client = client

    def series(self, start: datetime, end: datetime, *, name: str | None = None, limit: int) -> MetricsRead:
        # CloudWatch's windows are whole seconds (moto drops the fraction): a point put in `end`'s own second is in
        # the window only if the query ends at the next one.
        end = end.replace(microsecond=0) + timedelta(seconds=1)
        listed = self._metrics(name)
        metrics = listed[:limit]
        # One period over the whole window (a multiple of 60 s, as CloudWatch requires): one value per query.
        period = max(60, -(-int((end - start).total_seconds()) // 60) * 60)
        queries = [
            {
                "Id": f"m{n}_{statistic.lower()}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": NAMESPACE,
                        "MetricName": metric_name,
                        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions],
                    },
                    "Period": period,
                    "Stat": statistic,
                },
            }
            for n, (metric_name, dimensions) in enumerate(metrics)
            for statistic in STATISTICS
        ]
        values: dict[str, list[float]] = {}
        for first in range(0, len(queries), QUERIES_PER_REQUEST):
            values.update(self._values(queries[first : first + QUERIES_PER_REQUEST], start, end))
        found = []
        for n, (metric_name, dimensions) in enumerate(metrics):
            sums, counts, maxima = (values.get(f"m{n}_{statistic.lower()}", []) for statistic in STATISTICS)
            count = sum(counts)
            if not count:
                continue
            total = sum(sums)
            found.append(
                MetricSeries(
                    name=metric_name,
                    dimensions=dict(dimensions),
                    sum=round(total, 6),
                    count=int(count),
                    maximum=round(max(maxima, default=0.0), 6),
                    average=round(total / count, 6),
                )
            )
        return MetricsRead(series=found, truncated=len(listed) > limit)

    def _values(self, queries: list[dict[str, Any]], start: datetime, end: datetime) -> dict[str, list[float]]:
        values: dict[str, list[float]] = {}
        token = None
        while True:
            page = self._client.get_metric_data(
                MetricDataQueries=queries,
                StartTime=start,
                EndTime=end,
                ScanBy="TimestampAscending",
                **({"NextToken": token} if token else {}),
            )
            for result in page.get("MetricDataResults", []):
                values.setdefault(result["Id"], []).extend(float(v) for v in result.get("Values", []))
            token = page.get("NextToken")
            if not token:
                return values

    def _metrics(self, name: str | None) -> list[tuple[str, Dimensions]]:
        """The namespace's metrics (or metric `name`'s), each once, in order of name and dimensions."""
        metrics: set[tuple[str, Dimensions]] = set()
        token = None
        while True:
            page = self._client.list_metrics(
                Namespace=NAMESPACE, **({"MetricName": name} if name else {}), **({"NextToken": token} if token else {})
            )
            for metric in page.get("Metrics", []):
                dimensions = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
                metrics.add((metric["MetricName"], dimensions))
            token = page.get("NextToken")
            if not token:
                return sorted(metrics)
