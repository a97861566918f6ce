"""The figures of the platform evals, from what a job's event log and trace say: routes compared (`evals.compare`:
first-try schema adherence, repairs and escalations from the ladder's events, variance under retry from the results'
fingerprints) and the operational evals (`evals.ops`: the cost of retries, the rates and their gate, zero duplicates
required); and the offline model's loose sibling, which makes two local routes differ."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from evals.compare import RunRecord, ladder_counts, percentile, result_hash, summarize_route
from evals.ops import OpsRun, cost_of_retries, figures, regressions
from longhaul.adapters.models import offline
from longhaul.core.budgets import PRICES
from longhaul.core.llm import ModelRequest
from longhaul.guardrails.ladder import check


def _called(step: str, rung: str = "validate", item: int | None = None, tokens: int = 10, usd: str = "0.001") -> dict:
    detail = {"rung": rung, "input_tokens": tokens, "output_tokens": tokens, "cost_usd": usd}
    return {"type": "model_called", "step": step, "item": item, "detail": detail}


def _event(kind: str, step: str, item: int | None = None) -> dict[str, Any]:
    return {"type": kind, "step": step, "item": item, "detail": {}}


def test_percentiles_are_nearest_rank_and_none_without_values() -> None:
    values = [float(n) for n in range(1, 21)]
    assert (percentile(values, 50), percentile(values, 95), percentile([], 50)) == (10.0, 19.0, None)


def test_a_first_try_is_spoiled_by_a_repair_or_a_validation_failure_of_its_own_step_and_item() -> None:
    events = [
        _called("extract_evidence", item=0),
        _called("extract_evidence", item=1),
        _event("output_repaired", "extract_evidence", item=1),  # item 1's answer needed a repair
        _called("draft_answer"),
        _event("output_validation_failed", "draft_answer"),
        _event("feedback_retry", "draft_answer"),
        _called("draft_answer", rung="feedback"),  # not a first try
        _event("escalated_to_stronger_route", "draft_answer"),
        _called("verify", item=None),
    ]
    tries, valid, repaired, escalated = ladder_counts(events)
    assert (tries, valid, repaired, escalated) == (4, 2, 1, 1)  # item 0 and `verify` were kept as answered


def test_variance_under_retry_is_the_share_of_repeated_cases_whose_results_differ() -> None:
    same = result_hash({"answer": "42", "job_id": "job_a", "generated_at": "t1"}, "job_a")
    assert same == result_hash({"answer": "42", "job_id": "job_b", "generated_at": "t2"}, "job_b")
    other = result_hash({"answer": "41"}, "job_c")
    runs = [
        RunRecord("a", "w", "completed", True, job_seconds=2.0, call_seconds=[0.1, 0.3], first_tries=2,
                  first_try_valid=1, repaired=1, tokens=100, cost_usd=0.01, result_hash=same),
        RunRecord("a", "w", "completed", True, job_seconds=4.0, call_seconds=[0.2], first_tries=1, first_try_valid=1,
                  tokens=100, cost_usd=0.01, result_hash=other),
        RunRecord("b", "w", "completed", True, job_seconds=3.0, first_tries=1, first_try_valid=1, tokens=100,
                  cost_usd=0.01, result_hash=same),
        RunRecord("b", "w", "failed", False, error_kind="timeout", job_seconds=9.0, tokens=50, cost_usd=0.005),
    ]  # fmt: skip
    summary = summarize_route(runs)
    assert summary["output_variance_under_retry"] == 1.0  # case a differs; case b failed once: differs too
    assert summary["success_rate"] == 0.75 and summary["timeout_rate"] == 0.25 and summary["error_rate"] == 0.25
    assert summary["first_try_schema_adherence"] == 0.75 and summary["repair_rate"] == 0.25
    assert summary["tokens_per_completed_job"] == round(350 / 3, 1)  # every job's tokens over the completed ones
    assert (summary["call_p50_seconds"], summary["job_p95_seconds"]) == (0.2, 9.0)


def test_the_cost_of_retries_is_what_the_ladder_discarded_and_what_failed_attempts_made() -> None:
    events = [
        _called("draft_answer", tokens=100, usd="0.01"),
        _event("output_validation_failed", "draft_answer"),  # discarded
        _called("draft_answer", rung="feedback", tokens=10, usd="0.001"),
        _event("step_finished", "draft_answer"),  # kept
        _called("extract_evidence", item=3, tokens=20, usd="0.002"),
        _event("step_attempt_failed", "extract_evidence", item=3),  # its attempt failed afterwards
        _called("extract_evidence", item=3, tokens=20, usd="0.002"),
        _event("step_finished", "extract_evidence", item=3),
    ]
    assert cost_of_retries(events) == (240, 0.012)


def _run(**fields: Any) -> OpsRun:
    base: dict[str, Any] = {"scenario": "s", "job_id": "j", "status": "completed", "expected": "completed",
                            "recoverable": True, "faulted": True, "sla_class": "standard", "reached": True}  # fmt: skip
    return OpsRun(**{**base, **fields})


def test_the_operational_figures_and_their_gate() -> None:
    runs = [
        _run(faulted=False, sla_class="interactive", queue_wait_seconds=0.1, callback="delivered", model_calls=3),
        _run(model_calls=4, restarted=True, callback="delivered", usable_seconds=2.0),
        _run(status="failed", expected="failed", recoverable=False, dead_lettered=True, cost_usd=0.5, callback="dead"),
        _run(status="failed", reached=False, dead_lettered=True, effects=2, cost_usd=0.25),
    ]
    found = figures(runs)
    assert found["duplicate_execution_rate"] == 0.0 and found["model_calls_and_effects"] == 9
    assert found["resumability_success_rate"] == 0.5  # of the two recoverable faulted jobs, one ended as it should
    assert found["restarted_from_scratch_rate"] == round(1 / 3, 4) and found["dlq_rate"] == 0.5
    assert found["callback_success_rate"] == round(2 / 3, 4) and found["cancelled_and_failed_usd"] == 0.75
    assert found["queue_wait_seconds"]["interactive"] == {"p50": 0.1, "p95": 0.1, "jobs": 1}

    baseline = {"resumability_success_rate": 1.0, "dlq_rate": 0.5, "duplicate_execution_rate": 0.0}
    assert regressions(found, baseline) == ["resumability_success_rate 0.5 against the baseline's 1.0"]
    twice = figures([*runs, _run(model_calls=2, model_calls_twice=1)])
    assert regressions(twice, {})[0].startswith("duplicate_execution_rate is 0.0909: it must be 0")


@pytest.fixture
def loose() -> offline.OfflineExtractiveModel:
    return offline.OfflineExtractiveModel(offline.LOOSE_MODEL_ID, cache=offline.PromptCache())


def test_the_loose_offline_model_answers_the_same_json_now_and_then_needing_a_repair(
    loose: offline.OfflineExtractiveModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = ModelRequest(
        task="draft_answer", system="s", prompt="p", context={}, offline="tests.unit.test_eval_figures:_stand_in"
    )
    tidy = offline.OfflineExtractiveModel(cache=offline.PromptCache()).generate(request)
    monkeypatch.setattr(offline.random, "random", lambda: 0.0)  # every answer wrapped
    wrapped = loose.generate(request)
    monkeypatch.setattr(offline.random, "random", lambda: 0.99)  # none
    plain = loose.generate(request)

    assert plain.text == tidy.text and wrapped.text != tidy.text and wrapped.text.startswith("Here is the JSON")
    with pytest.raises(ValueError):
        json.loads(wrapped.text)
    repaired, first = check(wrapped, _Answer), check(plain, _Answer)
    assert repaired.repaired and repaired.value == first.value and not first.repaired  # mechanical repair undoes it
    assert PRICES[offline.LOOSE_MODEL_ID].input < PRICES[offline.DEFAULT_MODEL_ID].input  # priced as a smaller model


class _Answer(BaseModel):
    answer: str
    items: list[int]


def _stand_in(context: dict[str, Any], model_id: str) -> str:
    return json.dumps({"answer": "42", "items": [1, 2]})


def test_a_prompt_asked_twice_in_one_job_is_a_model_call_done_twice() -> None:
    from evals.ops import ProviderCalls

    calls = ProviderCalls()
    model = offline.OfflineExtractiveModel(cache=offline.PromptCache())
    request = ModelRequest(
        task="draft_answer", system="s", prompt="p", context={}, offline="tests.unit.test_eval_figures:_stand_in"
    )
    other = request.model_copy(update={"prompt": "q"})
    with calls.counting():
        model.generate(request)
        model.generate(other)
    assert calls.take() == (2, 0)
    with calls.counting():
        model.generate(request)
        model.generate(request)  # the same call again: a duplicate execution
    assert calls.take() == (2, 1)
    model.generate(request)  # not counted once the eval stops counting
    assert calls.take() == (0, 0)


def test_the_bus_gate_wants_every_checked_job_exact() -> None:
    exact = figures([_run(bus_exact=True, bus_events=5), _run(bus_exact=None)])
    off = figures([_run(bus_exact=True, bus_events=5), _run(bus_exact=False, bus_events=6)])

    assert exact["bus_events_exact_rate"] == 1.0 and exact["bus_status_changes"] == 5
    assert regressions(exact, {"bus_events_exact_rate": 1.0}) == []
    assert off["bus_events_exact_rate"] == 0.5
    assert regressions(off, {}) == ["bus_events_exact_rate is 0.5: it must be 1"]
    assert figures([_run()])["bus_events_exact_rate"] is None
