"""Retrieval depth by SLA class: the class's top-k, passage groups and rerank pass unless the request sets them; the
rerank pass itself."""

from __future__ import annotations

from typing import Any

from longhaul.core.budgets import SLA_CLASSES
from longhaul.core.contracts import DocumentAnalysisInput
from longhaul.workflows.document_analysis import steps
from longhaul.workflows.document_analysis.retrieval import DEPTHS, Depth, _span, depth_for, rerank


def test_every_class_has_a_depth_and_standard_is_the_request_s_documented_default() -> None:
    assert set(DEPTHS) == set(SLA_CLASSES)
    fields = DocumentAnalysisInput.model_fields
    assert DEPTHS["standard"] == Depth(fields["max_passages"].default, fields["passages_per_group"].default, False)
    described = f"{fields['max_passages'].description} {fields['passages_per_group'].description}"
    for sla_class, depth in DEPTHS.items():  # the request's documentation states each class's depth
        assert f"{sla_class} {depth.top_k}" in described
        assert f"{sla_class} {depth.group_size}" in described


def test_the_class_s_depth_unless_the_request_sets_it() -> None:
    assert depth_for("interactive") == DEPTHS["interactive"]
    assert depth_for("batch")[:3] == DEPTHS["batch"][:3]
    assert depth_for(None) == DEPTHS["standard"]
    assert depth_for("interactive", top_k=20) == Depth(20, DEPTHS["interactive"].group_size, True)
    assert depth_for("batch", rerank=False, group_size=4) == Depth(DEPTHS["batch"].top_k, 4, False)


def test_a_batch_class_job_reads_two_passages_a_document_up_to_a_ceiling() -> None:
    # Recall-oriented: a few hundred documents make enough evidence calls for Bedrock's batch lane (100 records)
    assert depth_for("batch", documents=10).top_k == DEPTHS["batch"].top_k
    assert depth_for("batch", documents=150) == Depth(300, 2, True)
    assert depth_for("batch", documents=5_000).top_k == 400
    assert depth_for("batch", documents=150, top_k=20).top_k == 20  # the request's own depth wins
    assert depth_for("standard", documents=5_000) == DEPTHS["standard"]


class _Intake:
    def documents(self, documents: Any, loc: Any) -> list[Any]:
        return []


def test_the_stored_input_keeps_only_what_the_request_set() -> None:
    question = "What is the liability cap of the agreement?"
    given = DocumentAnalysisInput.model_validate({"question": question, "documents": [{"name": "a", "text": "x"}]})
    stored = steps.prepare(_Intake(), given).payload  # type: ignore[arg-type]
    assert (stored.max_passages, stored.passages_per_group, stored.rerank) == (None, None, None)
    given = DocumentAnalysisInput.model_validate(
        {"question": question, "documents": [{"name": "a", "text": "x"}], "max_passages": 5, "rerank": False}
    )
    stored = steps.prepare(_Intake(), given).payload  # type: ignore[arg-type]
    assert (stored.max_passages, stored.passages_per_group, stored.rerank) == (5, None, False)


def test_rerank_prefers_passages_holding_more_of_the_question_close_together() -> None:
    scored = [("a", 9.0), ("b", 8.5), ("c", 8.0), ("d", 1.0)]
    texts = {
        "a": "liability liability liability liability",  # one term, many times: BM25 likes it
        "b": "the liability cap is the total of fees paid",  # both terms, side by side
        "c": "cap on hours; elsewhere, far away, many words later, liability",  # both, far apart
        "d": "nothing relevant",
    }
    ranked = rerank("What is the liability cap?", scored, texts, 3)
    assert [chunk_id for chunk_id, _ in ranked] == ["b", "c", "a"]
    assert dict(ranked)["b"] == 8.5  # BM25's scores are kept
    assert rerank("the of", scored, texts, 2) == scored[:2]  # no content word: BM25's order


def test_the_shortest_span_holding_the_terms() -> None:
    assert _span(["x", "cap", "y", "liabil", "cap"], {"cap", "liabil"}) == 2
    assert _span(["cap"], {"cap"}) == 1
