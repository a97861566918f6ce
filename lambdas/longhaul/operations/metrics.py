"""The operators' metrics (`GET /v1/ops/metrics`): the series the dashboard shows, over the last hours, as JSON a
command line or a script reads (the same numbers locally, where there is no CloudWatch console).

A series is a metric (name and dimension set) aggregated over the window; the emitters' dimensions are bounded
(workflow, step, kind, SLA class, provider, …; tenant by the tenants), so the answer and the work behind it do not
grow with documents or jobs. At most `MAX_SERIES` are read.
"""

from __future__ import annotations

from datetime import timedelta

from longhaul.core.contracts import MetricsReport
from longhaul.services import Services

MAX_WINDOW_HOURS = 24 * 14  # CloudWatch keeps 1-minute data points for 15 days
MAX_SERIES = 500  # some tens per workflow, three per tenant


def report(services: Services, *, hours: int, name: str | None = None) -> MetricsReport:
    end = services.now()
    start = end - timedelta(hours=hours)
    read = services.metrics.series(start, end, name=name, limit=MAX_SERIES)
    return MetricsReport(window_hours=hours, start=start, end=end, series=read.series, truncated=read.truncated)
