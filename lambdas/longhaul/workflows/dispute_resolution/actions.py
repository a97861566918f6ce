"""The dispute-resolution tools' implementations (`tools.py` declares them): they read the case file and the
tenant's memory, draft notices, send them through the platform's mailer, and remember disputes and agreed prices.

A tool checks what the model asks against the case, never trusting it: a notice cites only the vendor's findings,
and every one of them; a notice is sent only as drafted and approved, to the address the job was given, once per
vendor whatever the model proposes; memory is the job's tenant's, and a fact's provenance comes from the
contract's own source line, never from the model.
"""

from __future__ import annotations

from longhaul.core.contracts import FactSource
from longhaul.engine.memory import record_episode, remember_fact
from longhaul.engine.spec import Undo
from longhaul.engine.tools import Acted, ToolContext, ToolRefused
from longhaul.storage.memory import subject_key
from longhaul.workflows.dispute_resolution import notices
from longhaul.workflows.dispute_resolution.case import draft_key, drafted_keys, drafts, load_case, withheld
from longhaul.workflows.dispute_resolution.models import CaseFile, Draft, KnownFact, PastDispute, VendorCase
from longhaul.workflows.dispute_resolution.tools import (
    Disputed,
    DisputeRecorded,
    Disputes,
    DraftRequest,
    Findings,
    InvoiceLines,
    Nothing,
    PriceConfirmed,
    PriceRequest,
    Prices,
    PricesRequest,
    Retracted,
    SendReceipt,
    VendorRequest,
    VendorSummary,
)


def _vendor(case: CaseFile, name: str) -> VendorCase:
    found = case.vendor(name)
    if found is None:
        raise ToolRefused(f"no vendor {name!r} with discrepancies; they are {[v.vendor for v in case.vendors]}")
    return found


def _code(code: str) -> str:
    return "".join(ch for ch in code if ch.isalnum()).upper()


def list_disputes(ctx: ToolContext, _: Nothing) -> Disputes:
    case = load_case(ctx.services, ctx.job_id)
    return Disputes(
        vendors=[
            VendorSummary(vendor=v.vendor, to=v.to, invoices=v.invoices, lines=len(v.lines)) for v in case.vendors
        ],
        clean_vendors=case.clean_vendors,
    )


def get_findings(ctx: ToolContext, request: VendorRequest) -> Findings:
    vendor = _vendor(load_case(ctx.services, ctx.job_id), request.vendor)
    return Findings(vendor=vendor.vendor, lines=vendor.lines)


def get_invoice_lines(ctx: ToolContext, request: VendorRequest) -> InvoiceLines:
    vendor = _vendor(load_case(ctx.services, ctx.job_id), request.vendor)
    return InvoiceLines(vendor=vendor.vendor, lines=vendor.invoice_lines)


def get_price_list(ctx: ToolContext, request: PricesRequest) -> Prices:
    contract = load_case(ctx.services, ctx.job_id).contract
    if contract is None:
        raise ToolRefused("the reconciliation published no price list")
    wanted = {_code(c): c for c in request.codes}
    found = [p for p in contract.prices if _code(p.code) in wanted]
    listed = {_code(p.code) for p in found}
    return Prices(
        document=contract.document,
        currency=contract.currency,
        prices=found,
        missing=[c for key, c in wanted.items() if key not in listed],
    )


def draft_notice(ctx: ToolContext, request: DraftRequest) -> Disputed:
    case = load_case(ctx.services, ctx.job_id)
    vendor = _vendor(case, request.vendor)
    findings = {line.line_id: line for line in vendor.lines}
    unknown = [i for i in request.line_ids if i not in findings]
    if unknown:
        raise ToolRefused(f"not disputed lines of {vendor.vendor}: {unknown}; its lines are {list(findings)}")
    missing = [i for i in findings if i not in request.line_ids]
    if missing:
        raise ToolRefused(f"a notice cites each disputed line of its vendor; missing: {missing}")
    memory, now = ctx.services.memory, ctx.services.now()
    past: list[PastDispute] = []
    for memory_id in request.past_dispute_ids:
        episode = memory.get(ctx.tenant_id, memory_id)
        if episode is None or episode.kind != "episode" or episode.subject_key != subject_key(vendor.vendor):
            raise ToolRefused(f"{memory_id} is not an earlier dispute with {vendor.vendor} (see recall_episodes)")
        past.append(
            PastDispute(memory_id=memory_id, job_id=episode.job_id, at=episode.recorded_at, summary=episode.text)
        )
    facts: list[KnownFact] = []
    for memory_id in request.fact_ids:
        fact = memory.get(ctx.tenant_id, memory_id)
        if fact is None or fact.kind != "fact" or fact.subject_key != subject_key(vendor.vendor):
            raise ToolRefused(f"{memory_id} is not a fact about {vendor.vendor} (see recall_facts)")
        if fact.status != "active" or fact.valid_until is None or fact.valid_until <= now:
            raise ToolRefused(f"{memory_id} is retired or stale: recall_facts re-checks it against its source first")
        facts.append(KnownFact(memory_id=memory_id, statement=fact.text, value=fact.value, provenance=fact.provenance))
    lines = [line for line in vendor.lines if line.line_id in request.line_ids]
    draft = Draft(
        vendor=vendor.vendor,
        to=vendor.to,
        subject=notices.subject(vendor.vendor, lines),
        body=notices.body(vendor.vendor, lines, case.reconciliation_job_id, past, facts),
        lines=lines,
        past_disputes=past,
        facts=facts,
    )
    key = ctx.services.artifacts.put_json(draft_key(ctx.job_id, vendor.vendor), draft)
    return Disputed(vendor=vendor.vendor, to=vendor.to, subject=draft.subject, draft_key=key, lines=len(lines))


def _draft(ctx: ToolContext, vendor: str) -> Draft:
    """The vendor's notice as drafted, if the drafting agent finished with it and the reviewer did not withhold it."""
    key = draft_key(ctx.job_id, vendor)
    if key not in drafted_keys(ctx.services, ctx.job_id):
        raise ToolRefused(f"no drafted notice to {vendor}")
    if subject_key(vendor) in withheld(ctx.services, ctx.job_id):
        raise ToolRefused(f"the reviewer withheld the notice to {vendor}: it is not sent")
    return Draft.model_validate(ctx.services.artifacts.get_json(key))


def send_notice(ctx: ToolContext, request: VendorRequest) -> SendReceipt | Acted:
    draft = _draft(ctx, request.vendor)
    earlier = [
        e
        for e in ctx.services.effects.of_job(ctx.job_id)
        if e.tool == "send_notice"
        and e.operation_id != ctx.operation_id
        and e.status == "done"
        and e.acted
        and subject_key(str(e.input.get("vendor", ""))) == subject_key(draft.vendor)
    ]
    if earlier:  # the model asked twice: one notice per vendor, whatever it proposes
        first = earlier[0].output or {}
        return Acted(
            SendReceipt(
                vendor=draft.vendor,
                to=draft.to,
                subject=draft.subject,
                message_id=str(first.get("message_id", "")),
                status="already_sent",
            )
        )
    assert ctx.operation_id is not None
    message_id = ctx.mailer().send(
        to=draft.to,
        subject=draft.subject,
        body=f"{draft.body}\n\nReference: {ctx.operation_id}",
        operation_id=ctx.operation_id,
    )
    return SendReceipt(vendor=draft.vendor, to=draft.to, subject=draft.subject, message_id=message_id, status="sent")


def send_retraction(ctx: ToolContext, undo: Undo) -> Retracted:
    """Compensation of `send_notice`: tell the vendor the notice is withdrawn (also when its outcome was unknown)."""
    sent = undo.output or {}
    vendor = str(sent.get("vendor") or undo.input.get("vendor", ""))
    to, subject = sent.get("to"), sent.get("subject")
    if not to or not subject:  # the outcome was never recorded: the draft says where it went
        draft = next(
            (d for d in drafts(ctx.services, ctx.job_id) if subject_key(d.vendor) == subject_key(vendor)), None
        )
        if draft is None:
            raise ToolRefused(f"no draft of the notice to {vendor}: nothing to retract")
        to, subject = draft.to, draft.subject
    assert ctx.operation_id is not None
    retraction_subject, text = notices.retraction(vendor, str(subject), undo.operation_id)
    message_id = ctx.mailer().send(to=str(to), subject=retraction_subject, body=text, operation_id=ctx.operation_id)
    return Retracted(vendor=vendor, to=str(to), message_id=message_id)


def record_dispute(ctx: ToolContext, request: VendorRequest) -> DisputeRecorded:
    draft = _draft(ctx, request.vendor)
    sent = next(
        (
            e
            for e in ctx.services.effects.of_job(ctx.job_id)
            if e.tool == "send_notice"
            and e.status == "done"
            and e.acted
            and subject_key(str(e.input.get("vendor", ""))) == subject_key(draft.vendor)
        ),
        None,
    )
    if sent is None:
        raise ToolRefused(f"the notice to {draft.vendor} has not been sent: there is no dispute to remember")
    invoices = sorted({line.invoice_number or line.document for line in draft.lines})
    rules = sorted({line.rule for line in draft.lines})
    text = (
        f"Disputed {len(draft.lines)} line(s) ({', '.join(rules)}) on {', '.join(invoices)} "
        f"(notice {sent.operation_id})"
    )
    case = load_case(ctx.services, ctx.job_id)
    episode = record_episode(
        ctx,
        subject=draft.vendor,
        text=text,
        details={
            "kind": "dispute",
            "lines": len(draft.lines),
            "invoices": ", ".join(invoices),
            "rules": ", ".join(rules),
            "notice_operation_id": sent.operation_id,
            "reconciliation_job_id": case.reconciliation_job_id,
        },
    )
    return DisputeRecorded(vendor=draft.vendor, memory_id=episode.memory_id)


def confirm_contract_price(ctx: ToolContext, request: PriceRequest) -> PriceConfirmed | Acted:
    case = load_case(ctx.services, ctx.job_id)
    vendor = _vendor(case, request.vendor)
    if _code(request.code) not in {_code(c) for c in vendor.price_codes}:
        raise ToolRefused(f"no disputed line of {vendor.vendor} relies on the price of {request.code}")
    contract = case.contract
    price = next((p for p in contract.prices if _code(p.code) == _code(request.code)), None) if contract else None
    if contract is None or price is None:
        raise ToolRefused(f"the contract lists no price for {request.code}")
    statement = f"The agreed unit price of {price.code} ({price.description}) is {price.unit_price} {contract.currency}"
    remembered = remember_fact(
        ctx,
        subject=vendor.vendor,
        key=f"contract-price:{_code(price.code)}",
        value=f"{price.unit_price} {contract.currency}",
        text=statement,
        provenance=FactSource(
            job_id=case.reconciliation_job_id,
            document=price.source.document,
            page=price.source.page,
            quote=price.source.quote,
        ),
        source=contract.stored,
    )
    confirmed = PriceConfirmed(
        vendor=vendor.vendor,
        code=price.code,
        statement=statement,
        memory_id=remembered.memory_id,
        superseded=remembered.superseded,
    )
    return confirmed if remembered.memory_id else Acted(confirmed)
