"""The eval gate (`evals.run.compare`): a score worse than the baseline by more than the dataset's tolerance is a
regression (lower for quality scores, higher for calls and tokens per job); within the tolerance it is not; a score
the baseline does not have is not gated, one that disappeared is a regression. And the datasets load, each case
with what its workflow's scorer needs."""

from __future__ import annotations

from evals.run import SCORERS, Regression, compare, datasets

BASELINE = {"invoice-reconciliation": {"discrepancy_recall": 1.0, "success_rate": 1.0, "tokens_per_job": 1000.0}}
TOLERANCE = {"invoice-reconciliation": {"discrepancy_recall": 0.1, "success_rate": 0.0, "tokens_per_job": 0.1}}


def test_a_score_below_the_baseline_beyond_its_tolerance_is_a_regression() -> None:
    now = {"invoice-reconciliation": {"discrepancy_recall": 0.8, "success_rate": 1.0, "tokens_per_job": 1000.0}}

    assert compare(now, BASELINE, TOLERANCE) == [
        Regression("invoice-reconciliation", "discrepancy_recall", 1.0, 0.8, 0.1)
    ]


def test_within_the_tolerance_is_no_regression_and_more_tokens_beyond_it_is() -> None:
    within = {"invoice-reconciliation": {"discrepancy_recall": 0.95, "success_rate": 1.0, "tokens_per_job": 1099.0}}
    costlier = {"invoice-reconciliation": {"discrepancy_recall": 1.0, "success_rate": 1.0, "tokens_per_job": 1200.0}}

    assert compare(within, BASELINE, TOLERANCE) == []
    assert [r.metric for r in compare(costlier, BASELINE, TOLERANCE)] == ["tokens_per_job"]


def test_a_score_that_disappeared_is_a_regression_and_one_without_a_baseline_is_not_gated() -> None:
    now = {"invoice-reconciliation": {"success_rate": 1.0, "tokens_per_job": 900.0, "discrepancy_precision": 0.1}}

    assert [(r.metric, r.now) for r in compare(now, BASELINE, TOLERANCE)] == [("discrepancy_recall", None)]


def test_every_dataset_has_a_scorer_a_small_case_and_the_hard_cases_it_promises() -> None:
    loaded = {d.workflow: d for d in datasets()}

    assert set(loaded) == set(SCORERS) == {"document-analysis", "invoice-reconciliation", "dispute-resolution"}
    for dataset in loaded.values():
        assert any(c.small for c in dataset.cases) and any(c.hard for c in dataset.cases)
        assert set(dataset.tolerance) >= {"success_rate", "model_calls_per_job", "tokens_per_job"}
    analysis = loaded["document-analysis"].cases
    assert any(c.unanswerable for c in analysis) and all(c.question for c in analysis)
    assert all(c.facts and c.cite for c in analysis if not c.unanswerable)
    assert all(c.contract and set(c.expected) == {i.rsplit("/", 1)[1] for i in c.invoices}
               for c in loaded["invoice-reconciliation"].cases)  # fmt: skip
    disputes = loaded["dispute-resolution"].cases
    assert all(c.contract and c.invoices and c.tools_called for c in disputes)
    assert any(c.notices for c in disputes) and any(not c.notices for c in disputes)  # a case with nothing to send
