"""The validation ladder's metrics: each invalid field of an answer by model, route, prompt version and field (the
schema's top-level field, bounded), and per judged answer whether it escalated to the stronger route (its average by
route is the escalation rate the dashboard draws)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, ConfigDict

from longhaul.core.observability import ESCALATIONS_METRIC, VALIDATION_FAILURES_METRIC, add_metric_sink
from longhaul.guardrails.ladder import OTHER_FIELD, metric_field
from tests.unit.test_model_calls import GOOD, Answer, _calls, _request, gateway_services, models, no_faults

__all__ = ["gateway_services", "models", "no_faults"]  # the fixtures this module uses

Emitted = tuple[str, float, dict[str, str]]


@pytest.fixture
def emitted() -> Iterator[list[Emitted]]:
    seen: list[Emitted] = []
    remove = add_metric_sink(lambda name, value, unit, dimensions: seen.append((name, value, dimensions)))
    yield seen
    remove()


def _named(seen: list[Emitted], name: str) -> list[tuple[float, dict[str, str]]]:
    return [(value, dimensions) for metric, value, dimensions in seen if metric == name]


def test_a_valid_answer_counts_no_failure_and_no_escalation(gateway_services, models, emitted) -> None:
    _calls(gateway_services).ask(_request(), Answer)
    assert _named(emitted, VALIDATION_FAILURES_METRIC) == []
    assert _named(emitted, ESCALATIONS_METRIC) == [(0.0, {"route": "default"})]


def test_an_answer_repaired_mechanically_is_no_failure(gateway_services, models, emitted) -> None:
    models["primary"].script = [('```json\n{"answer": "yes", "score": 0.5,\n```', "end_turn")]
    _calls(gateway_services).ask(_request(), Answer)
    assert _named(emitted, VALIDATION_FAILURES_METRIC) == []
    assert _named(emitted, ESCALATIONS_METRIC) == [(0.0, {"route": "default"})]


def test_an_answer_repaired_by_the_feedback_retry_counts_its_invalid_field(gateway_services, models, emitted) -> None:
    models["primary"].script = [('{"answer": "yes"}', "end_turn"), (GOOD, "end_turn")]
    _calls(gateway_services).ask(_request(), Answer)
    assert _named(emitted, VALIDATION_FAILURES_METRIC) == [
        (1.0, {"model": "primary", "route": "default", "prompt_version": "v7", "field": "score"})
    ]
    assert _named(emitted, ESCALATIONS_METRIC) == [(0.0, {"route": "default"})]


def test_an_escalated_answer_counts_each_invalid_answer_and_one_escalation(gateway_services, models, emitted) -> None:
    bad = json.dumps({"answer": ["not", "a", "string"], "score": "high"})
    models["primary"].script = [(bad, "end_turn")]
    models["strong"].script = [(GOOD, "end_turn")]
    _calls(gateway_services).ask(_request(), Answer)
    failures = _named(emitted, VALIDATION_FAILURES_METRIC)
    # the first answer and the feedback retry's, two fields each; the stronger route answered well
    assert sorted(d["field"] for _, d in failures) == ["answer", "answer", "score", "score"]
    assert {(d["model"], d["route"], d["prompt_version"]) for _, d in failures} == {("primary", "default", "v7")}
    assert _named(emitted, ESCALATIONS_METRIC) == [(1.0, {"route": "default"})]


def test_an_answer_invalid_on_every_rung_counts_the_stronger_routes_failures_too(
    gateway_services, models, emitted
) -> None:
    models["primary"].script = [("[1, 2]", "end_turn")]
    models["strong"].script = [("[3]", "end_turn")]
    with pytest.raises(Exception, match="still invalid"):
        _calls(gateway_services).ask(_request(), Answer)
    failures = _named(emitted, VALIDATION_FAILURES_METRIC)
    assert [(d["model"], d["route"], d["field"]) for _, d in failures] == [
        ("primary", "default", "(root)"),
        ("primary", "default", "(root)"),
        ("strong", "strong", "(root)"),
    ]
    assert _named(emitted, ESCALATIONS_METRIC) == [(1.0, {"route": "default"})]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[int]


def test_the_field_dimension_is_bounded_by_the_schema() -> None:
    assert metric_field("items.3", Strict) == "items"
    assert metric_field("(root)", Strict) == "(root)"
    # an invented key of the answer (extra="forbid" names it in the error) never becomes a dimension value
    assert metric_field("whatever_the_model_wrote", Strict) == OTHER_FIELD
    assert metric_field("anything", None) == OTHER_FIELD
