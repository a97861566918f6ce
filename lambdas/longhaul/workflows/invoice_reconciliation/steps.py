"""Workflow `invoice-reconciliation`, its domain: the submission logic and one function per step of its spec.

Steps exchange S3 keys, never text: parse_documents → extract_invoices (per invoice: extract through the model port,
source every value, re-extract with the sourcing errors as feedback, bounded) → price_list (a signal step: a late
price list, waited for when the submission asks, `price_list_wait`) → check_invoices (business rules and the
contract, or the price list signalled in its place) → summarize_findings (the model's summary) → publish_report (the
summary is used only if every figure in it is a validated number; otherwise the deterministic one, and that is
recorded).
"""

from collections.abc import Sequence
from typing import Any

from longhaul.core.errors import InvalidInputError
from longhaul.core.model import Model
from longhaul.documents.intake import (
    DocumentReader,
    Intake,
    PreparedInput,
    StoredDocument,
    archive_upload_id,
    submitted_documents,
)
from longhaul.engine.context import StepContext
from longhaul.engine.items import write_item_list
from longhaul.review.contracts import ReviewEvidence, ReviewMaterial
from longhaul.storage import artifacts as keys
from longhaul.storage.artifacts import ArtifactStore
from longhaul.workflows.invoice_reconciliation import prompts, report, sourcing
from longhaul.workflows.invoice_reconciliation.models import ContractSummary, ExtractedInvoice, InvoiceResult
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList, PriceListError, parse_price_list
from longhaul.workflows.invoice_reconciliation.sourcing import SourcingError
from longhaul.workflows.invoice_reconciliation.spec import (
    MAX_INVOICES,
    InvoiceReconciliationInput,
    PriceListSignal,
    SummaryEdits,
)

WORKFLOW = "invoice-reconciliation"
DISPUTES = "dispute-resolution"  # the workflow of the child step `resolve_disputes`
MAX_REEXTRACTIONS = 2  # after the first extraction, at most this many more with the sourcing errors as feedback


class JobInput(Model):
    """The accepted input, as stored for the steps (documents by reference)."""

    workflow: str
    contract: StoredDocument
    invoices: list[StoredDocument]
    await_price_list_seconds: int | None = None  # wait this long for signal `price_list` (None: do not wait)
    resolve_disputes: dict[str, Any] | None = None  # the request's `resolve_disputes`: a dispute child job


class Extraction(Model):
    """One invoice's extraction and the sourcing errors that survived re-extraction."""

    invoice: ExtractedInvoice
    errors: list[SourcingError]
    attempts: int


class Checked(Model):
    contract: ContractSummary
    invoices: list[InvoiceResult]


def _pages(data: bytes, name: str, media_type: str) -> list[tuple[int, str]]:
    from longhaul.documents.parsing import parse_document  # pypdf: only where a document is read

    parsed = parse_document(index=0, name=name, data=data, media_type=media_type)
    return [(page.number, page.text) for page in parsed.pages if not page.needs_ocr]


# ---------------------------------------------------------------------- submission


def prepare(intake: Intake, job_input: InvoiceReconciliationInput) -> PreparedInput:
    intake.look_up([job_input.contract, *(job_input.invoices or ())])
    contract = intake.document(job_input.contract, index=0, loc=["contract"])
    if job_input.invoices_archive is not None:
        invoices = intake.archive(
            job_input.invoices_archive, first_index=1, loc=["invoices_archive"], max_documents=MAX_INVOICES
        )
        if contract.name in {d.name for d in invoices}:
            intake.problem(["invoices_archive"], f"a member is named like the contract ({contract.name!r})")
    else:
        invoices = [
            intake.document(d, index=i + 1, loc=["invoices", i]) for i, d in enumerate(job_input.invoices or ())
        ]
    if job_input.resolve_disputes is not None:
        _check_disputes(intake, job_input.resolve_disputes.model_dump(exclude_none=True))
    intake.check()  # an upload that is missing says so before the contract is read
    try:
        parse_price_list(contract.name, _pages(intake.read(contract), contract.name, contract.media_type))
    except PriceListError as error:
        intake.problem(["contract"], str(error))
    uploads = sum(1 for d in (job_input.contract, *(job_input.invoices or ())) if d.upload_id)
    uploads += len(invoices) if job_input.invoices_archive is not None else 0
    return PreparedInput(
        payload=JobInput(
            workflow=WORKFLOW,
            contract=contract,
            invoices=invoices,
            await_price_list_seconds=job_input.await_price_list.timeout_seconds if job_input.await_price_list else None,
            resolve_disputes=job_input.resolve_disputes.model_dump() if job_input.resolve_disputes else None,
        ),
        estimated_sla_seconds=20 + 10 * len(invoices) + 15 * uploads,
        size=len(invoices),
    )


def _check_disputes(intake: Intake, wanted: dict[str, Any]) -> None:
    """`resolve_disputes` as the dispute child's input will take it (its addresses), checked now by that workflow's
    model (found in the registry: this package imports no other workflow's)."""
    from pydantic import ValidationError

    from longhaul.engine.spec import registry

    placeholder = "job_" + "0" * 28
    try:
        registry()[DISPUTES].input_model.model_validate({"reconciliation_job_id": placeholder, **wanted})
    except ValidationError as invalid:
        for error in invalid.errors(include_url=False, include_input=False):
            intake.problem(["resolve_disputes", *error["loc"]], error["msg"])


def submitted_input(store: ArtifactStore, stored: dict[str, Any]) -> dict[str, Any]:
    """The input of a job as its request gave it (the workflow's input model), from the input `prepare` stored: what
    an operator's fix patches."""
    job_input = JobInput.model_validate(stored)
    found: dict[str, Any] = {"contract": submitted_documents(store, [job_input.contract])[0]}
    archive = archive_upload_id(job_input.invoices)
    if archive is not None:
        found["invoices_archive"] = {"upload_id": archive}
    else:
        found["invoices"] = submitted_documents(store, job_input.invoices)
    if job_input.await_price_list_seconds is not None:
        found["await_price_list"] = {"timeout_seconds": job_input.await_price_list_seconds}
    if job_input.resolve_disputes is not None:
        found["resolve_disputes"] = job_input.resolve_disputes
    return found


# ---------------------------------------------------------------------- steps


def _input(ctx: StepContext) -> JobInput:
    return JobInput.model_validate(ctx.services.artifacts.get_json(ctx.state.input_key))


def _price_list(ctx: StepContext) -> PriceList:
    """The price list the invoices are checked against: one sent late (signal `price_list`) replaces the contract's."""
    late = ctx.signal("price_list", PriceListSignal)
    if late is not None:
        return parse_price_list(late.name, [(1, late.text)])
    return PriceList.model_validate(ctx.services.artifacts.get_json(ctx.output_of("parse_documents")["price_list_key"]))


def price_list_wait(ctx: StepContext) -> int | None:
    """The signal step `price_list`: how long this job waits for a late price list (None: it does not wait)."""
    return _input(ctx).await_price_list_seconds


def parse_documents(ctx: StepContext) -> dict[str, Any]:
    """The price list of the contract, and each invoice's text pages (pages of one invoice stay together)."""
    store, job_input = ctx.services.artifacts, _input(ctx)
    contract, documents = job_input.contract, DocumentReader(store)
    try:
        prices = parse_price_list(contract.name, _pages(documents.read(contract), contract.name, contract.media_type))
    except PriceListError as error:
        raise InvalidInputError(str(error), step=ctx.event.step) from None
    price_list_key = store.put_json(keys.work_key(ctx.job_id, "parse_documents", "price-list.json"), prices)
    invoices, pages = [], 0
    for number, doc in enumerate(job_input.invoices):
        text_pages = _pages(documents.read(doc), doc.name, doc.media_type)
        pages += len(text_pages)
        key = keys.work_key(ctx.job_id, "parse_documents", f"invoice-{number:03d}.json")
        invoices.append(store.put_json(key, {"document": doc.name, "pages": text_pages}))
    listed = write_item_list(store, ctx.job_id, "parse_documents", "invoices", invoices)
    return {"price_list_key": price_list_key, "invoices": listed, "pages": pages, "products": len(prices.prices)}


class _InvoicePages(Model):
    document: str
    pages: list[tuple[int, str]]


def extract_invoices(ctx: StepContext) -> dict[str, Any]:
    """One invoice: extract, source every value, re-extract with the errors as feedback while some remain."""
    store, model = ctx.services.artifacts, ctx.model()
    doc = _InvoicePages.model_validate(store.get_json(str(ctx.event.ref)))
    invoice, errors, attempts = ExtractedInvoice(document=doc.document), list[SourcingError](), 0
    if doc.pages:  # a document without a text page is unreadable: nothing to ask the model
        while True:
            request = prompts.extraction_request(doc.document, doc.pages, errors=errors)
            extracted, _ = model.ask(request, ExtractedInvoice, defaults={"document": doc.document})
            attempts += 1
            invoice = prompts.own_document(extracted, doc.document)
            errors = sourcing.verify(invoice, doc.pages)
            if not errors or attempts > MAX_REEXTRACTIONS:
                break
            ctx.services.jobs.append_event(
                ctx.job_id,
                "extraction_retried",
                step=ctx.event.step,
                item=ctx.event.item,
                detail={"document": doc.document, "errors": [e.feedback() for e in errors][:20], "attempt": attempts},
            )
    key = keys.work_key(ctx.job_id, "extract_invoices", f"invoice-{ctx.event.item:03d}.json")
    store.put_json(key, Extraction(invoice=invoice, errors=errors, attempts=attempts))
    return {"extraction_key": key, "line_items": len(invoice.line_items), "unsourced_values": len(errors)}


def _extractions(ctx: StepContext) -> Sequence[Extraction]:
    store, count = ctx.services.artifacts, int(ctx.output_of("parse_documents")["invoices"]["count"])
    return [
        Extraction.model_validate(
            store.get_json(keys.work_key(ctx.job_id, "extract_invoices", f"invoice-{n:03d}.json"))
        )
        for n in range(count)
    ]


def check_invoices(ctx: StepContext) -> dict[str, Any]:
    """Deterministic business rules and the reconciliation against the contract (or the late price list), per
    invoice."""
    prices = _price_list(ctx)
    results = [report.invoice_result(e.invoice, prices, e.errors) for e in _extractions(ctx)]
    checked = Checked(contract=report.contract_summary(prices), invoices=results)
    key = ctx.services.artifacts.put_json(keys.work_key(ctx.job_id, "check_invoices", "checked.json"), checked)
    found = {
        "checked_key": key,
        "invoices": len(results),
        "discrepancies": sum(len(r.discrepancies) for r in results),
        "matched": sum(1 for r in results if r.status == "matched"),
    }
    # What the child step `resolve_disputes` branches on (only when asked for: other jobs' outputs stay as they were)
    return found | ({"resolve_disputes": True} if _input(ctx).resolve_disputes is not None else {})


def dispute_input(ctx: StepContext) -> dict[str, Any]:
    """The input of the `dispute-resolution` child: this job's published reconciliation and the request's contacts."""
    wanted = _input(ctx).resolve_disputes or {}
    return {"reconciliation_job_id": ctx.job_id} | {k: v for k, v in wanted.items() if v is not None}


def _checked(ctx: StepContext) -> Checked:
    return Checked.model_validate(ctx.services.artifacts.get_json(ctx.output_of("check_invoices")["checked_key"]))


def summarize_findings(ctx: StepContext) -> dict[str, Any]:
    checked = _checked(ctx)
    response = ctx.model().text(prompts.summary_request(checked.invoices, checked.contract))
    key = ctx.services.artifacts.put_json(
        keys.work_key(ctx.job_id, "summarize_findings", "summary.json"), {"text": response.text}
    )
    return {"summary_key": key}


def review_reasons(ctx: StepContext) -> list[str]:
    """`auto` review: when any discrepancy was found."""
    found = [(r.document, len(r.discrepancies)) for r in _checked(ctx).invoices if r.discrepancies]
    return [f"{document}: {count} discrepancy(ies)" for document, count in found]


def review_material(ctx: StepContext) -> ReviewMaterial:
    """The draft (the model's summary and each invoice's status) and every discrepancy with its source line."""
    checked = _checked(ctx)
    summary = ctx.services.artifacts.get_json(ctx.output_of("summarize_findings")["summary_key"])
    draft = {
        "summary": str(summary.get("text") or ""),
        "invoices": [
            {"document": r.document, "status": r.status, "discrepancies": len(r.discrepancies)}
            for r in checked.invoices
        ],
    }
    evidence = [
        ReviewEvidence(
            claim=f"{d.rule} at {d.field}: expected {d.expected}, found {d.actual}"
            + (f" ({d.note})" if d.note else ""),
            document=d.source.document if d.source else r.document,
            page=d.source.page if d.source else None,
            quote=d.source.quote if d.source else "",
            verified=d.source is not None,
        )
        for r in checked.invoices
        for d in r.discrepancies
    ]
    return ReviewMaterial(draft=draft, evidence=evidence)


def publish_report(ctx: StepContext) -> dict[str, Any]:
    store, checked = ctx.services.artifacts, _checked(ctx)
    summary = store.get_json(ctx.output_of("summarize_findings")["summary_key"])
    decision = ctx.state.steps.get("review") or {}
    if decision.get("edits_key"):  # the reviewer's summary, checked like the model's
        summary = {"text": SummaryEdits.model_validate(store.get_json(str(decision["edits_key"]))).summary}
    job = ctx.services.jobs.get_job(ctx.job_id)
    result = report.reconciliation_result(
        checked.invoices,
        checked.contract,
        model_summary=str(summary.get("text") or ""),
        job_id=ctx.job_id,
        model=job.model if job else None,
        markdown_key=keys.result_key(ctx.job_id, "md"),
    )
    if result.summary_blocked:
        ctx.services.jobs.append_event(
            ctx.job_id,
            "summary_blocked",
            step=ctx.event.step,
            detail={"figures": result.summary_blocked, "used": "deterministic summary"},
        )
    store.put_bytes(result.markdown_key or "", report.render_markdown(result).encode(), "text/markdown")
    key = store.put_json(keys.result_key(ctx.job_id), result)
    return {"result_key": key, "invoices": len(result.invoices), "summary_source": result.summary_source}
