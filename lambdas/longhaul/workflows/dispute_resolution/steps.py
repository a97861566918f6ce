"""Workflow `dispute-resolution`, its domain: the submission logic, its steps, its agents' briefs and checks, and
the review's hooks.

load_reconciliation (the case file: vendors with discrepancies, their disputed lines and invoice lines with sources,
the agreed prices, where each notice goes) → draft_notices (agent) → review → send_notices (agent) → publish_result.
Steps exchange S3 keys and counts, never text.
"""

from typing import Any

from longhaul.core.errors import InvalidInputError
from longhaul.core.model import Model
from longhaul.core.records import Job
from longhaul.documents.intake import Intake, PreparedInput, StoredDocument
from longhaul.engine.agent import AgentBrief
from longhaul.engine.context import StepContext
from longhaul.review.contracts import ReviewEvidence, ReviewMaterial
from longhaul.storage import artifacts as keys
from longhaul.storage.memory import subject_key
from longhaul.workflows.dispute_resolution import case as cases
from longhaul.workflows.dispute_resolution.models import (
    RECONCILIATION,
    CaseFile,
    ContractRef,
    DisputedLine,
    DisputeResolutionResult,
    Drafts,
    InvoiceLine,
    MemoryOutcome,
    Notice,
    NoticeStatus,
    ReconciledInvoice,
    Reconciliation,
    Sent,
    VendorCase,
    vendor_of,
)
from longhaul.workflows.dispute_resolution.spec import DisputeResolutionInput

WORKFLOW = "dispute-resolution"


class JobInput(Model):
    """The accepted input, as stored for the steps."""

    workflow: str
    reconciliation_job_id: str
    reconciliation_result_key: str
    reconciliation_input_key: str
    contacts: dict[str, str]  # by vendor as memory files it (`subject_key`)
    default_contact: str | None = None


def _disputed(reconciliation: Reconciliation) -> dict[str, list[ReconciledInvoice]]:
    """Invoices with discrepancies by vendor, in the reconciliation's order."""
    found: dict[str, list[ReconciledInvoice]] = {}
    for invoice in reconciliation.invoices:
        if invoice.discrepancies:
            found.setdefault(vendor_of(invoice), []).append(invoice)
    return found


# ---------------------------------------------------------------------- submission


def _published_key(intake: Intake, job: Job) -> str | None:
    """Where the reconciliation's result is: a completed job's; or, when this job is its child (its step
    `resolve_disputes` starts this one after publishing), the result it published and has not completed with yet."""
    if job.status.value == "completed":
        return job.result_key
    if job.job_id == intake.parent_job_id and not job.finished:
        key = keys.result_key(job.job_id)
        return key if intake.artifacts.head(key) is not None else None
    return None


def prepare(intake: Intake, job_input: DisputeResolutionInput) -> PreparedInput:
    """The reconciliation must be a completed invoice-reconciliation job of this tenant (another tenant's is
    unknown here), and every vendor with discrepancies must have somewhere its notice goes."""
    loc = ["reconciliation_job_id"]
    job = intake.tenant_job(job_input.reconciliation_job_id)
    if job is None:
        intake.problem(loc, f"no job {job_input.reconciliation_job_id} of this tenant")
    elif job.workflow != RECONCILIATION:
        intake.problem(loc, f"{job.job_id} is a {job.workflow} job, not an {RECONCILIATION} job")
    elif _published_key(intake, job) is None:
        intake.problem(loc, f"{job.job_id} is {job.status.value}: only a completed reconciliation can be disputed")
    intake.check()
    assert job is not None
    result_key = _published_key(intake, job)
    assert result_key is not None
    reconciliation = Reconciliation.model_validate(intake.artifacts.get_json(result_key))
    contacts = {subject_key(vendor): address for vendor, address in (job_input.contacts or {}).items()}
    vendors = list(_disputed(reconciliation))
    unreachable = [v for v in vendors if subject_key(v) not in contacts and job_input.default_contact is None]
    if unreachable:
        intake.problem(
            ["default_contact"],
            f"vendors {unreachable} have discrepancies and no contact: give `contacts` for them or a `default_contact`",
        )
    return PreparedInput(
        payload=JobInput(
            workflow=WORKFLOW,
            reconciliation_job_id=job.job_id,
            reconciliation_result_key=result_key,
            reconciliation_input_key=job.input_key,
            contacts=contacts,
            default_contact=job_input.default_contact,
        ),
        estimated_sla_seconds=30 + 10 * len(vendors),
        size=len(vendors),
    )


def submitted_input(store: Any, stored: dict[str, Any]) -> dict[str, Any]:
    """The input of a job as its request gave it (the workflow's input model), from the input `prepare` stored: what
    an operator's fix patches (its contacts by vendor as memory files them)."""
    job_input = JobInput.model_validate(stored)
    found: dict[str, Any] = {"reconciliation_job_id": job_input.reconciliation_job_id}
    if job_input.contacts:
        found["contacts"] = dict(job_input.contacts)
    if job_input.default_contact is not None:
        found["default_contact"] = job_input.default_contact
    return found


# ---------------------------------------------------------------------- steps


def _input(ctx: StepContext) -> JobInput:
    return JobInput.model_validate(ctx.services.artifacts.get_json(ctx.state.input_key))


def _line_of(invoice: ReconciledInvoice, quote: str | None) -> str | None:
    """The product code of the invoice line a finding is about: the published line whose source is the finding's
    (a field's index would not do: lines whose values were not sourced are not published)."""
    if quote is None:
        return None
    flat = " ".join(quote.split())
    return next((line.product_code for line in invoice.line_items if " ".join(line.source.quote.split()) == flat), None)


def _contract(ctx: StepContext, job_input: JobInput, reconciliation: Reconciliation) -> ContractRef | None:
    contract = reconciliation.contract
    if contract is None:
        return None
    stored: StoredDocument | None = None
    store = ctx.services.artifacts
    if store.head(job_input.reconciliation_input_key) is not None:  # intermediate: kept for a while only
        found = store.get_json(job_input.reconciliation_input_key).get("contract")
        stored = StoredDocument.model_validate(found) if found else None
    return ContractRef(document=contract.document, currency=contract.currency, prices=contract.prices, stored=stored)


def load_reconciliation(ctx: StepContext) -> dict[str, Any]:
    """The case file: each vendor with discrepancies, its disputed lines and invoice lines (with their sources) and
    where its notice goes; the clean vendors; the agreed prices and the contract's stored bytes."""
    job_input = _input(ctx)
    recon_job = ctx.services.jobs.get_job(job_input.reconciliation_job_id, tenant_id=ctx.state.tenant_id)
    if recon_job is None or (recon_job.result_key or keys.result_key(recon_job.job_id)) != (
        job_input.reconciliation_result_key
    ):
        raise InvalidInputError(
            f"reconciliation {job_input.reconciliation_job_id} is not this tenant's", step=ctx.event.step
        )
    reconciliation = Reconciliation.model_validate(ctx.services.artifacts.get_json(job_input.reconciliation_result_key))
    disputed = _disputed(reconciliation)
    vendors = []
    for vendor, invoices in disputed.items():
        to = job_input.contacts.get(subject_key(vendor)) or job_input.default_contact
        if to is None:
            raise InvalidInputError(f"vendor {vendor} has no contact", step=ctx.event.step)
        lines = [
            DisputedLine(
                line_id=f"{invoice.document}#{finding.field}#{finding.rule}",
                document=invoice.document,
                invoice_number=invoice.invoice_number,
                product_code=_line_of(invoice, finding.source.quote if finding.source else None),
                rule=finding.rule,
                field=finding.field,
                expected=finding.expected,
                actual=finding.actual,
                note=finding.note,
                source=finding.source,
            )
            for invoice in invoices
            for finding in invoice.discrepancies
        ]
        invoice_lines = [
            InvoiceLine(document=invoice.document, invoice_number=invoice.invoice_number, **line.model_dump())
            for invoice in invoices
            for line in invoice.line_items
        ]
        vendors.append(
            VendorCase(
                vendor=vendor, to=to, invoices=[i.document for i in invoices], lines=lines, invoice_lines=invoice_lines
            )
        )
    clean = sorted({vendor_of(i) for i in reconciliation.invoices} - set(disputed))
    case = CaseFile(
        reconciliation_job_id=job_input.reconciliation_job_id,
        vendors=vendors,
        clean_vendors=clean,
        contract=_contract(ctx, job_input, reconciliation),
    )
    key = ctx.services.artifacts.put_json(cases.case_key(ctx.job_id), case)
    return {"case_key": key, "vendors": len(vendors), "clean_vendors": len(clean)}


def brief_drafting(ctx: StepContext) -> AgentBrief:
    case = cases.load_case(ctx.services, ctx.job_id)
    return AgentBrief(
        task="Draft one dispute notice per vendor with discrepancies in this invoice reconciliation. For each vendor "
        "gather its findings, invoice lines and the agreed prices they rely on, and what memory knows of it (earlier "
        "disputes, agreed prices); then draft its notice citing every disputed line. Nothing is sent: a person "
        "reviews the drafts. Finish with the draft of every vendor.",
        context={
            "reconciliation_job_id": case.reconciliation_job_id,
            "vendors_with_discrepancies": [v.vendor for v in case.vendors],
            "clean_vendors": case.clean_vendors,
        },
    )


def check_drafts(ctx: StepContext, output: Drafts) -> list[str]:
    """Every vendor with discrepancies has a draft, made by `draft_notice` for that vendor."""
    case = cases.load_case(ctx.services, ctx.job_id)
    drafted = {subject_key(d.vendor): d.draft_key for d in output.drafts}
    problems = [f"no draft for {v.vendor}" for v in case.vendors if subject_key(v.vendor) not in drafted]
    problems += [
        f"the draft of {v.vendor} is not draft_notice's"
        for v in case.vendors
        if subject_key(v.vendor) in drafted and drafted[subject_key(v.vendor)] != cases.draft_key(ctx.job_id, v.vendor)
    ]
    problems += [f"{d.vendor} has no discrepancy" for d in output.drafts if case.vendor(d.vendor) is None]
    return problems


def brief_sending(ctx: StepContext) -> AgentBrief:
    case = cases.load_case(ctx.services, ctx.job_id)
    approved = cases.approved(ctx.services, ctx.job_id)
    held = sorted({d.vendor for d in cases.drafts(ctx.services, ctx.job_id)} - {d.vendor for d in approved})
    return AgentBrief(
        task="Send each approved dispute notice once, then remember each dispute sent and the agreed prices its "
        "lines rely on. Finish with what became of every approved notice.",
        context={
            "approved": [
                {
                    "vendor": d.vendor,
                    "to": d.to,
                    "price_codes": (found.price_codes if (found := case.vendor(d.vendor)) else []),
                }
                for d in approved
            ],
            "withheld": held,
        },
    )


def check_sent(ctx: StepContext, output: Sent) -> list[str]:
    """Every approved notice is accounted for."""
    named = {subject_key(n.vendor) for n in output.notices}
    return [f"say what became of the notice to {d.vendor}" for d in cases.approved(ctx.services, ctx.job_id)
            if subject_key(d.vendor) not in named]  # fmt: skip


# ---------------------------------------------------------------------- review


def review_reasons(ctx: StepContext) -> list[str]:
    """`auto`: every drafted notice is reviewed before it is sent."""
    return [
        f"notice to {d.vendor} <{d.to}>: {len(d.lines)} disputed line(s)"
        for d in cases.drafts(ctx.services, ctx.job_id)
    ]


def review_material(ctx: StepContext) -> ReviewMaterial:
    """The drafts as they would be sent, and every disputed line with its source."""
    drafts = cases.drafts(ctx.services, ctx.job_id)
    draft = {
        "notices": [
            {"vendor": d.vendor, "to": d.to, "subject": d.subject, "body": d.body, "lines": len(d.lines)}
            for d in drafts
        ],
        "withhold": 'edit with {"withhold": [vendor, ...]} to hold notices back; approve sends them all',
    }
    evidence = [
        ReviewEvidence(
            claim=f"{d.vendor}: {line.rule} at {line.document} {line.field}: expected {line.expected}, "
            f"invoiced {line.actual}",
            document=line.source.document if line.source else line.document,
            page=line.source.page if line.source else None,
            quote=line.source.quote if line.source else "",
            verified=line.source is not None,
        )
        for d in drafts
        for line in d.lines
    ]
    return ReviewMaterial(draft=draft, evidence=evidence)


# ---------------------------------------------------------------------- publish


def _status(ctx: StepContext, vendor: str, held: set[str]) -> tuple[NoticeStatus, str | None, str | None]:
    """What became of a vendor's notice, from the job's outbox: (status, operation id, message id)."""
    if subject_key(vendor) in held:
        return "withheld", None, None
    sends = [
        e
        for e in ctx.services.effects.of_job(ctx.job_id)
        if e.tool == "send_notice" and e.acted and subject_key(str(e.input.get("vendor", ""))) == subject_key(vendor)
    ]
    sent = next((e for e in sends if e.status == "done"), None)
    if sent is not None:
        status: NoticeStatus = "retracted" if sent.compensation_status == "done" else "sent"
        return status, sent.operation_id, str((sent.output or {}).get("message_id") or "") or None
    unknown = next((e for e in sends if e.status in ("unknown", "pending")), None)
    if unknown is not None:
        return "unknown", unknown.operation_id, None
    return "not_sent", None, None


def publish_result(ctx: StepContext) -> dict[str, Any]:
    store, case = ctx.services.artifacts, cases.load_case(ctx.services, ctx.job_id)
    drafts = cases.drafts(ctx.services, ctx.job_id)
    held = cases.withheld(ctx.services, ctx.job_id)
    notices = []
    for draft in drafts:
        status, operation_id, message_id = _status(ctx, draft.vendor, held)
        notices.append(
            Notice(
                vendor=draft.vendor,
                to=draft.to,
                operation_id=operation_id,
                status=status,
                subject=draft.subject,
                message_id=message_id,
                lines=draft.lines,
                past_disputes=draft.past_disputes,
                facts=draft.facts,
            )
        )
    made = [e for e in ctx.services.effects.of_job(ctx.job_id) if e.acted and e.status == "done"]
    memory = MemoryOutcome(
        episodes_recorded=sum(1 for e in made if e.tool == "record_dispute"),
        facts_recorded=sum(1 for e in made if e.tool == "confirm_contract_price"),
    )
    job = ctx.services.jobs.get_job(ctx.job_id)
    result = DisputeResolutionResult(
        job_id=ctx.job_id,
        reconciliation_job_id=case.reconciliation_job_id,
        notices=notices,
        clean_vendors=case.clean_vendors,
        summary=_summary(notices, case),
        memory=memory,
        model=job.model if job else None,
        markdown_key=keys.result_key(ctx.job_id, "md"),
    )
    store.put_bytes(result.markdown_key or "", render_markdown(result).encode(), "text/markdown")
    key = store.put_json(keys.result_key(ctx.job_id), result)
    return {"result_key": key, "notices": len(notices), "sent": sum(1 for n in notices if n.status == "sent")}


def _summary(notices: list[Notice], case: CaseFile) -> str:
    by_status: dict[str, int] = {}
    for notice in notices:
        by_status[notice.status] = by_status.get(notice.status, 0) + 1
    lines = sum(len(n.lines) for n in notices)
    told = ", ".join(f"{count} {status}" for status, count in sorted(by_status.items())) or "none"
    text = (
        f"{len(case.vendors)} vendor(s) with discrepancies in reconciliation {case.reconciliation_job_id}: "
        f"{len(notices)} notice(s) citing {lines} disputed line(s) ({told})."
    )
    if case.clean_vendors:
        text += f" No notice to the {len(case.clean_vendors)} vendor(s) without discrepancies."
    return text


def render_markdown(result: DisputeResolutionResult) -> str:
    lines = ["# Dispute resolution", "", result.summary, ""]
    for notice in result.notices:
        lines += ["", f"## {notice.vendor}", "", f"To {notice.to}: **{notice.status}**"]
        if notice.operation_id:
            lines.append(f"(operation `{notice.operation_id}`)")
        lines += ["", f"Subject: {notice.subject}", ""]
        for line in notice.lines:
            where = f" — {line.source.document}, page {line.source.page}: `{line.source.quote}`" if line.source else ""
            lines.append(
                f"- **{line.rule}** {line.document} `{line.field}`: expected {line.expected}, "
                f"invoiced {line.actual}{where}"
            )
        for past in notice.past_disputes:
            lines.append(f"- earlier dispute ({past.at.date().isoformat()}, job {past.job_id}): {past.summary}")
    if result.clean_vendors:
        lines += ["", "No notice: " + ", ".join(result.clean_vendors) + "."]
    return "\n".join(lines).rstrip() + "\n"
