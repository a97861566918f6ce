"""Lexical (BM25) retrieval over chunks, serialisable for S3.

bm25s and numpy are imported where they are used: this module is reachable from every function (the offline
model tokenises with `terms`), and those libraries would otherwise cost each cold start of the API.
"""

from __future__ import annotations

import io
import json
import math
import re
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from longhaul.core.errors import InternalError
from longhaul.documents.parsing import Chunk

_FORMAT = "longhaul-bm25s-1"
_MANIFEST = "longhaul.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script
_DOUBLED = re.compile(r"([b-df-hj-kmnp-rtv-y])\1$")
# Light suffix stripping, longest first; a stem keeps at least three letters.
_SUFFIXES = (
    ("ational", "ate"),
    ("ations", "ate"),
    ("ation", "ate"),
    ("ities", "ity"),
    ("ies", "y"),
    ("sses", "ss"),
    ("ing", ""),
    ("ed", ""),
    ("es", ""),
    ("s", ""),
)


def stem(word: str) -> str:
    """A light English stemmer: `terminates`, `termination` and `terminated` all become `terminat`."""
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) + len(replacement) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                break
            word = word[: -len(suffix)] + replacement
            if suffix in ("ing", "ed") and _DOUBLED.search(word):
                word = word[:-1]
            break
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


@cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


def terms(text: str) -> list[str]:
    """Lower-cased, stemmed content words of `text` (stopwords and single characters removed)."""
    words = _WORD.findall(text.lower().replace("'s", "").replace("\u2019s", ""))
    stopwords = _stopwords()
    return [stem(word) for word in words if len(word) > 1 and word not in stopwords]


class LexicalIndex:
    """BM25 over chunk texts; results are chunk ids, best first, ties broken by chunk order."""

    def __init__(self, chunk_ids: Sequence[str], bm25: Any | None) -> None:
        self.chunk_ids = list(chunk_ids)
        self._bm25 = bm25

    @classmethod
    def build(cls, chunks: Sequence[Chunk]) -> LexicalIndex:
        corpus = [terms(chunk.text) for chunk in chunks]
        if not any(corpus):
            return cls([chunk.chunk_id for chunk in chunks], None)
        import bm25s

        bm25 = bm25s.BM25()
        bm25.index(corpus, show_progress=False)
        return cls([chunk.chunk_id for chunk in chunks], bm25)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Up to `k` (chunk_id, score) pairs with a positive score, best first."""
        if self._bm25 is None or k < 1:
            return []
        vocabulary = self._bm25.vocab_dict
        query_terms = [term for term in dict.fromkeys(terms(query)) if term in vocabulary]
        if not query_terms:
            return []
        import numpy as np

        scores = np.asarray(self._bm25.get_scores(query_terms), dtype=np.float64)
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [(self.chunk_ids[i], float(scores[i])) for i in order[:k] if scores[i] > 0]

    def term_scores(self, query_terms: Sequence[str]) -> tuple[Any, list[int]]:
        """Each query term's BM25 score of every chunk (a terms × chunks array, this index's own statistics) and
        the number of chunks each term occurs in."""
        import numpy as np

        scores = np.zeros((len(query_terms), len(self.chunk_ids)), dtype=np.float64)
        frequencies = [0] * len(query_terms)
        if self._bm25 is None:
            return scores, frequencies
        vocabulary, pointers = self._bm25.vocab_dict, self._bm25.scores["indptr"]
        for row, term in enumerate(query_terms):
            token = vocabulary.get(term)
            if token is None:
                continue
            # one column of the score matrix per token: its entries are the chunks the term occurs in
            frequencies[row] = int(pointers[token + 1] - pointers[token])
            scores[row] = np.asarray(self._bm25.get_scores([term]), dtype=np.float64)
        return scores, frequencies

    def to_bytes(self) -> bytes:
        """A deterministic zip of the bm25s index files plus the chunk ids."""
        files = {_MANIFEST: json.dumps({"format": _FORMAT, "chunk_ids": self.chunk_ids}).encode()}
        if self._bm25 is not None:
            files.update(_bm25_files(self._bm25))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(files):
                info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, files[name])
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> LexicalIndex:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                files = {name: archive.read(name) for name in archive.namelist()}
            manifest = json.loads(files.pop(_MANIFEST))
        except (zipfile.BadZipFile, KeyError, ValueError) as error:
            raise InternalError(f"stored lexical index is unreadable: {error}") from error
        if manifest.get("format") != _FORMAT:
            raise InternalError(f"stored lexical index has format {manifest.get('format')!r}, not {_FORMAT}")
        return cls(manifest["chunk_ids"], _load_bm25(files) if files else None)


def _bm25_files(bm25: Any) -> dict[str, bytes]:
    with tempfile.TemporaryDirectory(prefix="longhaul-index-") as directory:
        bm25.save(directory, show_progress=False)
        return {path.name: path.read_bytes() for path in Path(directory).iterdir() if path.is_file()}


def _load_bm25(files: dict[str, bytes]) -> Any:
    import bm25s

    with tempfile.TemporaryDirectory(prefix="longhaul-index-") as directory:
        for name, content in files.items():
            (Path(directory) / Path(name).name).write_bytes(content)
        return bm25s.BM25.load(directory, show_progress=False)


def group_passages(chunk_ids: Sequence[str], group_size: int) -> list[list[str]]:
    """Consecutive groups of at most `group_size` chunk ids (one model call each)."""
    if group_size < 1:
        raise ValueError("group_size must be at least 1")
    return [list(chunk_ids[i : i + group_size]) for i in range(0, len(chunk_ids), group_size)]


def _idf(documents: int, frequency: int) -> float:
    """BM25's inverse document frequency as bm25s computes it by default (its `lucene` method)."""
    return math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5))


def search_batches(load: Callable[[int], LexicalIndex], batches: int, query: str, k: int) -> list[tuple[str, float]]:
    """Up to `k` (chunk_id, score) pairs over indexes built apart (one per batch of documents, in document order),
    best first, ties broken by chunk order, as one index over all their chunks would rank them.

    One batch is searched as it is. Over several, each batch's score of a query term is rescaled by the ratio of the
    term's inverse document frequency over all batches to its frequency in the batch (BM25's term weight is
    `idf × saturated tf`, and only `idf` depends on the other chunks' terms); the term-frequency part keeps the
    batch's own mean chunk length. Batches are loaded one at a time and reduced to the query terms' scores, so
    searching holds one batch's index at a time."""
    if batches == 1:
        return load(0).search(query, k)
    query_terms = list(dict.fromkeys(terms(query)))
    if batches < 1 or k < 1 or not query_terms:
        return []
    import numpy as np

    chunk_ids: list[str] = []
    parts: list[tuple[Any, list[int], int]] = []
    for number in range(batches):
        index = load(number)
        scores, frequencies = index.term_scores(query_terms)
        chunk_ids.extend(index.chunk_ids)
        parts.append((scores, frequencies, len(index.chunk_ids)))
    documents = sum(size for _, _, size in parts)
    frequency = [sum(part[1][row] for part in parts) for row in range(len(query_terms))]
    weighted = []
    for scores, frequencies, size in parts:
        weights = np.array(
            [_idf(documents, frequency[row]) / _idf(size, f) if f else 0.0 for row, f in enumerate(frequencies)]
        )
        weighted.append(weights @ scores if size else np.zeros(0))
    combined = np.concatenate(weighted)
    order = np.lexsort((np.arange(len(combined)), -combined))
    return [(chunk_ids[i], float(combined[i])) for i in order[:k] if combined[i] > 0]


# ---------------------------------------------------------------------------------------------- depth by class


class Depth(NamedTuple):
    """How deep a job's retrieval goes: passages kept (`top_k`; a recall-oriented class keeps at least
    `per_document` passages for each document, up to `MAX_TOP_K`), passages per evidence-extraction call
    (`group_size`: each group is one model call), and whether a rerank pass orders `RERANK_POOL` times as many BM25
    candidates before the `top_k` are kept."""

    top_k: int
    group_size: int
    rerank: bool
    per_document: int = 0


# By SLA class (seed: a small top-k and a fast reranker for urgent jobs; a larger, recall-oriented search with
# reranking for offline ones). `standard` is what every job had before depths had classes. The eval prints what each
# costs and scores (`python -m evals --small --depths`).
DEPTHS: dict[str, Depth] = {
    "interactive": Depth(top_k=8, group_size=4, rerank=True),
    "standard": Depth(top_k=16, group_size=4, rerank=False),
    # Recall-oriented: at least two passages a document, in calls of two passages. A batch-class job of a few
    # hundred documents makes enough evidence calls for Bedrock's batch lane (its minimum is 100 records a job),
    # where they cost half.
    "batch": Depth(top_k=32, group_size=2, rerank=True, per_document=2),
}
RERANK_POOL = 3
MAX_TOP_K = 400  # a recall-oriented depth's ceiling, whatever the number of documents (at most 200 calls)


def depth_for(
    sla_class: str | None,
    *,
    documents: int = 0,
    top_k: int | None = None,
    group_size: int | None = None,
    rerank: bool | None = None,
) -> Depth:
    """The class's depth for a job of `documents`, with what the request set itself (`max_passages`,
    `passages_per_group`, `rerank`) over it."""
    depth = DEPTHS.get(sla_class or "standard", DEPTHS["standard"])
    class_top_k = max(depth.top_k, min(MAX_TOP_K, depth.per_document * documents))
    return Depth(
        top_k=class_top_k if top_k is None else top_k,
        group_size=depth.group_size if group_size is None else group_size,
        rerank=depth.rerank if rerank is None else rerank,
    )


def rerank(
    query: str, scored: Sequence[tuple[str, float]], texts: Mapping[str, str], k: int
) -> list[tuple[str, float]]:
    """The `k` best of BM25's candidates by a second, finer lexical pass (no model, milliseconds): half the BM25
    score (normalised to the best candidate's), a third the share of the question's distinct terms the passage holds,
    a sixth how close together it holds them (the shortest span of words covering the terms it has). Ties keep BM25's
    order."""
    wanted = list(dict.fromkeys(terms(query)))
    if not scored or not wanted:
        return list(scored[:k])
    best = max(score for _, score in scored) or 1.0
    ranked = []
    for position, (chunk_id, score) in enumerate(scored):
        words = terms(texts.get(chunk_id, ""))
        found = set(words) & set(wanted)
        coverage = len(found) / len(wanted)
        proximity = 1 / (1 + _span(words, found) / max(1, len(found))) if len(found) > 1 else coverage
        combined = 0.5 * score / best + coverage / 3 + proximity / 6
        ranked.append((-combined, position, chunk_id, score))
    ranked.sort()
    return [(chunk_id, score) for _, _, chunk_id, score in ranked[:k]]


def _span(words: Sequence[str], found: set[str]) -> int:
    """The length of the shortest run of `words` holding every term of `found` (a sliding window)."""
    need, have, counts, left, shortest = len(found), 0, dict.fromkeys(found, 0), 0, len(words)
    for right, word in enumerate(words):
        if word in counts:
            counts[word] += 1
            have += counts[word] == 1
        while have == need:
            shortest = min(shortest, right - left + 1)
            gone = words[left]
            if gone in counts:
                counts[gone] -= 1
                have -= counts[gone] == 0
            left += 1
    return shortest
