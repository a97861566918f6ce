"""The words of a dispute notice and of its retraction: every disputed line with its verbatim source, the earlier
disputes and the agreed prices it relies on. Deterministic: the same case makes the same notice."""

from __future__ import annotations

from longhaul.workflows.dispute_resolution.models import DisputedLine, KnownFact, PastDispute

RULES = {
    "line-total": "the line total is not quantity x unit price",
    "invoice-total": "the invoice's totals do not add up",
    "unknown-product": "the product is not in our contract",
    "contract-price": "the unit price differs from the agreed price",
    "currency": "the invoice's currency is not the contract's",
    "unsourced-value": "a value could not be found in the invoice",
}


def subject(vendor: str, lines: list[DisputedLine]) -> str:
    invoices = sorted({line.invoice_number or line.document for line in lines})
    return f"Invoice dispute: {vendor}, {len(lines)} disputed line(s) on {', '.join(invoices)}"


def line_text(number: int, line: DisputedLine) -> str:
    invoice = f"invoice {line.invoice_number} ({line.document})" if line.invoice_number else line.document
    product = f", product {line.product_code}" if line.product_code else ""
    expected = line.expected if line.expected is not None else "none"
    text = (
        f"{number}. {invoice}{product}, {line.field}: {RULES.get(line.rule, line.rule)} "
        f"(expected {expected}, invoiced {line.actual if line.actual is not None else 'none'})."
    )
    if line.note:
        text += f" {line.note}."
    if line.source is not None:
        text += f'\n   Source: {line.source.document}, page {line.source.page}: "{line.source.quote}"'
    return text


def body(
    vendor: str, lines: list[DisputedLine], reconciliation_job_id: str, past: list[PastDispute], facts: list[KnownFact]
) -> str:
    parts = [
        f"To {vendor},",
        "",
        f"Our reconciliation of your invoices against our price agreement (reconciliation {reconciliation_job_id}) "
        f"found {len(lines)} line(s) we dispute:",
        "",
        *(line_text(n, line) for n, line in enumerate(lines, start=1)),
    ]
    if facts:
        parts += ["", "The agreed prices we rely on:"]
        for fact in facts:
            where = ""
            if fact.provenance is not None:
                p = fact.provenance
                where = f' ({p.document}, page {p.page}: "{p.quote}")'
            parts.append(f"- {fact.statement}{where}")
    if past:
        parts += ["", "We have disputed invoices of yours before:"]
        parts += [f"- {d.at.date().isoformat()}: {d.summary} (job {d.job_id})" for d in past]
    parts += [
        "",
        "Please send a corrected invoice or a credit note for these lines; the rest of the invoices is not disputed.",
    ]
    return "\n".join(parts)


def retraction(vendor: str, notice_subject: str, operation_id: str) -> tuple[str, str]:
    text = "\n".join(
        [
            f"To {vendor},",
            "",
            f'Please disregard our notice "{notice_subject}" (reference {operation_id}): it is withdrawn.',
            "We will write again if the dispute is raised anew.",
        ]
    )
    return f"Withdrawn: {notice_subject}", text
