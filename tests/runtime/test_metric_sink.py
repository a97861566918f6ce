"""The local platform's metric sink: what the functions emit is read back by the operators' metrics route's adapter
(`longhaul.adapters.metrics`) from the in-memory CloudWatch, as CloudWatch ingests their EMF lines on AWS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from local.platform import _collect_metrics
from longhaul.adapters.metrics import CloudWatchMetrics
from longhaul.core.observability import emit
from tests.unit.aws_env import REGION, offline_credentials


def test_an_emitted_metric_is_read_back_in_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_credentials(monkeypatch)
    with mock_aws():
        remove = _collect_metrics()
        try:
            emit("ModelTokens", 120, workflow="document-analysis")
            emit("ModelTokens", 30, workflow="document-analysis")
        finally:
            remove()
        now = datetime.now(UTC)
        series = CloudWatchMetrics(boto3.client("cloudwatch", region_name=REGION)).series(
            now - timedelta(hours=1), now + timedelta(minutes=1)
        )

    [tokens] = [s for s in series if s.name == "ModelTokens"]
    assert tokens.dimensions == {"workflow": "document-analysis"}
    assert (tokens.sum, tokens.count) == (150.0, 2)
