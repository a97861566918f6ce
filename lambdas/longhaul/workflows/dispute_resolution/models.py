"""Typed records of dispute resolution: the reconciliation as this workflow reads it (its published result: a
completed invoice-reconciliation job's findings, invoice lines and agreed prices, each with its source), the case
file the agents work from, the drafts, and the result the job publishes."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from longhaul.core.contracts import FactSource
from longhaul.core.model import Model
from longhaul.documents.intake import StoredDocument

RECONCILIATION = "invoice-reconciliation"


class SourceLine(Model):
    """Where a value was read: the source line, verbatim, on a 1-based page of a document."""

    document: str
    page: int
    quote: str


# ---------------------------------------------------------------- the reconciliation (its result, as published)


class _Read(Model):
    model_config = ConfigDict(extra="ignore")


class ReconciledLine(_Read):
    product_code: str
    description: str = ""
    quantity: str
    unit_price: str
    line_total: str
    source: SourceLine


class Finding(_Read):
    rule: str
    field: str
    expected: str | None = None
    actual: str | None = None
    source: SourceLine | None = None
    note: str | None = None


class ReconciledInvoice(_Read):
    document: str
    invoice_number: str | None = None
    currency: str | None = None
    status: str
    line_items: list[ReconciledLine] = Field(default=[])
    discrepancies: list[Finding] = Field(default=[])
    vendor: str | None = None
    date: str | None = None


class AgreedPrice(_Read):
    code: str
    description: str = ""
    unit_price: str
    source: SourceLine


class ReconciledContract(_Read):
    document: str
    currency: str
    products: int = 0
    prices: list[AgreedPrice] = Field(default=[])


class Reconciliation(_Read):
    invoices: list[ReconciledInvoice]
    contract: ReconciledContract | None = None


def vendor_of(invoice: ReconciledInvoice) -> str:
    """The vendor as the reconciliation read it (the invoice's `vendor`); an invoice it read none from is its own
    vendor, named by its document."""
    return (invoice.vendor or "").strip() or invoice.document


# ---------------------------------------------------------------- the case file


class DisputedLine(Model):
    """One finding of the reconciliation that a notice disputes, with the source line that shows it."""

    line_id: str = Field(description="`<document>#<field>#<rule>`: how drafts cite it.")
    document: str
    invoice_number: str | None
    product_code: str | None = None
    rule: str
    field: str
    expected: str | None
    actual: str | None
    note: str | None = None
    source: SourceLine | None


class InvoiceLine(Model):
    document: str
    invoice_number: str | None
    product_code: str
    description: str
    quantity: str
    unit_price: str
    line_total: str
    source: SourceLine


class VendorCase(Model):
    vendor: str
    to: str = Field(description="Where its notice goes.")
    invoices: list[str]
    lines: list[DisputedLine]
    invoice_lines: list[InvoiceLine]

    @property
    def price_codes(self) -> list[str]:
        """Product codes whose agreed price a finding disputes (`contract-price`)."""
        return sorted({d.product_code for d in self.lines if d.rule == "contract-price" and d.product_code})


class ContractRef(Model):
    document: str
    currency: str
    prices: list[AgreedPrice]
    stored: StoredDocument | None = Field(default=None, description="The contract's bytes, while they are kept.")


class CaseFile(Model):
    reconciliation_job_id: str
    vendors: list[VendorCase]
    clean_vendors: list[str]
    contract: ContractRef | None = None

    def vendor(self, name: str) -> VendorCase | None:
        from longhaul.storage.memory import subject_key

        return next((v for v in self.vendors if subject_key(v.vendor) == subject_key(name)), None)


# ---------------------------------------------------------------- drafts and outputs of the agents


class PastDispute(Model):
    memory_id: str
    job_id: str
    at: datetime
    summary: str


class KnownFact(Model):
    memory_id: str
    statement: str
    value: str | None
    provenance: FactSource | None
    reverified: bool = False


class Draft(Model):
    vendor: str
    to: str
    subject: str
    body: str
    lines: list[DisputedLine]
    past_disputes: list[PastDispute] = Field(default=[])
    facts: list[KnownFact] = Field(default=[])


class DraftRef(Model):
    vendor: str = Field(min_length=1, max_length=300)
    draft_key: str = Field(min_length=1, max_length=500)


class Drafts(Model):
    """The drafting agent's output: one draft per vendor with discrepancies."""

    drafts: list[DraftRef] = Field(max_length=200)


class SentNotice(Model):
    vendor: str = Field(min_length=1, max_length=300)
    operation_id: str | None = Field(default=None, max_length=100)
    status: Literal["sent", "unknown", "not_sent"]


class Sent(Model):
    """The sending agent's output: what became of each approved notice."""

    notices: list[SentNotice] = Field(max_length=200)


# ---------------------------------------------------------------- the result (pinned shape)

NoticeStatus = Literal["sent", "retracted", "withheld", "unknown", "not_sent"]


class Notice(Model):
    vendor: str
    to: str
    operation_id: Annotated[
        str | None, Field(description="The send's operation id in the job's outbox (its e-mail carries it).")
    ]
    status: Annotated[
        NoticeStatus,
        Field(
            description="`sent`; `retracted` (sent, then compensated); `withheld` (the reviewer held it back); "
            "`unknown` (the attempt that sent it died before recording it: it may have gone); `not_sent`."
        ),
    ]
    subject: str
    message_id: str | None = None
    lines: list[DisputedLine] = Field(description="The disputed lines the notice cites, each with its source.")
    past_disputes: list[PastDispute] = Field(default_factory=list, description="Earlier disputes, from memory.")
    facts: list[KnownFact] = Field(default_factory=list, description="Long-term facts it relied on, with provenance.")


class MemoryOutcome(Model):
    episodes_recorded: int = 0
    facts_recorded: int = 0


class DisputeResolutionResult(Model):
    job_id: str
    reconciliation_job_id: str
    notices: list[Notice]
    clean_vendors: list[str] = Field(description="Vendors whose invoices had no discrepancy: no notice.")
    summary: str
    memory: MemoryOutcome = Field(default_factory=MemoryOutcome)
    model: str | None = None
    markdown_key: str | None = None
