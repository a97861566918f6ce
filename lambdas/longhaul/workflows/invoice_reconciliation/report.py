"""Per-invoice results, the deterministic summary, the check of a free-text summary, and the Markdown report.

A model-written summary is accepted only if every figure in it is a validated number of the result (amounts,
differences, per-currency sums, tax rates, counts, numbers of dates); otherwise the deterministic summary is used
and the blocking figures are recorded in `summary_blocked`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from decimal import Decimal

from longhaul.workflows.invoice_reconciliation.amounts import AmountError, amount_string, parse_amount, percentages_in
from longhaul.workflows.invoice_reconciliation.models import (
    RULES,
    AgreedPrice,
    ContractSummary,
    Discrepancy,
    ExtractedInvoice,
    InvoiceReconciliationResult,
    InvoiceResult,
    LineItem,
    Totals,
    amount,
    decimal,
    quantity,
)
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList
from longhaul.workflows.invoice_reconciliation.rules import check
from longhaul.workflows.invoice_reconciliation.sourcing import SourcingError

# A figure: optional sign/currency, digits with grouping and decimals, optional percent. Digits glued to letters
# or following a letter and a hyphen are parts of identifiers (`INV-1001`, `AB-100`), not figures.
_FIGURE = re.compile(r"(?<![\w.,])(?<![A-Za-z]-)[-−]?(?:\d{1,3}(?:[,'’]\d{3})+|\d+)(?:\.\d+)?(?![\w])(?:\s?%)?")


def invoice_result(
    invoice: ExtractedInvoice, price_list: PriceList, errors: Sequence[SourcingError] = ()
) -> InvoiceResult:
    """The result of one invoice: only sourced values, its discrepancies, and its status."""
    bad = {error.field for error in errors}
    discrepancies = check(invoice, price_list, errors)
    items = [
        LineItem(
            product_code=item.product_code,
            description=item.description,
            quantity=quantity(item.quantity),
            unit_price=amount(item.unit_price),
            line_total=amount(item.line_total),
            source=item.source,
            tax=amount(item.tax) if item.tax is not None else None,
        )
        for i, item in enumerate(invoice.line_items)
        if not any(field.startswith(f"line_items[{i}].") for field in bad)
    ]
    t = invoice.totals

    def sourced(name: str) -> str | None:
        found = getattr(t, name)
        if found is None or f"totals.{name}" in bad:
            return None
        value = decimal(found.value)
        return amount_string(abs(value) if name == "discount" else value)  # a discount is the amount deducted

    def header(name: str) -> str | None:
        found = getattr(invoice, name)
        return found.value if found is not None and name not in bad else None

    charges_ok = t.charges and not any(f.startswith("totals.charges") for f in bad)
    rate = t.tax_rate.value if t.tax_rate and "totals.tax_rate" not in bad else None
    totals = Totals(
        subtotal=sourced("subtotal"),
        tax=sourced("tax"),
        discount=sourced("discount"),
        total=sourced("total"),
        tax_rate=format(parse_amount(rate.replace("%", "")), "f") if rate else None,
        charges=amount_string(sum((decimal(c.value) for c in t.charges), Decimal(0))) if charges_ok else None,
        tax_included=True if t.tax_included is not None and "totals.tax_included" not in bad else None,
    )
    status = "unreadable" if not items else "discrepancies" if discrepancies else "matched"
    return InvoiceResult(
        document=invoice.document,
        invoice_number=header("invoice_number"),
        currency=header("currency"),
        status=status,
        line_items=items,
        totals=totals,
        discrepancies=discrepancies,
        date=header("date"),
        vendor=header("vendor"),
        extractor=invoice.extractor,
    )


def contract_summary(price_list: PriceList) -> ContractSummary:
    prices = [
        AgreedPrice(code=p.code, description=p.description, unit_price=amount_string(p.unit_price), source=p.source)
        for p in sorted(price_list.prices.values(), key=lambda p: (p.source.page, p.code))
    ]
    return ContractSummary(
        document=price_list.document, currency=price_list.currency, products=len(price_list.prices), prices=prices
    )


def totals_by_currency(invoices: Sequence[InvoiceResult]) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = {}
    for invoice in invoices:
        if invoice.totals.total is not None:
            key = invoice.currency or "unknown currency"
            sums[key] = sums.get(key, Decimal(0)) + Decimal(invoice.totals.total)
    return sums


def deterministic_summary(invoices: Sequence[InvoiceResult], contract: ContractSummary) -> str:
    """Counts, invoiced totals per currency and discrepancies per rule, every figure a validated number."""
    status = Counter(invoice.status for invoice in invoices)
    rules = Counter(d.rule for invoice in invoices for d in invoice.discrepancies)
    text = (
        f"Reconciled {len(invoices)} invoices against {contract.document} ({contract.currency}, "
        f"{contract.products} products): {status['matched']} matched, {status['discrepancies']} with "
        f"discrepancies, {status['unreadable']} unreadable."
    )
    sums = totals_by_currency(invoices)
    if sums:
        text += " Invoiced totals: " + "; ".join(f"{c} {amount_string(v)}" for c, v in sorted(sums.items())) + "."
    if rules:
        counts = ", ".join(f"{rule} {rules[rule]}" for rule in RULES if rules[rule])
        text += f" Discrepancies ({sum(rules.values())}): {counts}."
    else:
        text += " No discrepancies."
    return text


def _numbers(text: str | None) -> set[Decimal]:
    if not text:
        return set()
    try:
        return {abs(parse_amount(text))}
    except AmountError:
        return {Decimal(m) for m in re.findall(r"\d+(?:\.\d+)?", text)}


def validated_numbers(invoices: Sequence[InvoiceResult], contract: ContractSummary) -> set[Decimal]:
    """Every number a summary may state: values, differences, sums, rates and counts of the result."""
    allowed: set[Decimal] = {Decimal(len(invoices)), Decimal(contract.products)}
    allowed |= set(map(Decimal, Counter(i.status for i in invoices).values()))
    allowed |= set(map(Decimal, Counter(d.rule for i in invoices for d in i.discrepancies).values()))
    allowed.add(Decimal(sum(len(i.discrepancies) for i in invoices)))
    allowed |= set(totals_by_currency(invoices).values())
    for invoice in invoices:
        allowed |= {Decimal(n) for n in re.findall(r"\d+", invoice.date or "")}  # "March 2025", "1 March"
        allowed |= {Decimal(len(invoice.line_items)), Decimal(len(invoice.discrepancies))}
        for item in invoice.line_items:
            allowed |= {Decimal(item.quantity), Decimal(item.unit_price), Decimal(item.line_total)}
        allowed |= {Decimal(v) for v in invoice.totals.model_dump().values() if v is not None}
        for d in invoice.discrepancies:
            expected, actual = _numbers(d.expected), _numbers(d.actual)
            allowed |= expected | actual
            allowed |= {abs(a - e) for a in actual for e in expected}
    return allowed


def identifiers(invoices: Sequence[InvoiceResult], contract: ContractSummary | None = None) -> list[str]:
    """Strings whose digits are names, not figures: documents, invoice numbers, product codes, dates, vendors."""
    names = {i.document for i in invoices} | {contract.document} if contract else {i.document for i in invoices}
    names |= {v for i in invoices for v in (i.invoice_number, i.date, i.vendor) if v}
    names |= {item.product_code for i in invoices for item in i.line_items}
    names |= {d.actual for i in invoices for d in i.discrepancies if d.rule == "unknown-product" and d.actual}
    return sorted(names, key=len, reverse=True)


def check_summary(text: str, allowed: set[Decimal], names: Iterable[str] = ()) -> list[str]:
    """Figures in a free-text summary that are not among the `allowed` validated numbers (empty: it passes)."""
    for name in names:
        text = text.replace(name, " ")
    blocked: list[str] = []
    for match in _FIGURE.finditer(text):
        figure = match.group().strip()
        is_rate = figure.endswith("%")
        try:
            value = percentages_in(figure)[0] if is_rate else abs(parse_amount(figure))
        except (AmountError, IndexError):
            blocked.append(figure)
            continue
        if value not in allowed:
            blocked.append(figure)
    return blocked


def reconciliation_result(
    invoices: Sequence[InvoiceResult],
    contract: ContractSummary,
    *,
    model_summary: str | None,
    job_id: str | None = None,
    model: str | None = None,
    markdown_key: str | None = None,
) -> InvoiceReconciliationResult:
    """The job's result; the model's summary is used only if every figure in it is validated."""
    allowed, names = validated_numbers(invoices, contract), identifiers(invoices, contract)
    blocked = check_summary(model_summary, allowed, names) if model_summary else []
    use_model = bool(model_summary and model_summary.strip()) and not blocked
    return InvoiceReconciliationResult(
        invoices=list(invoices),
        summary=(model_summary or "").strip() if use_model else deterministic_summary(invoices, contract),
        summary_source="model" if use_model else "deterministic",
        summary_blocked=blocked,
        contract=contract,
        job_id=job_id,
        model=model,
        markdown_key=markdown_key,
    )


# ---------------------------------------------------------------- Markdown


def _cell(text: str | None) -> str:
    return (text or "—").replace("|", "\\|").replace("\n", " ")


def _discrepancy_line(d: Discrepancy) -> str:
    where = f" — {d.source.document}, page {d.source.page}: `{_cell(d.source.quote)}`" if d.source else ""
    note = f" ({d.note})" if d.note else ""
    return f"- **{d.rule}** `{d.field}`: expected {_cell(d.expected)}, actual {_cell(d.actual)}{note}{where}"


def render_markdown(result: InvoiceReconciliationResult) -> str:
    """A readable report: summary, one table row per invoice, then each invoice's findings and lines."""
    lines = ["# Invoice reconciliation", "", result.summary, ""]
    if result.summary_source == "deterministic" and result.summary_blocked:
        lines += [
            f"_The model's summary was replaced: it stated {', '.join(result.summary_blocked)}, "
            "which are not validated figures._",
            "",
        ]
    if result.contract:
        c = result.contract
        lines += [f"Contract: {c.document} ({c.currency}, {c.products} products).", ""]
    lines += ["| Invoice | Number | Currency | Total | Status | Discrepancies |", "|---|---|---|---:|---|---:|"]
    for inv in result.invoices:
        lines.append(
            f"| {_cell(inv.document)} | {_cell(inv.invoice_number)} | {_cell(inv.currency)} | "
            f"{_cell(inv.totals.total)} | {inv.status} | {len(inv.discrepancies)} |"
        )
    for inv in result.invoices:
        lines += ["", f"## {inv.document}", "", f"Status: **{inv.status}**.", ""]
        lines += [_discrepancy_line(d) for d in inv.discrepancies] or ["No discrepancies."]
        if inv.line_items:
            lines += [
                "",
                "| Code | Description | Qty | Unit price | Line total | Page |",
                "|---|---|---:|---:|---:|---:|",
            ]
            lines += [
                f"| {_cell(i.product_code)} | {_cell(i.description)} | {i.quantity} | {i.unit_price} | "
                f"{i.line_total} | {i.source.page} |"
                for i in inv.line_items
            ]
        t = inv.totals
        lines += [
            "",
            f"Subtotal {_cell(t.subtotal)} · tax {_cell(t.tax)} · discount {_cell(t.discount)} · "
            f"total {_cell(t.total)}",
        ]
    model = f" Model: {result.model}." if result.model else ""
    lines += ["", f"Summary source: {result.summary_source}.{model}"]
    return "\n".join(lines).rstrip() + "\n"
