"""The local platform's metric sink: what the functions emit is read back by the operators' metrics route's adapter
(`longhaul.adapters.metrics`) from the in-memory CloudWatch, as CloudWatch ingests their EMF lines on AWS."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.metrics import MetricUnit
from moto import mock_aws

from local import moto_patches
from local.platform import _collect_metrics
from longhaul.adapters.metrics import CloudWatchMetrics
from longhaul.core.observability import ALLOWANCE_REACHED_METRIC, MODEL_TOKENS_METRIC, emit
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
            now - timedelta(hours=1), now + timedelta(minutes=1), limit=100
        )

    [tokens] = [s for s in series.series if s.name == "ModelTokens"]
    assert tokens.dimensions == {"workflow": "document-analysis"}
    assert (tokens.sum, tokens.count) == (150.0, 2)


class _Counting:
    """A CloudWatch client that counts the requests made through it."""

    def __init__(self, client: Any) -> None:
        self.client, self.calls = client, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            self.calls[name] += 1
            return getattr(self.client, name)(**kwargs)

        return call


def _a_job(documents: int) -> None:
    """What a job of `documents` documents emits, per document and per job (`longhaul.engine`, `.guardrails`)."""
    for n in range(documents):
        emit("StepDuration", 5 + n, MetricUnit.Milliseconds, workflow="document-analysis", step="parse_documents")
        emit(MODEL_TOKENS_METRIC, 100, workflow="document-analysis")
        emit(MODEL_TOKENS_METRIC, 100, tenant="alpha")
    emit("StepDuration", 40, MetricUnit.Milliseconds, workflow="document-analysis", step="answer")
    emit("JobsCompleted", workflow="document-analysis")
    emit(ALLOWANCE_REACHED_METRIC)
    emit(ALLOWANCE_REACHED_METRIC, tenant="alpha")


@pytest.mark.parametrize("documents", [5, 50])
def test_the_series_and_the_requests_reading_them_do_not_grow_with_the_documents(
    documents: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_credentials(monkeypatch)
    was_applied = moto_patches.is_applied()
    moto_patches.apply()  # as the local platform runs
    try:
        with mock_aws():
            remove = _collect_metrics()
            try:
                _a_job(documents)
                _a_job(documents)
            finally:
                remove()
            now = datetime.now(UTC)
            client = _Counting(boto3.client("cloudwatch", region_name=REGION))
            read = CloudWatchMetrics(client).series(now - timedelta(hours=1), now, limit=100)
    finally:
        if not was_applied:
            moto_patches.revert()

    by_series = {(s.name, tuple(sorted(s.dimensions.items()))): s for s in read.series}
    assert len(read.series) == len(by_series) == 7 and not read.truncated  # the same for 5 and 50 documents
    parsing = by_series["StepDuration", (("step", "parse_documents"), ("workflow", "document-analysis"))]
    assert (parsing.count, parsing.maximum) == (2 * documents, 5 + documents - 1)
    assert by_series[ALLOWANCE_REACHED_METRIC, ()].count == 2  # not those by tenant
    assert client.calls == {"list_metrics": 1, "get_metric_data": 1}


def test_at_most_the_limit_of_series_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_credentials(monkeypatch)
    with mock_aws():
        remove = _collect_metrics()
        try:
            _a_job(1)
        finally:
            remove()
        now = datetime.now(UTC)
        read = CloudWatchMetrics(boto3.client("cloudwatch", region_name=REGION)).series(
            now - timedelta(hours=1), now, limit=2
        )

    assert read.truncated and [(s.name, s.dimensions) for s in read.series] == [  # in order of name, dimensions
        ("JobsCompleted", {"workflow": "document-analysis"}),
        (MODEL_TOKENS_METRIC, {"tenant": "alpha"}),
    ]
