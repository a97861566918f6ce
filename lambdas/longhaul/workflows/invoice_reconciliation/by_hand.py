"""A failed invoice-reconciliation job completed by a person (`longhaul.review.completion`).

The person submits the result's invoices (line items with their source lines, totals) and a summary. Each invoice
goes through the workflow's own rules (`rules.check`, by way of `report.invoice_result`) against the job's price list
(the late one if it came, else the contract's), as if its figures had been extracted:

- the figures must add up, or the result must say where they do not: each `line-total` or `invoice-total` finding
  of the rules must be among the invoice's `discrepancies` (same rule and field), and none of those two rules may
  be declared that the figures do not show. A total that does not add up and is not declared is refused;
- the other findings (`contract-price`, `unknown-product`, `currency`) are the rules' own: the published
  discrepancies and each invoice's status are what the rules find, as for an extracted invoice;
- a summary is used only if every figure in it is a validated number (as a reviewer's edit); an empty one gets the
  deterministic summary.
"""

import re
from typing import Any

from pydantic import ValidationError

from longhaul.core.contracts import PersonCompletion
from longhaul.documents.intake import DocumentReader
from longhaul.engine.context import StepContext
from longhaul.review.completion import HandResult, ResultRefused, refused_by_model
from longhaul.storage import artifacts as keys
from longhaul.workflows.invoice_reconciliation import report
from longhaul.workflows.invoice_reconciliation.amounts import AmountError
from longhaul.workflows.invoice_reconciliation.models import (
    ExtractedInvoice,
    ExtractedLineItem,
    ExtractedTotals,
    InvoiceReconciliationResult,
    InvoiceResult,
    Source,
    SourcedValue,
)
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList, PriceListError, parse_price_list
from longhaul.workflows.invoice_reconciliation.steps import _checked, _input, _pages, _price_list

ARITHMETIC = frozenset({"line-total", "invoice-total"})
EXTRACTOR = "person"


def price_list(ctx: StepContext) -> PriceList:
    """The job's price list: as its steps read it once its documents were parsed, else from its contract."""
    if "parse_documents" in ctx.state.steps:
        return _price_list(ctx)
    contract = _input(ctx).contract
    data = DocumentReader(ctx.services.artifacts).read(contract)
    return parse_price_list(contract.name, _pages(data, contract.name, contract.media_type))


def draft(ctx: StepContext) -> dict[str, Any]:
    """The job's checked invoices and its summary when it got that far, else one skeleton invoice per document."""
    steps = ctx.state.steps
    if "check_invoices" in steps:
        checked = _checked(ctx)
        summary = ""
        if "summarize_findings" in steps:
            found = ctx.services.artifacts.get_json(steps["summarize_findings"]["summary_key"])
            summary = str(found.get("text") or "")
        return {
            "invoices": [i.model_dump(mode="json") for i in checked.invoices],
            "summary": summary,
        }
    return {
        "invoices": [
            {
                "document": d.name,
                "invoice_number": None,
                "currency": None,
                "status": "matched",
                "line_items": [
                    {
                        "product_code": "",
                        "description": "",
                        "quantity": "",
                        "unit_price": "",
                        "line_total": "",
                        "source": {"document": d.name, "page": 1, "quote": ""},
                    }
                ],
                "totals": {"subtotal": None, "tax": None, "discount": None, "total": None},
                "discrepancies": [],
            }
            for d in _input(ctx).invoices
        ],
        "summary": "",
    }


def _entered(document: str, name: str, value: str) -> SourcedValue:
    """A figure the person entered: its source is the person's own line (cited as such in a finding)."""
    return SourcedValue(value=value, source=Source(document=document, page=1, quote=f"{name}: {value} (entered)"))


def _as_extracted(invoice: InvoiceResult) -> ExtractedInvoice:
    """The person's invoice as the rules read an extraction: every value as written, totals cited as entered."""
    doc, t = invoice.document, invoice.totals

    def value(name: str, raw: str | None) -> SourcedValue | None:
        return _entered(doc, name, raw) if raw is not None else None

    discount = f"-{t.discount}" if t.discount is not None else None  # a discount is the amount deducted
    return ExtractedInvoice(
        document=doc,
        invoice_number=value("invoice number", invoice.invoice_number),
        date=value("date", invoice.date),
        vendor=value("vendor", invoice.vendor),
        currency=value("currency", invoice.currency),
        line_items=[
            ExtractedLineItem(
                product_code=i.product_code,
                description=i.description,
                quantity=i.quantity,
                unit_price=i.unit_price,
                line_total=i.line_total,
                tax=i.tax,
                source=i.source,
            )
            for i in invoice.line_items
        ],
        totals=ExtractedTotals(
            subtotal=value("subtotal", t.subtotal),
            tax=value("tax", t.tax),
            tax_rate=value("tax rate", f"{t.tax_rate}%" if t.tax_rate is not None else None),
            discount=value("discount", discount),
            charges=[_entered(doc, "charges", t.charges)] if t.charges is not None else [],
            total=value("total", t.total),
            tax_included=_entered(doc, "tax included", "prices include tax") if t.tax_included else None,
        ),
        extractor=EXTRACTOR,
    )


def _loc(field: str) -> list[str | int]:
    """A rule's field path (`line_items[1].line_total`) as a location (`["line_items", 1, "line_total"]`)."""
    loc: list[str | int] = []
    for part in field.split("."):
        match = re.fullmatch(r"(\w+)\[(\d+)\]", part)
        loc += [match.group(1), int(match.group(2))] if match else [part]
    return loc


def _checked_invoice(n: int, invoice: InvoiceResult, prices: PriceList, errors: list[dict[str, Any]]) -> InvoiceResult:
    try:
        checked = report.invoice_result(_as_extracted(invoice), prices)
    except (AmountError, ValueError) as error:  # a figure that is not a number
        errors.append({"loc": ["invoices", n], "msg": f"a figure is not a number: {error}", "type": "value_error"})
        return invoice
    found = {(d.rule, d.field): d for d in checked.discrepancies if d.rule in ARITHMETIC}
    declared = {(d.rule, d.field): j for j, d in enumerate(invoice.discrepancies) if d.rule in ARITHMETIC}
    for key, d in found.items():
        if key not in declared:
            note = f" ({d.note})" if d.note else ""
            errors.append(
                {
                    "loc": ["invoices", n, *_loc(d.field)],
                    "msg": f"{d.rule}: expected {d.expected}, found {d.actual}{note}; correct the figure, or declare "
                    "the discrepancy in the invoice's `discrepancies`",
                    "type": "business_rule",
                }
            )
    for key, j in declared.items():
        if key not in found:
            errors.append(
                {
                    "loc": ["invoices", n, "discrepancies", j],
                    "msg": f"{key[0]} at {key[1]}: the invoice's figures show no such discrepancy",
                    "type": "business_rule",
                }
            )
    return checked


def complete(ctx: StepContext, submitted: dict[str, Any], completion: PersonCompletion) -> HandResult:
    """The person's result through the workflow's result model and rules, rendered as `publish_report` does."""
    job = ctx.job or ctx.services.jobs.get_job(ctx.job_id)
    try:
        given = InvoiceReconciliationResult.model_validate({"summary": "", **submitted})
    except ValidationError as invalid:
        raise refused_by_model(invalid, "the result does not match the workflow's result model") from None
    if not given.invoices:
        raise ResultRefused("the result has no invoices", [{"loc": ["invoices"], "msg": "at least one invoice"}])
    try:
        prices = price_list(ctx)
    except PriceListError as error:  # the contract itself cannot be read: nothing to check against
        raise ResultRefused(str(error), [{"loc": ["invoices"], "msg": str(error), "type": "business_rule"}]) from None
    errors: list[dict[str, Any]] = []
    invoices = [_checked_invoice(n, invoice, prices, errors) for n, invoice in enumerate(given.invoices)]
    contract = report.contract_summary(prices)
    summary = given.summary.strip()
    if summary:
        allowed, names = report.validated_numbers(invoices, contract), report.identifiers(invoices, contract)
        if blocked := report.check_summary(summary, allowed, names):
            errors.append(
                {
                    "loc": ["summary"],
                    "msg": f"figures that are not validated numbers of the result: {', '.join(blocked)}",
                    "type": "business_rule",
                }
            )
    if errors:
        raise ResultRefused("the result does not pass the workflow's rules", errors)
    result = report.reconciliation_result(
        invoices,
        contract,
        model_summary=summary or None,
        job_id=ctx.job_id,
        model=job.model if job else None,
        markdown_key=keys.result_key(ctx.job_id, "md"),
    )
    result = result.model_copy(
        update={
            "summary_source": "person" if summary else "deterministic",
            "completed_by": "person",
            "completion": completion,
        }
    )
    return HandResult(result=result, markdown=report.render_markdown(result))
