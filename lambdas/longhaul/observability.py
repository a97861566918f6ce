"""Logger and metrics in one place; the tracer (X-Ray SDK, the largest cold-start cost) is created lazily."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

logger = Logger(service="longhaul")
metrics = Metrics(namespace="Longhaul", service="longhaul")


@cache
def tracer() -> Tracer:
    from aws_lambda_powertools import Tracer

    return Tracer(service="longhaul")
