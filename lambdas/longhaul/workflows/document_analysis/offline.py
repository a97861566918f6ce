"""The offline model's answers to document analysis's tasks: it quotes, it never invents.

It reads the request's structured `context` (not the prompt), picks verbatim sentences by term overlap with the
question and answers in the JSON shapes a remote model is asked for (`EvidenceSet`, `Draft`). Same input, same bytes
out. Named by this workflow's requests (`ModelRequest.offline`) and called by `longhaul.adapters.models.offline`.
"""

import json
from typing import Any

from longhaul.core.model import Model
from longhaul.documents.parsing import sentence_spans
from longhaul.workflows.document_analysis.retrieval import terms

EXTRACT = "longhaul.workflows.document_analysis.offline:extract"
DRAFT = "longhaul.workflows.document_analysis.offline:draft"
MAX_QUOTE_CHARS = 400
QUOTES_PER_PASSAGE = 2
MAX_CLAIMS = 6
MIN_STATEMENT_WORDS = 5
ANSWER_QUOTES = 3


class _Passage(Model):
    chunk_id: str
    text: str


class _ExtractContext(Model):
    question: str
    passages: list[_Passage]


class _EvidenceItem(Model):
    chunk_id: str
    quote: str
    relevance: float
    document: str
    page: int


class _DraftContext(Model):
    question: str
    evidence: list[_EvidenceItem]


def _fragment(quote: str) -> str:
    """`quote`, or its longest prefix of whole words within `MAX_QUOTE_CHARS`."""
    if len(quote) <= MAX_QUOTE_CHARS:
        return quote
    cut = quote.rfind(" ", 0, MAX_QUOTE_CHARS)
    return quote[: cut if cut > 0 else MAX_QUOTE_CHARS].rstrip()


def _overlap(text: str, question_terms: frozenset[str]) -> float:
    return len(question_terms.intersection(terms(text))) / len(question_terms) if question_terms else 0.0


def _is_statement(sentence: str) -> bool:
    """A sentence worth quoting as evidence: not a heading, not a fragment of a few words."""
    stripped = sentence.strip()
    return not stripped.startswith(("#", "|")) and len(stripped.split()) >= MIN_STATEMENT_WORDS


def _passage_evidence(passage: _Passage, question_terms: frozenset[str]) -> list[dict[str, Any]]:
    spans = sentence_spans(passage.text)
    sentences = [s for s in (_fragment(passage.text[start:end]) for start, end in spans) if _is_statement(s)]
    scored = [(_overlap(sentence, question_terms), i, sentence) for i, sentence in enumerate(sentences)]
    best = sorted((item for item in scored if item[0] > 0), key=lambda item: (-item[0], item[1]))
    return [
        {"chunk_id": passage.chunk_id, "quote": sentence, "relevance": round(min(score, 1.0), 3)}
        for score, _, sentence in sorted(best[:QUOTES_PER_PASSAGE], key=lambda item: item[1])
    ]


def _extract(context: _ExtractContext) -> dict[str, Any]:
    question_terms = frozenset(terms(context.question))
    return {"evidence": [item for p in context.passages for item in _passage_evidence(p, question_terms)]}


def _strongest(evidence: list[_EvidenceItem]) -> list[_EvidenceItem]:
    ranked = sorted(enumerate(evidence), key=lambda pair: (-pair[1].relevance, pair[0]))
    chosen: dict[str, _EvidenceItem] = {}
    for _, item in ranked:
        chosen.setdefault(" ".join(item.quote.split()), item)
    return list(chosen.values())[:MAX_CLAIMS]


def _claim(item: _EvidenceItem) -> dict[str, Any]:
    text = f'{item.document}, page {item.page}: "{" ".join(item.quote.split())}"'
    return {"text": text, "citations": [{"chunk_id": item.chunk_id, "quote": item.quote}]}


def _answer(model_id: str, question: str, items: list[_EvidenceItem]) -> str:
    if not items:
        return (
            f"Offline extractive answer ({model_id}; no language model was used): "
            f"no passage in the documents shares terms with the question {question!r}."
        )
    documents = ", ".join(dict.fromkeys(item.document for item in items))
    highlights = "; ".join(
        f"{item.document} p.{item.page}: \u201c{' '.join(item.quote.split())}\u201d" for item in items[:ANSWER_QUOTES]
    )
    return (
        f"Offline extractive answer ({model_id}; no language model was used, nothing was paraphrased). "
        f"The passages that best match the question by term overlap say: {highlights}. "
        f"All {len(items)} claims below quote {documents} verbatim; read them as evidence to review, "
        "not as a reasoned conclusion."
    )


def _draft(model_id: str, context: _DraftContext) -> dict[str, Any]:
    items = _strongest(context.evidence)
    return {"answer": _answer(model_id, context.question, items), "claims": [_claim(item) for item in items]}


def extract(context: dict[str, Any], model_id: str) -> str:
    """`extract_evidence`: up to two verbatim sentences per passage that share terms with the question."""
    return json.dumps(_extract(_ExtractContext.model_validate(context)), ensure_ascii=False)


def draft(context: dict[str, Any], model_id: str) -> str:
    """`draft_answer`: an answer that says it is extractive, and one claim per strongest distinct quote."""
    return json.dumps(_draft(model_id, _DraftContext.model_validate(context)), ensure_ascii=False)
