"""Scenario: the operators' metrics route answers a series per metric and dimension set, aggregated over the window:
a job of 40 documents adds no series to those a job of 5 made (its steps' durations are counted in the same ones)."""

from __future__ import annotations

from typing import Any

from local.platform import LocalPlatform
from longhaul.core import limits
from tests.workflows.conftest import Client

WORKFLOW = "document-analysis"
PARSING = ("StepDuration", (("step", "parse_documents"), ("workflow", WORKFLOW)))


def _request(documents: int) -> dict[str, Any]:
    return {
        "workflow": WORKFLOW,
        "input": {
            "question": "Which supplier caps the liability for service 7?",
            "documents": [
                {"name": f"contract-{n + 1:04d}.txt", "text": f"Contract {n + 1}. The supplier caps service {n % 10}."}
                for n in range(documents)
            ],
        },
    }


def _workflow_series(ops: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]]:
    """The route's series of the workflow, by (name, dimensions); each (name, dimensions) comes once."""
    answer = ops.get("/v1/ops/metrics", hours=1)
    assert answer.status_code == 200, answer.text
    series = [s for s in answer.json()["series"] if s["dimensions"].get("workflow") == WORKFLOW]
    by_key = {(s["name"], tuple(sorted(s["dimensions"].items()))): s for s in series}
    assert len(by_key) == len(series), "a (metric, dimensions) pair answered more than once"
    return by_key


def test_the_metric_series_do_not_grow_with_the_documents(platform: LocalPlatform, alpha: Client) -> None:
    ops = Client(platform, "ops")
    few, many = 5, limits.INLINE_MAP_MAX_ITEMS
    assert alpha.wait(alpha.submit(_request(few)), timeout=300)["status"] == "completed"
    after_few = _workflow_series(ops)

    assert alpha.wait(alpha.submit(_request(many)), timeout=300)["status"] == "completed"
    after_many = _workflow_series(ops)

    assert len(after_many) == len(after_few) and set(after_many) == set(after_few)
    assert after_many[PARSING]["count"] >= after_few[PARSING]["count"] + many  # a data point per document, one series
