"""The operators' metrics (`GET /v1/ops/metrics`): the series the dashboard shows, over the last hours, as JSON a
command line or a script reads (the same numbers locally, where there is no CloudWatch console)."""

from __future__ import annotations

from datetime import timedelta

from longhaul.core.contracts import MetricsReport
from longhaul.services import Services

MAX_WINDOW_HOURS = 24 * 14  # CloudWatch keeps 1-minute data points for 15 days


def report(services: Services, *, hours: int, name: str | None = None) -> MetricsReport:
    end = services.now()
    start = end - timedelta(hours=hours)
    series = [s for s in services.metrics.series(start, end) if name is None or s.name == name]
    return MetricsReport(window_hours=hours, start=start, end=end, series=series)
