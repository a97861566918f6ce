"""BM25 retrieval over chunks: ranking, edge cases and serialisation."""

from __future__ import annotations

import random

import pytest

from longhaul.core.errors import InternalError
from longhaul.documents.parsing import Chunk
from longhaul.workflows.document_analysis.retrieval import (
    LexicalIndex,
    group_passages,
    search_batches,
    stem,
    terms,
)

TEXTS = [
    "Each party's total aggregate liability shall not exceed the Fees paid in the preceding twelve months.",
    "Either party may terminate the Agreement for material breach not remedied within 30 days.",
    "The Supplier shall process Personal Data only on the documented instructions of the Customer.",
    "Late payments bear interest at 4% per year above the base rate.",
]


def _chunks(texts: list[str]) -> list[Chunk]:
    return [
        Chunk(chunk_id=f"d0-p1-c{i}", document="msa.pdf", document_index=0, page=1, text=text)
        for i, text in enumerate(texts, start=1)
    ]


@pytest.fixture(scope="module")
def index() -> LexicalIndex:
    return LexicalIndex.build(_chunks(TEXTS))


def test_the_best_matching_chunk_comes_first_with_only_positive_scores(index: LexicalIndex) -> None:
    results = index.search("What is the liability cap?", k=4)

    assert results[0][0] == "d0-p1-c1"
    assert all(score > 0 for _, score in results)
    assert [score for _, score in results] == sorted((score for _, score in results), reverse=True)


def test_inflected_forms_match_through_stemming(index: LexicalIndex) -> None:
    assert index.search("termination rights", k=1)[0][0] == "d0-p1-c2"
    assert index.search("processing of personal data", k=1)[0][0] == "d0-p1-c3"


def test_unrelated_chunks_are_not_returned(index: LexicalIndex) -> None:
    assert [chunk_id for chunk_id, _ in index.search("interest on late payment", k=4)] == ["d0-p1-c4"]


@pytest.mark.parametrize("query", ["zebra giraffe", "what is the", "", "?!"])
def test_a_query_without_matching_terms_returns_nothing(index: LexicalIndex, query: str) -> None:
    assert index.search(query, k=3) == []


def test_k_limits_the_results(index: LexicalIndex) -> None:
    assert len(index.search("party fees data customer", k=2)) == 2
    assert index.search("liability", k=0) == []


def test_equal_scores_keep_chunk_order() -> None:
    index = LexicalIndex.build(_chunks(["Renewal is automatic.", "Other text.", "Renewal is automatic."]))

    assert [chunk_id for chunk_id, _ in index.search("automatic renewal", k=5)] == ["d0-p1-c1", "d0-p1-c3"]


def test_a_one_chunk_corpus_is_searchable() -> None:
    index = LexicalIndex.build(_chunks(["Termination for convenience requires 180 days' notice."]))

    assert [chunk_id for chunk_id, _ in index.search("termination notice", k=5)] == ["d0-p1-c1"]


@pytest.mark.parametrize("texts", [[], ["the of and", "a"]])
def test_a_corpus_without_terms_returns_nothing_and_round_trips(texts: list[str]) -> None:
    index = LexicalIndex.from_bytes(LexicalIndex.build(_chunks(texts)).to_bytes())

    assert index.search("anything at all", k=5) == []
    assert index.chunk_ids == [f"d0-p1-c{i}" for i in range(1, len(texts) + 1)]


def test_serialisation_round_trips_and_is_deterministic(index: LexicalIndex) -> None:
    data = index.to_bytes()

    restored = LexicalIndex.from_bytes(data)

    for query in ("liability cap", "terminate breach", "personal data"):
        assert restored.search(query, k=4) == index.search(query, k=4)
    assert LexicalIndex.build(_chunks(TEXTS)).to_bytes() == data


def test_unreadable_index_bytes_are_an_internal_error() -> None:
    with pytest.raises(InternalError, match="unreadable"):
        LexicalIndex.from_bytes(b"not a zip file")


def test_terms_drop_stopwords_and_stem() -> None:
    assert terms("What are the Supplier's liabilities, e.g. capped fees?") == [
        "supplier",
        "liability",
        "cap",
        "fee",
    ]
    assert {stem("terminated"), stem("termination"), stem("terminates")} == {stem("terminate")}


def test_passages_are_grouped_in_order() -> None:
    assert group_passages(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert group_passages([], 3) == []
    with pytest.raises(ValueError, match="group_size"):
        group_passages(["a"], 0)


# ---------------------------------------------------------------- batches indexed apart, searched as one

WORDS = ("kappa", "lambda", "omega", "delta", "sigma", "theta", "gamma", "zeta", "iota", "rho", "tau", "chi")


def _random_chunks(count: int, seed: int) -> list[Chunk]:
    """Chunks of exactly six terms each (every batch then has the same mean chunk length)."""
    rng = random.Random(seed)
    return [
        Chunk(chunk_id=f"d{n}-p1-c1", document=f"doc-{n}.txt", document_index=n, page=1, text=" ".join(words))
        for n, words in enumerate([rng.choice(WORDS[:4]), *rng.choices(WORDS, k=5)] for _ in range(count))
    ]


@pytest.mark.parametrize("query", ["kappa lambda", "omega chi", "theta", "sigma tau rho zeta"])
def test_batches_searched_as_one_score_as_one_index_over_all_their_chunks(query: str) -> None:
    # Given 36 chunks indexed as one, and the same chunks indexed in three batches of 12
    chunks = _random_chunks(36, seed=7)
    whole = LexicalIndex.build(chunks)
    batches = [LexicalIndex.build(chunks[start : start + 12]) for start in range(0, 36, 12)]

    # When both are searched
    expected = dict(whole.search(query, k=36))
    found = search_batches(lambda n: batches[n], len(batches), query, k=36)

    # Then the batches give the same chunks with the same scores (each term weighted by its frequency over all chunks)
    assert dict(found).keys() == expected.keys()
    assert dict(found) == pytest.approx(expected, rel=1e-5)
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)


def test_a_passage_found_only_in_a_later_batch_comes_first_and_k_bounds_the_merge() -> None:
    chunks = _random_chunks(30, seed=3)
    chunks[27] = chunks[27].model_copy(update={"text": "The escrow agent is Bluefin Escrow Services kappa."})
    batches = [LexicalIndex.build(chunks[start : start + 10]) for start in range(0, 30, 10)]

    found = search_batches(lambda n: batches[n], len(batches), "Who is the escrow agent? kappa", k=5)

    assert found[0][0] == "d27-p1-c1" and len(found) == 5


def test_one_batch_is_searched_as_it_is(index: LexicalIndex) -> None:
    loaded: list[int] = []

    def load(number: int) -> LexicalIndex:
        loaded.append(number)
        return index

    assert search_batches(load, 1, "liability cap", k=3) == index.search("liability cap", k=3)
    assert loaded == [0]


def test_batches_without_terms_or_a_query_without_known_terms_find_nothing() -> None:
    empty = LexicalIndex.build(_chunks(["", "   "]))
    some = LexicalIndex.build(_random_chunks(4, seed=1))
    indexes = [empty, some]

    assert search_batches(lambda n: indexes[n], 2, "the of and", k=5) == []
    assert search_batches(lambda n: indexes[n], 2, "kappa lambda omega delta", k=5)
    assert search_batches(lambda n: indexes[n], 0, "kappa", k=5) == []
