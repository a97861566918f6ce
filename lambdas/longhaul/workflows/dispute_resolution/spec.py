"""Workflow `dispute-resolution`: dispute the discrepancies a completed invoice reconciliation found, one notice per
vendor, through two agent steps around a human review.

load the reconciliation (its published findings, invoice lines and agreed prices, each with its source) → an agent
gathers the evidence with tools and drafts each vendor's notice citing every disputed line (and earlier disputes and
known prices from the tenant's memory) → a person reviews the drafts (approve, or withhold some) → an agent sends
each approved notice (an irreversible e-mail through SES, compensated by a retraction if the job fails or is
cancelled afterwards) and remembers the dispute and the agreed prices → publish the notices with their lines.
"""

from typing import Annotated

from pydantic import Field

from longhaul.core.contracts import INVISIBLE, PATTERN_END, Strict
from longhaul.engine.spec import AgentPolicy, ReviewPolicy, WorkflowSpec, agent, review, step

# In the dialect of `longhaul.core.contracts` (ECMA-262 and Python's `re` read them alike): no `\s`, no `$`.
JOB_ID_PATTERN = rf"^job_[0-9a-f]{{28}}{PATTERN_END}"
_ADDRESS_PART = rf"[^@{INVISIBLE}<>(),;:\"\[\]\\]+"  # no space, control, invisible or special character
EMAIL_PATTERN = rf"^{_ADDRESS_PART}@{_ADDRESS_PART}\.[A-Za-z]{{2,}}{PATTERN_END}"
EmailAddress = Annotated[str, Field(pattern=EMAIL_PATTERN, max_length=254, description="An e-mail address.")]
VendorKey = Annotated[str, Field(min_length=1, max_length=300)]
POLICY = "longhaul.workflows.dispute_resolution.policy"
# Its result and its agents' outputs, imported by the steps that use them (`ModelRef`): the API never does.
MODELS = "longhaul.workflows.dispute_resolution.models"
# Of the tools of `tools.TOOLS`, the ones each agent may call.
DRAFTING_TOOLS = (
    "list_disputes",
    "get_findings",
    "get_invoice_lines",
    "get_price_list",
    "recall_episodes",
    "recall_facts",
    "draft_notice",
)
SENDING_TOOLS = ("send_notice", "record_dispute", "confirm_contract_price")


class DisputeResolutionInput(Strict):
    reconciliation_job_id: Annotated[
        str,
        Field(pattern=JOB_ID_PATTERN, description="A completed `invoice-reconciliation` job of the same tenant."),
    ]
    contacts: Annotated[
        dict[VendorKey, EmailAddress] | None,
        Field(
            default=None,
            max_length=200,
            description="Where each vendor's notice goes, by vendor as the reconciliation names it (an invoice's "
            "`vendor`, or its document when it has none; case, spacing and punctuation aside).",
        ),
    ]
    default_contact: Annotated[
        EmailAddress | None,
        Field(default=None, description="Where the notices of vendors not in `contacts` go."),
    ]


class NoticeEdits(Strict):
    """A reviewer's edit: notices not to send (by vendor); every other drafted notice is approved as drafted."""

    withhold: list[str] = Field(min_length=1, max_length=200, description="Vendors whose notice is not sent.")


SPEC = WorkflowSpec(
    name="dispute-resolution",
    description="Dispute a reconciliation's discrepancies: one reviewed notice per vendor, sent once, remembered.",
    input_model=DisputeResolutionInput,
    result_model=f"{MODELS}:DisputeResolutionResult",
    domain="longhaul.workflows.dispute_resolution.steps",
    tools="longhaul.workflows.dispute_resolution.tools:TOOLS",
    steps=(
        step("load_reconciliation", reads_results=True),  # the reconciliation's published result
        agent(
            "draft_notices",
            policy=AgentPolicy(
                tools=DRAFTING_TOOLS,
                output_model=f"{MODELS}:Drafts",
                brief="brief_drafting",
                check="check_drafts",
                offline=f"{POLICY}:drafting",
                max_turns=12,
                max_tool_calls=1200,
                prompt_version="dispute-drafting-1",
            ),
            timeout_seconds=120,
        ),
        review(
            "review",
            policy=ReviewPolicy(
                assignee_group="accounts-payable",
                secondary_group="finance-controllers",
                edits_model=NoticeEdits,
                mode="auto",  # every drafted notice is reviewed before it is sent
            ),
        ),
        agent(
            "send_notices",
            policy=AgentPolicy(
                tools=SENDING_TOOLS,
                output_model=f"{MODELS}:Sent",
                brief="brief_sending",
                check="check_sent",
                offline=f"{POLICY}:sending",
                max_turns=8,
                max_tool_calls=1200,
                prompt_version="dispute-sending-1",
            ),
            timeout_seconds=120,
        ),
        step("publish_result"),
    ),
)
