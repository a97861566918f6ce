"""The offline model's stand-in for invoice tasks (`ModelRequest.offline`): a deterministic parser of the
accounting-export family, and the deterministic summary. It says so: its extraction names itself in `extractor`."""

from typing import Any

from longhaul.core.model import Model
from longhaul.workflows.invoice_reconciliation.extraction import extract_invoice
from longhaul.workflows.invoice_reconciliation.models import ContractSummary, InvoiceResult
from longhaul.workflows.invoice_reconciliation.report import deterministic_summary


class _Page(Model):
    page: int
    text: str


class _ExtractContext(Model):
    document: str
    pages: list[_Page]


class _SummaryContext(Model):
    contract: ContractSummary
    invoices: list[InvoiceResult]


def extract(context: dict[str, Any], model_id: str) -> str:
    """`extract_invoice`: the invoice read by this workflow's own parser (`model_id` is not part of the answer)."""
    request = _ExtractContext.model_validate(context)
    return extract_invoice(request.document, [(p.page, p.text) for p in request.pages]).model_dump_json()


def summarize(context: dict[str, Any], model_id: str) -> str:
    """`summarize_reconciliation`: the deterministic summary of the findings."""
    request = _SummaryContext.model_validate(context)
    return deterministic_summary(request.invoices, request.contract)
