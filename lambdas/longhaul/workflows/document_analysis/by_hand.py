"""A failed document-analysis job completed by a person (`longhaul.review.completion`).

The person submits the answer and its claims, each citation naming its passage (`chunk_id`) and a quote: the
workflow's own verification (`analysis.verify_citation`) must find every quote on its passage of the job's documents
(and a citation's `document` and `page`, when given, must be the passage's). Unlike the model's draft, where an
unverified citation is dropped, a person's is refused: what a person signs is published whole. The job must have
indexed its documents before it failed (the passages are what citations are verified against).
"""

from typing import Annotated, Any

from pydantic import Field, ValidationError

from longhaul.core.contracts import VISIBLE_SCHEMA, Claim, PersonCompletion, Verification, Visible
from longhaul.core.model import Model
from longhaul.engine.context import StepContext
from longhaul.review.completion import HandResult, ResultRefused, refused_by_model
from longhaul.workflows.document_analysis import analysis
from longhaul.workflows.document_analysis.analysis import Draft, DraftClaim, ReviewedCitation
from longhaul.workflows.document_analysis.spec import EditedClaim
from longhaul.workflows.document_analysis.steps import _batch_key, _chunks_by_id, _cited, _index_batches, _result

PLANNED = "plan_ocr"  # its output names the index batches whose chunks citations are verified against


class HandAnswer(Model):
    """What a person writes: the answer and its claims (the rest of the result is the job's own)."""

    answer: Annotated[str, Field(min_length=1, max_length=20_000, json_schema_extra=VISIBLE_SCHEMA), Visible]
    claims: Annotated[list[EditedClaim], Field(min_length=1, max_length=100)]


def indexed(ctx: StepContext) -> bool:
    """Whether every batch of the job's documents was chunked (what `build_index` writes) before it failed."""
    if PLANNED not in ctx.state.steps:
        return False
    store, count = ctx.services.artifacts, len(_index_batches(ctx))
    return count > 0 and all(store.head(_batch_key(ctx.job_id, "chunks", n)) is not None for n in range(count))


def draft(ctx: StepContext) -> dict[str, Any]:
    """The verified draft, else the model's draft, else a skeleton answer with one claim."""
    steps, store = ctx.state.steps, ctx.services.artifacts
    if "verify_citations" in steps:
        verified = store.get_json(steps["verify_citations"]["verified_key"])
        return {"answer": verified["answer"], "claims": verified["claims"]}
    if "draft_answer" in steps:
        found = Draft.model_validate(store.get_json(steps["draft_answer"]["draft_key"]))
        claims = analysis.drafted_claims(found, _chunks_by_id(ctx, _cited(found)))
        return {"answer": found.answer, "claims": [c.model_dump(mode="json") for c in claims]}
    return {"answer": "", "claims": [{"text": "", "citations": [{"chunk_id": "", "quote": ""}]}]}


def complete(ctx: StepContext, submitted: dict[str, Any], completion: PersonCompletion) -> HandResult:
    """The person's answer with every citation verified on its passage, published as `publish_result` does."""
    try:
        given = HandAnswer.model_validate(submitted)
    except ValidationError as invalid:
        raise refused_by_model(invalid, "the result does not match the workflow's result") from None
    if not indexed(ctx):
        message = "the job failed before its documents were indexed: citations cannot be verified (replay it)"
        raise ResultRefused(message, [{"loc": ["claims"], "msg": message, "type": "business_rule"}])
    reviewed = Draft(
        answer=given.answer,
        claims=[
            DraftClaim(
                text=c.text,
                citations=[
                    ReviewedCitation(chunk_id=x.chunk_id, quote=x.quote, document=x.document, page=x.page)
                    for x in c.citations
                ],
            )
            for c in given.claims
        ],
    )
    chunks = _chunks_by_id(ctx, _cited(reviewed))
    claims, errors = [], []
    for n, claim in enumerate(reviewed.claims):
        citations = []
        for m, citation in enumerate(claim.citations):
            verified = analysis.verify_citation(citation, chunks)
            if verified is None:
                errors.append(
                    {
                        "loc": ["claims", n, "citations", m],
                        "msg": f"the quote is not on passage {citation.chunk_id!r} of the job's documents (or its "
                        "document and page are not the passage's)",
                        "type": "citation_unverified",
                    }
                )
            else:
                citations.append(verified)
        claims.append(Claim(text=claim.text, citations=citations))
    if errors:
        raise ResultRefused("citations that do not verify against the job's documents", errors)
    count = sum(len(c.citations) for c in claims)
    verification = Verification(
        citations_checked=count, citations_verified=count, citations_dropped=0, claims_dropped=0
    )
    result = _result(ctx, given.answer, claims, verification)
    result = result.model_copy(update={"completed_by": "person", "completion": completion})
    return HandResult(result=result, markdown=analysis.render_markdown(result))
