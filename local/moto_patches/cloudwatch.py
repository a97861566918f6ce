"""CloudWatch: a metric is its namespace, its name and its whole dimension set, as on AWS.

moto keeps every data point put and answers `ListMetrics` from them, leaving out a data point whose metric is listed
already only when that metric has exactly one dimension: `are_dimensions_same` compares each dimension with every
other one, so two dimensions never match, and a metric without dimensions is never taken as listed. A metric with
`workflow` and `step` is listed once per data point (a 1,000-document job's `parse_documents` step: some 1,000
times), each data point checked against every metric listed before it (quadratic in the data points kept).
`GetMetricData`'s metric queries differ too: a query without dimensions answers the data points of every dimension set
of that name (`TenantDailyAllowanceReached` with those `{tenant}` ones added), and each query walks every data point
of the window once per period of it.

`list_metrics_once_per_dimension_set` lists each (namespace, name, dimension set) once, in one pass over the data
points. `query_exact_dimension_sets` answers `GetMetricData`'s metric queries from the window's data points grouped
by metric once per request, a query matching exactly its dimension set; requests with metric math or Insights
expressions go to moto's own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from local.moto_patches.core import _module, _original, _replace, _restore

MetricKey = tuple[str, str, frozenset[tuple[str, str]]]


def _key(namespace: str, name: str, dimensions: Iterable[tuple[str, str]]) -> MetricKey:
    return namespace, name, frozenset(dimensions)


def _datum_key(datum: Any) -> MetricKey:
    return _key(datum.namespace, datum.name, ((d.name, d.value) for d in datum.dimensions))


def _get_filtered_metrics(self: Any, metric_name: str, namespace: str, dimensions: list[dict[str, str]]) -> list[Any]:
    """Upstream's filters (namespace, name, dimensions each of which the metric has), a metric listed once."""
    listed: dict[MetricKey, Any] = {}
    for datum in self.get_all_metrics():
        key = _datum_key(datum)
        if key not in listed and datum.filter(namespace=namespace, name=metric_name, dimensions=dimensions):
            listed[key] = datum
    return list(listed.values())


def list_metrics_once_per_dimension_set() -> None:
    """`ListMetrics` lists a metric once, whatever its dimensions and however many data points it has."""
    backend = _module("moto.cloudwatch.models").CloudWatchBackend
    _replace(backend, "get_filtered_metrics", _get_filtered_metrics)


def list_metrics_per_data_point() -> None:
    _restore(_module("moto.cloudwatch.models").CloudWatchBackend, "get_filtered_metrics")


def _get_metric_data(
    self: Any,
    queries: list[dict[str, Any]],
    start_time: datetime,
    end_time: datetime,
    scan_by: str = "TimestampAscending",
) -> list[dict[str, Any]]:
    models = _module("moto.cloudwatch.models")
    if any("MetricStat" not in query for query in queries):
        upstream = _original(models.CloudWatchBackend, "get_metric_data")
        return upstream(self, queries, start_time, end_time, scan_by)  # type: ignore[no-any-return]
    start_time, end_time = start_time.replace(microsecond=0), end_time.replace(microsecond=0)
    if start_time > end_time:
        raise models.ValidationError("The parameter EndTime must be greater than StartTime.")
    if start_time == end_time:
        raise models.ValidationError("The parameter StartTime must not equal parameter EndTime.")
    window: dict[MetricKey, list[Any]] = defaultdict(list)
    for datum in self.get_all_metrics():
        if start_time <= datum.timestamp < end_time:
            window[_datum_key(datum)].append(datum)

    results = []
    for query in queries:
        metric_stat = query["MetricStat"]
        metric, stat, unit = metric_stat["Metric"], metric_stat["Stat"], metric_stat.get("Unit")
        key = _key(
            metric["Namespace"], metric["MetricName"], ((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
        )
        delta = timedelta(seconds=int(metric_stat["Period"]))
        periods: dict[int, list[Any]] = defaultdict(list)
        for datum in window.get(key, ()):
            if not unit or datum.unit == unit:
                periods[(datum.timestamp - start_time) // delta].append(datum)
        values, timestamps = [], []
        for index in sorted(periods, reverse=scan_by == "TimestampDescending"):
            statistics = models.Statistics([stat], start_time + index * delta)
            statistics.metric_data = periods[index]
            values.append(statistics.get_statistics_for_type(stat))
            timestamps.append(statistics.timestamp)
        if query.get("ReturnData", True):
            label = query.get("Label") or f"{metric['MetricName']} {stat}"
            answer = {"id": query["Id"], "label": label, "values": values, "timestamps": timestamps}
            results.append({**answer, "status_code": "Complete"})
    return results


def query_exact_dimension_sets() -> None:
    """`GetMetricData`'s metric queries: a metric is its exact dimension set; the window read once per request."""
    _replace(_module("moto.cloudwatch.models").CloudWatchBackend, "get_metric_data", _get_metric_data)


def query_dimension_subsets() -> None:
    _restore(_module("moto.cloudwatch.models").CloudWatchBackend, "get_metric_data")
