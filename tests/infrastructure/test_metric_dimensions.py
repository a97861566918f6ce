"""The dashboard and the alarms query custom metrics with exactly the dimensions the functions emit.

CloudWatch matches a metric by its full dimension set: a widget asking for `JobsSubmitted{workflow}` shows nothing
if the functions emit `JobsSubmitted{workflow, service}`. The emission sites are found in the domain package's
source, each is run through the real emitting code under every function's environment as the synthesized template
sets it (Powertools reads `POWERTOOLS_SERVICE_NAME` from there), and the EMF lines it prints are compared with the
metrics the template's dashboard and alarms query.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from longhaul.core import observability
from tests.infrastructure.conftest import AUTO_DELETE_PROVIDER, ROOT, resources

NAMESPACE = observability.NAMESPACE
SEARCH = re.compile(r"SEARCH\('\{(?P<schema>[^}]*)\} MetricName=\"(?P<name>[^\"]+)\"")
Site = tuple[str, str, tuple[str, ...]]  # (kind: emit | add_metric, metric name, dimension names)


def _emission_sites() -> set[Site]:
    sites: set[Site] = set()
    for path in (ROOT / "lambdas").rglob("*.py"):
        if path == Path(observability.__file__):  # the emitting code itself, run below
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "emit" and node.args:
                dimensions = tuple(k.arg for k in node.keywords if k.arg not in (None, "value", "unit"))
                assert all(k.arg is not None for k in node.keywords), f"{path}: emit(**…) hides its dimensions"
                sites.add(("emit", _metric_name(node.args[0], path), dimensions))  # type: ignore[arg-type]
            elif name == "add_metric" and isinstance(func, ast.Attribute):
                (metric,) = [k.value for k in node.keywords if k.arg == "name"] or node.args[:1]
                sites.add(("add_metric", _metric_name(metric, path), ()))
            elif name == "add_dimension":
                raise AssertionError(f"{path}: a dimension added outside emit() is invisible to this test")
    return sites


def _metric_name(node: ast.expr, path: Path) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and isinstance(getattr(observability, node.id, None), str):
        return str(getattr(observability, node.id))
    raise AssertionError(f"{path}: a metric name this test cannot read: {ast.dump(node)}")


@pytest.fixture(scope="module")
def sites() -> set[Site]:
    found = _emission_sites()
    names = {name for _, name, _ in found}
    assert {"JobsSubmitted", "StepDuration", "StuckJobs", observability.PLATFORM_MISCONFIGURED} <= names, names
    return found


@pytest.fixture(scope="module")
def bedrock_template(bedrock_assembly: Path) -> dict[str, Any]:
    return json.loads(next(bedrock_assembly.glob("Longhaul-prod.template.json")).read_text())


def _environments(template: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Each platform function's environment, CloudFormation intrinsics rendered as placeholders."""
    return {
        logical_id: {
            k: v if isinstance(v, str) else json.dumps(v)
            for k, v in function["Properties"].get("Environment", {}).get("Variables", {}).items()
        }
        for logical_id, function in resources(template, "AWS::Lambda::Function").items()
        if not logical_id.startswith(AUTO_DELETE_PROVIDER)
    }


@pytest.fixture
def function_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Set a function's environment in os.environ (Powertools reads it there); Powertools' own variables cleared."""

    def apply(variables: dict[str, str]) -> None:
        for name in list(os.environ):
            if name.startswith("POWERTOOLS_"):
                monkeypatch.delenv(name)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    yield apply


def _emitted(site: Site, capsys: pytest.CaptureFixture[str]) -> tuple[str, frozenset[str]]:
    kind, name, dimensions = site
    capsys.readouterr()
    if kind == "emit":
        observability.emit(name, **{d: f"{d}-value" for d in dimensions})
    else:
        observability.metrics.add_metric(name=name, unit="Count", value=1)
        observability.metrics.flush_metrics()
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith('{"_aws"')]
    record = json.loads(line)
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == NAMESPACE
    (dimension_set,) = directive["Dimensions"]
    return name, frozenset(dimension_set)


def _dashboard_queries(template: dict[str, Any]) -> set[tuple[str, frozenset[str]]]:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "intrinsic" for p in parts))
    queries = set()
    for widget in body["widgets"]:
        for metric in widget.get("properties", {}).get("metrics", []):
            fields = [f for f in metric if not isinstance(f, dict)]
            if fields and fields[0] == NAMESPACE:
                queries.add((fields[1], frozenset(fields[2::2])))
            for options in (f for f in metric if isinstance(f, dict) and "expression" in f):
                # SEARCH('{Namespace,dim,...} MetricName="Name"', ...): a series per value of those dimensions
                found = SEARCH.search(options["expression"])
                if found is not None and found["schema"].split(",")[0] == NAMESPACE:
                    queries.add((found["name"], frozenset(found["schema"].split(",")[1:])))
    return queries


def _alarm_queries(template: dict[str, Any]) -> set[tuple[str, frozenset[str]]]:
    return {
        (alarm["Properties"]["MetricName"], frozenset(d["Name"] for d in alarm["Properties"].get("Dimensions", [])))
        for alarm in resources(template, "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("Namespace") == NAMESPACE
    }


def test_every_custom_metric_the_dashboard_and_alarms_query_is_emitted_with_those_dimensions(
    template: dict[str, Any],
    bedrock_template: dict[str, Any],
    sites: set[Site],
    function_env: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    queries = _dashboard_queries(template) | _alarm_queries(bedrock_template)
    assert ("StepDuration", frozenset({"workflow", "step"})) in queries
    assert (observability.PLATFORM_MISCONFIGURED, frozenset({"provider"})) in queries

    environments = {**_environments(template), **_environments(bedrock_template)}
    assert environments and all("POWERTOOLS_SERVICE_NAME" in env for env in environments.values())
    for logical_id, environment in environments.items():
        function_env(environment)
        emitted = {_emitted(site, capsys) for site in sites}
        missing = queries - emitted
        assert not missing, f"with the environment of {logical_id}, nothing is emitted as {missing}; got {emitted}"


def test_every_emitted_dimension_is_a_bounded_one(sites: set[Site]) -> None:
    """A metric per dimension set: a job id, an item or a document name as a dimension would make a metric per job or
    document (in CloudWatch, on the dashboard and in `GET /v1/ops/metrics`)."""
    unbounded = sorted(
        {(name, d) for _, name, dimensions in sites for d in dimensions if d not in observability.BOUNDED_DIMENSIONS}
    )
    assert not unbounded, f"dimensions not in observability.BOUNDED_DIMENSIONS: {unbounded}"
