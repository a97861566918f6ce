"""Metrics are EMF lines with their own dimensions, and nothing at all where metrics are disabled."""

from __future__ import annotations

import json

from longhaul.core.observability import emit, metrics


def test_a_metric_is_one_emf_line_with_its_dimensions(monkeypatch, capsys):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    emit("StepAttemptFailed", workflow="document-analysis", step="draft_answer", kind="transient")
    (line,) = capsys.readouterr().out.strip().splitlines()
    record = json.loads(line)
    assert record["StepAttemptFailed"] == [1.0]
    assert record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["workflow", "step", "kind"]]
    assert record["step"] == "draft_answer"


def test_disabled_metrics_print_nothing(monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    emit("JobsCompleted", workflow="document-analysis")
    assert capsys.readouterr().out == ""


def test_no_service_dimension_whatever_the_functions_service_name(monkeypatch, capsys):
    """Each function sets its own POWERTOOLS_SERVICE_NAME; the dashboard queries the emitter's dimensions only."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "longhaul-draft_answer")
    metrics.clear_metrics()  # what an earlier test (e.g. the sweep's) left buffered in the shared object
    emit("JobsCompleted", workflow="document-analysis")
    metrics.add_metric(name="StuckJobs", unit="Count", value=2)
    metrics.flush_metrics()

    emitted, swept = (json.loads(line) for line in capsys.readouterr().out.strip().splitlines())
    assert emitted["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["workflow"]]
    assert swept["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]]
    assert "service" not in emitted and "service" not in swept
    assert swept["StuckJobs"] == [2.0]
