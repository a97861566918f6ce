"""Workflow `invoice-reconciliation`: extract invoices into a typed schema, source every value, check them with
deterministic business rules and reconcile them against the contract's price list.

parse → fan out extraction over invoices (sourced, re-extracted with feedback) → business rules and reconciliation
→ summary (checked against the validated numbers) → review → publish. The review (when asked for; `auto`: when a
discrepancy was found) may edit the summary, which is then checked like the model's.
"""

from typing import Annotated, Self

from pydantic import ConfigDict, Field, model_validator

from longhaul.core.contracts import VISIBLE_SCHEMA, ArchiveInput, DocumentInput, Strict, Visible, exactly_one_of
from longhaul.engine.spec import ReviewPolicy, WorkflowSpec, fan_out, review, step

MAX_INVOICES = 100


class InvoiceReconciliationInput(Strict):
    model_config = ConfigDict(json_schema_extra=exactly_one_of("invoices", "invoices_archive"))

    contract: Annotated[
        DocumentInput, Field(description="The price list: product code, description, agreed unit price, currency.")
    ]
    invoices: Annotated[
        list[DocumentInput] | None,
        Field(
            default=None,
            min_length=1,
            max_length=MAX_INVOICES,
            description="One document per invoice (text or PDF); or give `invoices_archive`.",
        ),
    ]
    invoices_archive: Annotated[
        ArchiveInput | None,
        Field(
            default=None,
            description=f"The invoices as one uploaded ZIP archive, one member per invoice (1 to {MAX_INVOICES}); "
            "or give `invoices`.",
        ),
    ]

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        if (self.invoices is None) == (self.invoices_archive is None):
            raise ValueError("give exactly one of `invoices` or `invoices_archive`")
        names = [self.contract.name, *(d.name for d in self.invoices or ())]
        if len(set(names)) != len(names):
            raise ValueError("document names must be unique (sources refer to them)")
        return self


class SummaryEdits(Strict):
    """A reviewer's summary; used only if every figure in it is a validated number (like the model's)."""

    summary: Annotated[str, Field(min_length=1, max_length=5000, json_schema_extra=VISIBLE_SCHEMA), Visible]


SPEC = WorkflowSpec(
    name="invoice-reconciliation",
    description="Reconcile invoices against a contract's price list, every finding with a verbatim source.",
    input_model=InvoiceReconciliationInput,
    # imported by the steps that publish it and the result route (`ModelRef`), not by the API's import
    result_model="longhaul.workflows.invoice_reconciliation.models:InvoiceReconciliationResult",
    domain="longhaul.workflows.invoice_reconciliation.steps",
    steps=(
        step("parse_documents", timeout_seconds=300, memory_mb=1769),
        fan_out(
            "extract_invoices",
            over="parse_documents.invoices",
            item_unit="invoice",
            timeout_seconds=360,  # up to three extractions of one invoice, each within the model timeout
            calls_model=True,
        ),
        step("check_invoices"),
        step("summarize_findings", timeout_seconds=120, calls_model=True),
        review(
            "review",
            policy=ReviewPolicy(
                assignee_group="accounts-payable",
                secondary_group="finance-controllers",
                edits_model=SummaryEdits,
                mode="never",
            ),
        ),
        step("publish_report"),
    ),
)
