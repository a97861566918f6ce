"""The dispute-resolution agents' typed tools: what each is told, takes and returns, and its side effect. Light (the
spec imports it): the implementations are `actions.py`, imported when a tool is first called.

Each names its `timeout_seconds` (a call still running then fails `timeout`; the turn goes on). Gathering evidence
has no side effect; `send_notice` is irreversible (an e-mail through SES) and compensated by
`send_retraction`; `record_dispute` and `confirm_contract_price` write the tenant's memory (reversible: their
compensation `forget_memory` deletes what they wrote).
"""

from pydantic import Field

from longhaul.core.model import Model
from longhaul.engine.memory import FORGET_MEMORY, RECALL_EPISODES, RECALL_FACTS
from longhaul.engine.spec import EMAIL, Tool, ToolRegistry, Undo
from longhaul.workflows.dispute_resolution.models import AgreedPrice, DisputedLine, InvoiceLine

ACTIONS = "longhaul.workflows.dispute_resolution.actions"
VendorName = Field(min_length=1, max_length=300, description="The vendor, as `list_disputes` names it.")


class Nothing(Model):
    pass


class VendorSummary(Model):
    vendor: str
    to: str
    invoices: list[str]
    lines: int


class Disputes(Model):
    vendors: list[VendorSummary] = Field(description="Vendors with discrepancies.")
    clean_vendors: list[str] = Field(description="Vendors without any: no notice goes to them.")


class VendorRequest(Model):
    vendor: str = VendorName


class Findings(Model):
    vendor: str
    lines: list[DisputedLine]


class InvoiceLines(Model):
    vendor: str
    lines: list[InvoiceLine]


class PricesRequest(Model):
    codes: list[str] = Field(min_length=1, max_length=500)


class Prices(Model):
    document: str
    currency: str
    prices: list[AgreedPrice]
    missing: list[str] = Field(description="Codes the contract does not list.")


class DraftRequest(Model):
    vendor: str = VendorName
    line_ids: list[str] = Field(min_length=1, max_length=500, description="Every disputed line of the vendor.")
    past_dispute_ids: list[str] = Field(default_factory=list, max_length=20, description="From `recall_episodes`.")
    fact_ids: list[str] = Field(default_factory=list, max_length=50, description="From `recall_facts`.")


class Disputed(Model):
    vendor: str
    to: str
    subject: str
    draft_key: str
    lines: int


class SendReceipt(Model):
    vendor: str
    to: str
    subject: str
    message_id: str
    status: str = Field(description="`sent`, or `already_sent` (an earlier call of this job sent it).")


class Retracted(Model):
    vendor: str
    to: str
    message_id: str


class DisputeRecorded(Model):
    vendor: str
    memory_id: str


class PriceRequest(Model):
    vendor: str = VendorName
    code: str = Field(min_length=1, max_length=64)


class PriceConfirmed(Model):
    vendor: str
    code: str
    statement: str
    memory_id: str | None = Field(description="The fact recorded; None when memory knew it already.")
    superseded: list[str] = Field(default_factory=list)


TOOLS = ToolRegistry(
    Tool(
        name="list_disputes",
        description="The reconciliation's vendors with discrepancies (and where their notice goes), and the clean "
        "ones.",
        input_model=Nothing,
        output_model=Disputes,
        run=f"{ACTIONS}:list_disputes",
        timeout_seconds=10,
    ),
    Tool(
        name="get_findings",
        description="A vendor's disputed lines: each finding of the reconciliation with its rule, the expected and "
        "invoiced values and the verbatim source line.",
        input_model=VendorRequest,
        output_model=Findings,
        run=f"{ACTIONS}:get_findings",
        timeout_seconds=10,
    ),
    Tool(
        name="get_invoice_lines",
        description="A vendor's invoice lines as the reconciliation read them, each with its source line.",
        input_model=VendorRequest,
        output_model=InvoiceLines,
        run=f"{ACTIONS}:get_invoice_lines",
        timeout_seconds=10,
    ),
    Tool(
        name="get_price_list",
        description="The contract's agreed prices of these product codes, each with its source line.",
        input_model=PricesRequest,
        output_model=Prices,
        run=f"{ACTIONS}:get_price_list",
        timeout_seconds=10,
    ),
    RECALL_EPISODES,
    RECALL_FACTS,
    Tool(
        name="draft_notice",
        description="Draft a vendor's dispute notice citing each of its disputed lines (by line id), the earlier "
        "disputes and the facts it relies on; the draft goes to human review before anything is sent.",
        input_model=DraftRequest,
        output_model=Disputed,
        run=f"{ACTIONS}:draft_notice",
        timeout_seconds=20,
    ),
    Tool(
        name="send_notice",
        description="Send a vendor's approved notice by e-mail. Irreversible: it is sent once (a retraction is "
        "sent if the job is cancelled or fails afterwards).",
        input_model=VendorRequest,
        output_model=SendReceipt,
        run=f"{ACTIONS}:send_notice",
        side_effect="irreversible",
        compensation="send_retraction",
        uses=frozenset({EMAIL}),
        timeout_seconds=30,
    ),
    Tool(
        name="send_retraction",
        description="Compensation: e-mail the vendor that its notice is withdrawn.",
        input_model=Undo,
        output_model=Retracted,
        run=f"{ACTIONS}:send_retraction",
        side_effect="irreversible",
        uses=frozenset({EMAIL}),
        timeout_seconds=30,
    ),
    Tool(
        name="record_dispute",
        description="Remember this dispute with the vendor (the tenant's episodic memory), after its notice went.",
        input_model=VendorRequest,
        output_model=DisputeRecorded,
        run=f"{ACTIONS}:record_dispute",
        side_effect="reversible",
        compensation="forget_memory",
        timeout_seconds=15,
    ),
    Tool(
        name="confirm_contract_price",
        description="Remember a product's agreed price that a disputed line relies on, as a long-term fact with its "
        "source in the contract (job, document, page, quote).",
        input_model=PriceRequest,
        output_model=PriceConfirmed,
        run=f"{ACTIONS}:confirm_contract_price",
        side_effect="reversible",
        compensation="forget_memory",
        timeout_seconds=15,
    ),
    FORGET_MEMORY,
)
