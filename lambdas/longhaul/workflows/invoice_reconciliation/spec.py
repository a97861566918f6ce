"""Workflow `invoice-reconciliation`: extract invoices into a typed schema, source every value, check them with
deterministic business rules and reconcile them against the contract's price list.

parse → fan out extraction over invoices (sourced, re-extracted with feedback) → business rules and reconciliation
→ summary (checked against the validated numbers) → review → publish. The review (when asked for; `auto`: when a
discrepancy was found) may edit the summary, which is then checked like the model's.

A late price list: a submission that says `await_price_list` waits (after the extraction, before the checks) for
signal `price_list` at most its `timeout_seconds`; a price list sent in time replaces the contract's in the
reconciliation, else the job goes on with the contract's. A job that does not ask never waits, but a price list sent
before its checks is used all the same.
"""

from typing import Annotated, Self

from pydantic import ConfigDict, Field, model_validator

from longhaul.core.contracts import (
    VISIBLE_SCHEMA,
    ArchiveInput,
    DocumentInput,
    SafeName,
    Strict,
    Visible,
    exactly_one_of,
)
from longhaul.engine.spec import ReviewPolicy, WorkflowSpec, child, fan_out, output, review, signal, step

MAX_INVOICES = 100
# How long a job may wait for a late price list (signal `price_list`): at most a day, by default an hour.
MAX_PRICE_LIST_WAIT_SECONDS = 24 * 3600
DEFAULT_PRICE_LIST_WAIT_SECONDS = 3600
MAX_PRICE_LIST_CHARS = 50_000


class AwaitPriceList(Strict):
    """Wait for a late price list (signal `price_list`) before checking the invoices."""

    timeout_seconds: Annotated[
        int,
        Field(
            default=DEFAULT_PRICE_LIST_WAIT_SECONDS,
            ge=1,
            le=MAX_PRICE_LIST_WAIT_SECONDS,
            description="How long the job waits for it, from when its invoices are extracted; then it goes on with "
            "the contract's price list (the wait counts against the job's deadline).",
        ),
    ]


class PriceListSignal(Strict):
    """The body of signal `price_list`: a price list as text, read like a contract's (rows of product code,
    description and unit price, and a currency). It replaces the contract's price list in the reconciliation."""

    name: Annotated[SafeName, Field(description="The price list's name, used in the sources that cite its lines.")]
    text: Annotated[
        str,
        Field(min_length=1, max_length=MAX_PRICE_LIST_CHARS, json_schema_extra=VISIBLE_SCHEMA),
        Visible,
    ]

    @model_validator(mode="after")
    def _readable(self) -> Self:
        from longhaul.workflows.invoice_reconciliation.pricelist import parse_price_list  # on a signal's first use

        parse_price_list(self.name, [(1, self.text)])  # a PriceListError (a ValueError) says what is missing
        return self


class ResolveDisputes(Strict):
    """Dispute the discrepancies found: a `dispute-resolution` job started by this one (a child job) once its report
    is published, which this job waits for. Where each vendor's notice goes, as that workflow takes it."""

    contacts: Annotated[
        dict[Annotated[str, Field(min_length=1, max_length=300)], Annotated[str, Field(max_length=254)]] | None,
        Field(
            default=None,
            max_length=200,
            description="Where each vendor's notice goes, by vendor (see `dispute-resolution`'s `contacts`).",
        ),
    ]
    default_contact: Annotated[
        str | None, Field(default=None, max_length=254, description="Where the notices of other vendors go.")
    ]


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
    await_price_list: Annotated[
        AwaitPriceList | None,
        Field(
            default=None,
            description="Wait for a late price list sent as signal `price_list` (`POST /v1/jobs/{job_id}/signals/"
            "price_list`) before the checks, at most `timeout_seconds`; without it the job does not wait.",
        ),
    ]
    resolve_disputes: Annotated[
        ResolveDisputes | None,
        Field(
            default=None,
            description="When the reconciliation finds discrepancies, dispute them: a `dispute-resolution` child "
            "job (its notices reviewed, then sent to `contacts` / `default_contact`), which this job waits for; "
            "its usage and cost count in this job's. Without it (or with no discrepancy) no child starts.",
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
        step(
            "parse_documents",
            timeout_seconds=300,
            memory_mb=1769,
            reads=("contract", "invoices", "invoices_archive"),
        ),
        fan_out(
            "extract_invoices",
            over="parse_documents.invoices",
            item_unit="invoice",
            timeout_seconds=360,  # up to three extractions of one invoice, each within the model timeout
            calls_model=True,
            reads=(),  # its invoices by the references parse_documents gave
        ),
        # A late price list: waited for only when the submission asks (`await_price_list`, the hook
        # `price_list_wait`); proceeds with the contract's after the timeout.
        signal(
            "price_list",
            model=PriceListSignal,
            timeout_seconds=MAX_PRICE_LIST_WAIT_SECONDS,
            on_timeout="proceed",
            wanted="price_list_wait",
            reads=("await_price_list",),
        ),
        step("check_invoices", reads=("resolve_disputes",)),
        step("summarize_findings", timeout_seconds=120, calls_model=True, reads=()),
        review(
            "review",
            policy=ReviewPolicy(
                assignee_group="accounts-payable",
                secondary_group="finance-controllers",
                edits_model=SummaryEdits,
                mode="never",
            ),
            reads=(),
        ),
        step("publish_report", reads=()),
        # Disputes, when the request asks for them and there is something to dispute: a child job, waited for.
        child(
            "resolve_disputes",
            workflow="dispute-resolution",
            input="dispute_input",
            when=output("check_invoices").path("resolve_disputes").is_true()
            & output("check_invoices").path("discrepancies").gt(0),
            reads=("resolve_disputes",),
        ),
    ),
)
