"""Workflow `document-analysis`, its domain: the submission logic and one function per step of its spec.

Steps exchange S3 keys, never text: list_documents → parse_documents (per document; a group of documents is read
with one request and written as one object) → plan_ocr → ocr_pages (per page batch, in the OCR worker's container;
only when a page has no text layer) → build_index (per batch of documents: chunks and a BM25 index each) →
retrieve_passages (searches the batches' indexes as one) → extract_evidence (per passage group) → draft_answer →
verify_citations → publish_result. No step after parsing reads every document: each reads the batches it needs (a
chunk's batch follows from its id).
"""

from collections.abc import Iterable
from typing import Any

from longhaul.core import tracing
from longhaul.core.contracts import (
    Claim,
    DocumentAnalysisInput,
    DocumentSummary,
    JobResult,
    JobStatus,
    PageText,
    Verification,
)
from longhaul.core.errors import CancelledError, InvalidInputError
from longhaul.core.model import Model, adapter
from longhaul.core.records import Job
from longhaul.core.step_events import Item
from longhaul.documents import ocr
from longhaul.documents.intake import (
    DocumentReader,
    Intake,
    PreparedInput,
    StoredDocument,
    archive_upload_id,
    read_document,
    submitted_documents,
)
from longhaul.documents.parsing import Chunk, ParsedDocument, chunk_document, parse_document
from longhaul.engine.context import ItemGroup, StepContext
from longhaul.engine.items import ItemBatch, ItemList, write_item_list
from longhaul.review.contracts import ReviewEvidence, ReviewMaterial
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.artifacts import ArtifactStore
from longhaul.workflows.document_analysis import analysis, batches
from longhaul.workflows.document_analysis.analysis import Draft, DraftClaim, Evidence, EvidenceSet, ReviewedCitation
from longhaul.workflows.document_analysis.batches import IndexBatch, batch_of, chunk_document_index
from longhaul.workflows.document_analysis.retrieval import (
    RERANK_POOL,
    LexicalIndex,
    depth_for,
    group_passages,
    rerank,
    search_batches,
)
from longhaul.workflows.document_analysis.spec import AnswerEdits

MAX_EVIDENCE = 12
NO_EVIDENCE = "The documents contain no passage that bears on this question, so there is nothing to cite."
_CHUNKS = adapter(list[Chunk])
_SUMMARIES = adapter(list[DocumentSummary])
_MANIFEST = adapter(list[ItemBatch])


class JobInput(Model):
    """The accepted input, as stored for the steps (documents by reference)."""

    workflow: str
    question: str
    documents: list[StoredDocument]
    # What the request set itself; None: the depth of the job's SLA class (`retrieval.DEPTHS`).
    max_passages: int | None = None
    passages_per_group: int | None = None
    rerank: bool | None = None


def prepare(intake: Intake, job_input: DocumentAnalysisInput) -> PreparedInput:
    if job_input.archive is not None:
        documents = intake.archive(job_input.archive, first_index=0, loc=["archive"])
    else:
        documents = intake.documents(job_input.documents or [], loc=["documents"])
    payload = JobInput(
        workflow="document-analysis",
        question=job_input.question,
        documents=documents,
        **{  # the retrieval depth the request set; the rest is its class's, read by `retrieve_passages`
            name: getattr(job_input, name)
            for name in ("max_passages", "passages_per_group", "rerank")
            if name in job_input.model_fields_set and getattr(job_input, name) is not None
        },
    )
    return PreparedInput(
        payload=payload, estimated_sla_seconds=estimate_sla_seconds(job_input, len(documents)), size=len(documents)
    )


def submitted_input(store: ArtifactStore, stored: dict[str, Any]) -> dict[str, Any]:
    """The input of a job as its request gave it (the workflow's input model), from the input `prepare` stored: what
    an operator's fix patches."""
    job_input = JobInput.model_validate(stored)
    archive = archive_upload_id(job_input.documents)
    found: dict[str, Any] = {"question": job_input.question}
    if archive is not None:
        found["archive"] = {"upload_id": archive}
    else:
        found["documents"] = submitted_documents(store, job_input.documents)
    for name in ("max_passages", "passages_per_group", "rerank"):
        if getattr(job_input, name) is not None:
            found[name] = getattr(job_input, name)
    return found


def estimate_sla_seconds(job_input: DocumentAnalysisInput, documents: int) -> int:
    inline_chars = sum(len(d.text or "") for d in job_input.documents or ())
    uploads = documents - sum(1 for d in job_input.documents or () if d.text is not None)
    return 30 + 5 * documents + 20 * uploads + inline_chars // 20_000


def _input(ctx: StepContext) -> JobInput:
    return JobInput.model_validate(ctx.services.artifacts.get_json(ctx.state.input_key))


def list_documents(ctx: StepContext) -> dict[str, Any]:
    """The job's documents as the item list `parse_documents` runs over (each item's ref: its `StoredDocument`), in
    groups by the bytes each has to parse (an upload's size is not known here: it is parsed alone)."""
    documents = _input(ctx).documents
    refs = [d.model_dump(mode="json") for d in documents]
    weights = [_bytes_to_parse(d) for d in documents]
    return {
        "documents": write_item_list(
            ctx.services.artifacts, ctx.job_id, "list_documents", "documents", refs, weights=weights
        )
    }


def _bytes_to_parse(document: StoredDocument) -> int | None:
    if document.span is not None:
        return document.span.length
    if document.member is not None:
        return document.member.size
    return None


class ParsedGroup(Model):
    """What `parse_documents` writes for one group of its items: the group's parsed documents in one object (a
    document that could not be parsed is absent: its item failed), so a 1,000-document job writes 20 objects, not
    1,000, and a reader reads a group's object and picks its documents."""

    documents: list[ParsedDocument]


def _group_key(job_id: str, first_item: int) -> str:
    """The object of the group of `parse_documents`' items beginning at `first_item` (groups are fixed by the item
    list, so a retried or re-delivered group writes the same key)."""
    return keys.work_key(job_id, "parse_documents", f"group-{first_item:05d}.json")


def _parse_groups(store: ArtifactStore, documents: dict[str, Any]) -> list[ItemBatch]:
    """The groups of `list_documents`' item list (in the state while they are few, else from its manifest)."""
    listed = ItemList.model_validate(documents)
    if listed.groups is not None:
        return listed.groups
    return _MANIFEST.validate_python(store.get_json(listed.manifest_key))


def _parsed_documents(ctx: StepContext, indexes: Iterable[int] | None = None) -> dict[int, ParsedDocument]:
    """The parsed documents by index: all of them, or those of `indexes` (each group's object read once, groups read
    at once)."""
    store = ctx.services.artifacts
    groups = _parse_groups(store, ctx.output_of("list_documents")["documents"])
    wanted = None if indexes is None else set(indexes)
    if wanted is not None:
        groups = [g for g in groups if any(int(item.ref["index"]) in wanted for item in g.items)]
    read = store.get_json_many([_group_key(ctx.job_id, g.items[0].index) for g in groups])
    documents = (d for group in read for d in ParsedGroup.model_validate(group).documents)
    return {d.index: d for d in documents if wanted is None or d.index in wanted}


def parse_documents(ctx: StepContext) -> dict[str, Any]:
    """One document (a fan-out item, run in a group of documents). The group's first item to run reads the group's
    documents (inline texts: one ranged GET for the group), parses them and writes them as one object at a key fixed
    by the group; each item then answers for its own document (raising its document's error, if it had one). A retried
    group parses and writes the same object again (parsing is deterministic), so its committed items stay valid."""
    doc = StoredDocument.model_validate(ctx.event.ref)
    group = ctx.group or ItemGroup(items=_group_of(ctx, ctx.event.item))
    if "parsed" not in group.shared:
        group.shared["parsed"] = _parse_group(ctx, group.items)
    key, outcomes = group.shared["parsed"]
    parsed = outcomes[doc.index]
    if isinstance(parsed, InvalidInputError):
        raise parsed
    return {"parsed_key": key, "pages": len(parsed.pages), "pages_needing_ocr": len(parsed.pages_needing_ocr)}


def _group_of(ctx: StepContext, item: int | None) -> list[Item]:
    """The items of the group holding `item` (an item run on its own: its group's object is still the group's)."""
    groups = _parse_groups(ctx.services.artifacts, ctx.output_of("list_documents")["documents"])
    return next(g.items for g in groups if any(i.index == item for i in g.items))


def _parse_group(ctx: StepContext, items: list[Item]) -> tuple[str, dict[int, ParsedDocument | InvalidInputError]]:
    """Parse a group's documents and write them as one object; each document's parse or its (deterministic) input
    error by index. Any other failure (a read that failed) is raised before anything is written: the object only
    ever holds what every delivery of the group would write."""
    store = ctx.services.artifacts
    documents = [StoredDocument.model_validate(item.ref) for item in items]
    reader = DocumentReader(store)
    reader.prefetch(documents)
    outcomes: dict[int, ParsedDocument | InvalidInputError] = {}
    for document in documents:
        try:
            outcomes[document.index] = parse_document(
                index=document.index, name=document.name, data=reader.read(document), media_type=document.media_type
            )
        except InvalidInputError as error:
            outcomes[document.index] = error
    parsed = [p for p in outcomes.values() if isinstance(p, ParsedDocument)]
    key = store.put_json(_group_key(ctx.job_id, items[0].index), ParsedGroup(documents=parsed))
    return key, outcomes


def plan_ocr(ctx: StepContext) -> dict[str, Any]:
    """The pages without a text layer, across documents, in batches: the OCR container step's items."""
    store = ctx.services.artifacts
    stored = _input(ctx).documents
    parsed = _parsed_documents(ctx)
    documents = [(parsed[doc.index], doc) for doc in stored]
    planned = ocr.plan_batches(documents)
    ocr_batches = [
        store.put_json(keys.work_key(ctx.job_id, "plan_ocr", f"ocr-batch-{batch.number:03d}.json"), batch)
        for batch in planned
    ]
    index_batches = batches.plan([d for d, _ in documents], planned)
    return {
        "documents": len(documents),
        "pages": sum(len(d.pages) for d, _ in documents),
        "pages_needing_ocr": sum(len(d.pages_needing_ocr) for d, _ in documents),
        # the container step's items: empty when every page has a text layer
        "ocr_batches": write_item_list(store, ctx.job_id, "plan_ocr", "ocr_batches", ocr_batches),
        # build_index's items: batches of consecutive documents (descriptors, never text)
        "index_batches": write_item_list(
            store, ctx.job_id, "plan_ocr", "index_batches", [b.model_dump(mode="json") for b in index_batches]
        ),
    }


def ocr_pages(ctx: StepContext) -> dict[str, Any]:
    """One page batch, read in the OCR worker (a container task resumed by its token, never a Lambda).

    Between pages it checks that the job is still running and that the worker may go on (its heartbeat was
    accepted); a cancelled job stops it, and the runner then commits nothing.
    """
    worker, store = ocr.current(), ctx.services.artifacts  # set by the worker's entrypoint
    batch = ocr.OcrBatch.model_validate(store.get_json(str(ctx.event.ref)))

    def between_pages() -> None:
        worker.check()
        job = ctx.services.jobs.get_job(ctx.job_id)
        if job is None or job.status not in (JobStatus.RUNNING, JobStatus.RETRYING):
            raise CancelledError(f"job {ctx.job_id} is no longer running; OCR stopped", step=ctx.event.step)

    result = ocr.read_batch(
        batch,
        fetch=lambda pages: read_document(store, pages.source()),
        engine=worker.engine,
        between_pages=between_pages,
    )
    key = store.put_json(keys.work_key(ctx.job_id, ocr.STEP, f"batch-{batch.number:03d}.json"), result)
    read = sum(1 for p in result.pages if p.status == "read")
    return {"ocr_key": key, "pages_read": read, "pages_unreadable": len(result.pages) - read}


def _batch_documents(ctx: StepContext, batch: IndexBatch) -> list[ParsedDocument]:
    """A batch's parsed documents, with the text of the pages OCR read (the results of the OCR batches that read
    pages of them, at their fixed keys)."""
    store, job_id = ctx.services.artifacts, ctx.job_id
    results = [
        ocr.OcrBatchResult.model_validate(read)
        for read in store.get_json_many(
            [keys.work_key(job_id, ocr.STEP, f"batch-{n:03d}.json") for n in batch.ocr_batches]
        )
    ]
    parsed = _parsed_documents(ctx, range(batch.first, batch.end))
    return [ocr.apply_ocr(parsed[i], results) for i in range(batch.first, batch.end)]


def _batch_key(job_id: str, what: str, number: int, extension: str = "json") -> str:
    return keys.work_key(job_id, "build_index", f"{what}-{number:03d}.{extension}")


def build_index(ctx: StepContext) -> dict[str, Any]:
    """One batch of documents (a fan-out item): chunk them, index the chunks (BM25) and write the batch's chunks,
    index and document summaries at keys fixed by its number."""
    store, batch = ctx.services.artifacts, IndexBatch.model_validate(ctx.event.ref)
    documents = _batch_documents(ctx, batch)
    chunks = [chunk for document in documents for chunk in chunk_document(document)]
    chunks_key = store.put_bytes(
        _batch_key(ctx.job_id, "chunks", batch.number), _CHUNKS.dump_json(chunks), "application/json"
    )
    index_key = store.put_bytes(
        _batch_key(ctx.job_id, "bm25", batch.number, "zip"), LexicalIndex.build(chunks).to_bytes()
    )
    summaries = [_summary(d) for d in documents]
    store.put_bytes(_batch_key(ctx.job_id, "documents", batch.number), _SUMMARIES.dump_json(summaries))
    return {"chunks_key": chunks_key, "index_key": index_key, "documents": len(documents), "chunks": len(chunks)}


def _summary(document: ParsedDocument) -> DocumentSummary:
    return DocumentSummary(
        name=document.name,
        media_type=document.media_type,
        pages=len(document.pages),
        pages_needing_ocr=document.pages_needing_ocr,
        pages_ocr=document.pages_ocr,
        pages_unreadable=document.pages_unreadable,
    )


def _index_batches(ctx: StepContext) -> list[IndexBatch]:
    """build_index's batches, in order (from the state while they are few, else from their manifest)."""
    listed = ItemList.model_validate(ctx.output_of("plan_ocr")["index_batches"])
    items = listed.items
    if items is None:
        items = [
            i for b in _MANIFEST.validate_python(ctx.services.artifacts.get_json(listed.manifest_key)) for i in b.items
        ]
    return [IndexBatch.model_validate(item.ref) for item in items]


def _batch_chunks(store: ArtifactStore, job_id: str, number: int) -> list[Chunk]:
    return _CHUNKS.validate_json(store.get_bytes(_batch_key(job_id, "chunks", number)))


def _chunks_by_id(ctx: StepContext, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
    """The chunks of the batches holding `chunk_ids` (a map from id to chunk: an id no chunk has is absent), each
    batch read once."""
    index_batches = _index_batches(ctx)
    wanted = set()
    for chunk_id in chunk_ids:
        document = chunk_document_index(chunk_id)
        batch = batch_of(index_batches, document) if document is not None else None
        if batch is not None:
            wanted.add(batch.number)
    store = ctx.services.artifacts
    return {c.chunk_id: c for n in sorted(wanted) for c in _batch_chunks(store, ctx.job_id, n)}


def retrieve_passages(ctx: StepContext) -> dict[str, Any]:
    """The question's best passages over every batch's index (searched as one index), in groups for extraction."""
    store = ctx.services.artifacts
    job_input = _input(ctx)
    batches = _index_batches(ctx)
    count = len(batches)
    job = ctx.job or ctx.services.jobs.get_job(ctx.job_id)
    depth = depth_for(
        job.sla_class if job else None,
        documents=max((batch.end for batch in batches), default=0),
        top_k=job_input.max_passages,
        group_size=job_input.passages_per_group,
        rerank=job_input.rerank,
    )

    def load(number: int) -> LexicalIndex:
        return LexicalIndex.from_bytes(store.get_bytes(_batch_key(ctx.job_id, "bm25", number, "zip")))

    attributes = {"longhaul.retrieval.indexes": count, "longhaul.retrieval.rerank": depth.rerank}
    with tracing.span("retrieval", attributes) as span:
        pool = depth.top_k * RERANK_POOL if depth.rerank else depth.top_k
        scored = search_batches(load, count, job_input.question, pool)
        chunks = _chunks_by_id(ctx, (chunk_id for chunk_id, _ in scored))
        if depth.rerank:
            texts = {chunk_id: chunk.text for chunk_id, chunk in chunks.items()}
            scored = rerank(job_input.question, scored, texts, depth.top_k)
        if span is not None:  # figures only: never the question or a passage's text
            scores = [float(score) for _, score in scored]
            span.set_attributes(
                {
                    "longhaul.retrieval.passages": len(scored),
                    "longhaul.retrieval.max_passages": depth.top_k,
                    "longhaul.retrieval.top_score": max(scores, default=0.0),
                    "longhaul.retrieval.min_score": min(scores, default=0.0),
                }
            )
    hits = [chunk_id for chunk_id, _ in scored]
    if not hits:  # no lexical match: let the model look at the beginning of the documents
        for number in range(count):
            hits.extend(load(number).chunk_ids[: depth.group_size - len(hits)])
            if len(hits) >= depth.group_size:
                break
        chunks = _chunks_by_id(ctx, hits)
    if not hits:
        raise InvalidInputError("no document has extractable text (no text layer, and OCR read nothing)")
    groups = []
    for number, group in enumerate(group_passages(hits, depth.group_size)):
        key = keys.work_key(ctx.job_id, "retrieve_passages", f"group-{number:03d}.json")
        groups.append(store.put_bytes(key, _CHUNKS.dump_json([chunks[i] for i in group]), "application/json"))
    listed = write_item_list(store, ctx.job_id, "retrieve_passages", "groups", groups)
    return {"groups": listed, "passages": len(hits), "depth": depth._asdict()}


def extract_evidence(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    passages = _CHUNKS.validate_python(store.get_json(str(ctx.event.ref)))
    evidence, _ = analysis.extract_evidence(_input(ctx).question, passages, ctx.model())
    key = store.put_json(keys.work_key(ctx.job_id, "extract_evidence", f"group-{ctx.event.item:03d}.json"), evidence)
    return {"evidence_key": key, "evidence": len(evidence.evidence)}


def draft_answer(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    evidence: list[Evidence] = []
    for number in range(int(ctx.output_of("retrieve_passages")["groups"]["count"])):
        key = keys.work_key(ctx.job_id, "extract_evidence", f"group-{number:03d}.json")
        evidence.extend(EvidenceSet.model_validate(store.get_json(key)).evidence)
    chunks = _chunks_by_id(ctx, (e.chunk_id for e in evidence))
    ranked = analysis.rank_evidence(evidence, chunks, limit=MAX_EVIDENCE)
    if ranked:
        draft, _ = analysis.draft_answer(_input(ctx).question, ranked, ctx.model())
    else:  # nothing to cite: say so, without a model call
        draft = Draft(answer=NO_EVIDENCE, claims=[])
    key = store.put_json(keys.work_key(ctx.job_id, "draft_answer", "draft.json"), draft)
    # The draft, shaped as the result (its verification to come): the job's provisional result (the spec marks the
    # step `provisional`), readable while citations are verified.
    claims = analysis.drafted_claims(draft, _chunks_by_id(ctx, _cited(draft)))
    provisional = _result(ctx, draft.answer, claims, None, markdown=False)
    return {"draft_key": key, "claims": len(draft.claims), **ctx.provisional(provisional)}


def _cited(draft: Draft) -> set[str]:
    return {citation.chunk_id for claim in draft.claims for citation in claim.citations}


def verify_citations(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    draft = Draft.model_validate(store.get_json(ctx.output_of("draft_answer")["draft_key"]))
    if draft.claims:
        claims, verification = analysis.verify_citations(draft, _chunks_by_id(ctx, _cited(draft)))
    else:
        claims, verification = (
            [],
            Verification(citations_checked=0, citations_verified=0, citations_dropped=0, claims_dropped=0),
        )
    key = store.put_json(
        keys.work_key(ctx.job_id, "verify_citations", "verified.json"),
        {"answer": draft.answer, "claims": [c.model_dump() for c in claims], "verification": verification.model_dump()},
    )
    return {"verified_key": key, "claims": len(claims), "citations_dropped": verification.citations_dropped}


# ---------------------------------------------------------------------- review


def review_reasons(ctx: StepContext) -> list[str]:
    """`auto` review: when citation verification dropped a claim."""
    verified = ctx.services.artifacts.get_json(ctx.output_of("verify_citations")["verified_key"])
    verification = Verification.model_validate(verified["verification"])
    if verification.claims_dropped:
        return [
            f"citation verification dropped {verification.claims_dropped} claim(s) "
            f"({verification.citations_dropped} citation(s) not found on their pages)"
        ]
    return []


def review_material(ctx: StepContext) -> ReviewMaterial:
    """The verified draft, and every citation the model gave (verified or not) with its document and page."""
    store = ctx.services.artifacts
    verified = store.get_json(ctx.output_of("verify_citations")["verified_key"])
    draft = Draft.model_validate(store.get_json(ctx.output_of("draft_answer")["draft_key"]))
    chunks = _chunks_by_id(ctx, _cited(draft))
    kept = {(c["chunk_id"], c["quote"]) for claim in verified["claims"] for c in claim["citations"]}
    evidence = []
    for claim in draft.claims:
        for citation in claim.citations:
            chunk = chunks.get(citation.chunk_id)
            evidence.append(
                ReviewEvidence(
                    claim=claim.text,
                    document=chunk.document if chunk else "(unknown passage)",
                    page=chunk.page if chunk else None,
                    quote=citation.quote,
                    verified=(citation.chunk_id, citation.quote) in kept,
                )
            )
    return ReviewMaterial(draft=verified, evidence=evidence)


def _reviewed(ctx: StepContext, verified: dict[str, Any]) -> dict[str, Any]:
    """The verified draft with a reviewer's edits: edited claims are verified against their pages like the model's."""
    decision = ctx.state.steps.get("review") or {}
    if not decision.get("edits_key"):
        return verified
    edits = AnswerEdits.model_validate(ctx.services.artifacts.get_json(str(decision["edits_key"])))
    answer = edits.answer if edits.answer is not None else verified["answer"]
    if edits.claims is None:
        return {**verified, "answer": answer}
    edited = [
        DraftClaim(
            text=claim.text,
            citations=[
                ReviewedCitation(chunk_id=c.chunk_id, quote=c.quote, document=c.document, page=c.page)
                for c in claim.citations
            ],
        )
        for claim in edits.claims
    ]
    draft = Draft(answer=answer, claims=edited)
    claims, verification = analysis.verify_citations(draft, _chunks_by_id(ctx, _cited(draft)))
    return {"answer": answer, "claims": [c.model_dump() for c in claims], "verification": verification.model_dump()}


def _result(
    ctx: StepContext, answer: str, claims: list[Claim], verification: Verification | None, *, markdown: bool = True
) -> JobResult:
    """The job's result: the answer and its claims, with the documents' summaries (the provisional one has no
    verification and no Markdown rendering)."""
    store = ctx.services.artifacts
    summaries = [
        summary
        for number in range(len(_index_batches(ctx)))
        for summary in _SUMMARIES.validate_json(store.get_bytes(_batch_key(ctx.job_id, "documents", number)))
    ]
    job = ctx.job or ctx.services.jobs.get_job(ctx.job_id)
    return JobResult(
        job_id=ctx.job_id,
        question=_input(ctx).question,
        answer=answer,
        claims=claims,
        citations=analysis.unique_citations(claims),
        verification=verification,
        model=job.model if job else "",
        documents=summaries,
        markdown_key=keys.result_key(ctx.job_id, "md") if markdown else None,
    )


def publish_result(ctx: StepContext) -> dict[str, Any]:
    store = ctx.services.artifacts
    verified = _reviewed(ctx, store.get_json(ctx.output_of("verify_citations")["verified_key"]))
    claims = [Claim.model_validate(c) for c in verified["claims"]]
    result = _result(ctx, verified["answer"], claims, Verification.model_validate(verified["verification"]))
    store.put_bytes(result.markdown_key or "", analysis.render_markdown(result).encode(), "text/markdown")
    key = store.put_json(keys.result_key(ctx.job_id), result)
    return {"result_key": key, "claims": len(claims), "citations": len(result.citations)}


# ---------------------------------------------------------------------- a page, for people


def page_text(services: Services, job: Job, document: str, page: int) -> PageText | None:
    """A page of one of the job's documents as the steps read it (with the text OCR read), where a citation's quote
    is shown in its page; None when the job has no such page or its intermediate artifacts have expired."""
    store = services.artifacts
    stored = next((d for d in _stored_documents(store, job) if d.name == document), None)
    item = services.checkpoints.get_step(job.job_id, "parse_documents", stored.index) if stored else None
    parsed_key = item.output.get("parsed_key") if item and item.succeeded and item.output else None
    if stored is None or not parsed_key or store.head(parsed_key) is None:
        return None
    read = store.get_json(parsed_key)
    # a group's object; a job parsed before documents were written in groups has one object per document
    group = ParsedGroup.model_validate(read) if "documents" in read else ParsedGroup(documents=[read])
    parsed = next((d for d in group.documents if d.index == stored.index), None)
    if parsed is None:
        return None
    planned = services.checkpoints.get_step(job.job_id, "plan_ocr")
    batches = int(planned.output["ocr_batches"]["count"]) if planned and planned.succeeded and planned.output else 0
    results = []
    for number in range(batches):
        key = keys.work_key(job.job_id, ocr.STEP, f"batch-{number:03d}.json")
        if store.head(key) is not None:
            results.append(ocr.OcrBatchResult.model_validate(store.get_json(key)))
    found = next((p for p in ocr.apply_ocr(parsed, results).pages if p.number == page), None)
    if found is None:
        return None
    return PageText(document=document, page=page, text=found.text, source=found.source)


def _stored_documents(store: ArtifactStore, job: Job) -> list[StoredDocument]:
    if store.head(job.input_key) is None:
        return []
    return JobInput.model_validate(store.get_json(job.input_key)).documents
