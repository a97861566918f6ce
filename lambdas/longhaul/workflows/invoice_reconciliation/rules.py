"""Deterministic business rules over one sourced invoice and the contract's price list.

Rules (stable names, used in the result):
- `line-total`: quantity × unit price = line total, to the cent (half-up or half-even rounding both accepted);
- `invoice-total`: the totals add up. Each stated figure is checked against its immediate inputs, as a person
  reconciling would: the sum of line totals = subtotal (`totals.subtotal`); subtotal (or, without one, the sum of
  line totals) + tax + charges − discount = total (`totals.total`); and a stated tax rate gives the tax within a
  cent, on the subtotal or on the subtotal less the discount (`totals.tax`);
- `unknown-product`: a line's product code is not in the contract (expected null, actual the code);
- `contract-price`: a line's unit price differs from the contract's (checked even when currencies differ, so a
  converted price list still shows up line by line);
- `currency`: the invoice currency differs from the contract's. A bare `$` reads as USD but matches any dollar
  contract currency (CAD, AUD …): the symbol alone cannot contradict it;
- `unsourced-value`: a value that could not be found in its quoted source after re-extraction.

A value that is not sourced takes no part in any other rule, and a sum that would need one is not checked (it
would only repeat the same finding as a wrong total).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

from longhaul.workflows.invoice_reconciliation.amounts import (
    CENT,
    DOLLAR_CODES,
    amount_string,
    iso_code_in,
    quantity_string,
)
from longhaul.workflows.invoice_reconciliation.models import (
    Discrepancy,
    ExtractedInvoice,
    ExtractedLineItem,
    SourcedValue,
    decimal,
)
from longhaul.workflows.invoice_reconciliation.pricelist import PriceList
from longhaul.workflows.invoice_reconciliation.sourcing import SourcingError

_TAX_TOLERANCE = Decimal("0.01")


def _unsourced(errors: Sequence[SourcingError]) -> list[Discrepancy]:
    return [
        Discrepancy(
            rule="unsourced-value",
            field=error.field,
            expected=None,
            actual=error.value,
            # The quote is cited only when it is really on the page (the value just is not in it).
            source=error.source if error.quote_found else None,
            note=error.reason,
        )
        for error in errors
    ]


def _line_rules(i: int, item: ExtractedLineItem, prices: PriceList) -> list[Discrepancy]:
    found: list[Discrepancy] = []
    path = f"line_items[{i}]"
    quantity, unit_price, line_total = decimal(item.quantity), decimal(item.unit_price), decimal(item.line_total)
    product = prices.lookup(item.product_code)
    if product is None:
        found.append(
            Discrepancy(
                rule="unknown-product",
                field=f"{path}.product_code",
                expected=None,
                actual=item.product_code,
                source=item.source,
            )
        )
    elif product.unit_price != unit_price:
        found.append(
            Discrepancy(
                rule="contract-price",
                field=f"{path}.unit_price",
                expected=amount_string(product.unit_price),
                actual=amount_string(unit_price),
                source=item.source,
                note=f"contract: {product.source.quote}",
            )
        )
    exact = quantity * unit_price
    accepted = {exact.quantize(CENT, rounding=ROUND_HALF_UP), exact.quantize(CENT, rounding=ROUND_HALF_EVEN)}
    if line_total not in accepted:
        found.append(
            Discrepancy(
                rule="line-total",
                field=f"{path}.line_total",
                expected=amount_string(exact.quantize(CENT, rounding=ROUND_HALF_UP)),
                actual=amount_string(line_total),
                source=item.source,
                note=f"{quantity_string(quantity)} × {amount_string(unit_price)}",
            )
        )
    return found


def _currency_rule(invoice: ExtractedInvoice, prices: PriceList, bad: set[str]) -> list[Discrepancy]:
    currency = invoice.currency
    if currency is None or "currency" in bad or currency.value == prices.currency:
        return []
    bare_dollar = currency.value == "USD" and iso_code_in(currency.source.quote) is None
    if bare_dollar and prices.currency in DOLLAR_CODES:
        return []
    return [
        Discrepancy(
            rule="currency", field="currency", expected=prices.currency, actual=currency.value, source=currency.source
        )
    ]


def _value(found: SourcedValue | None, path: str, bad: set[str]) -> Decimal | None:
    return None if found is None or path in bad else decimal(found.value)


def _total_rules(invoice: ExtractedInvoice, items: list[ExtractedLineItem] | None, bad: set[str]) -> list[Discrepancy]:
    totals = invoice.totals
    found: list[Discrepancy] = []
    lines_sum = sum((decimal(item.line_total) for item in items), Decimal(0)) if items else None
    subtotal = _value(totals.subtotal, "totals.subtotal", bad)
    if totals.subtotal and subtotal is not None and lines_sum is not None and subtotal != lines_sum:
        found.append(
            Discrepancy(
                rule="invoice-total",
                field="totals.subtotal",
                expected=amount_string(lines_sum),
                actual=amount_string(subtotal),
                source=totals.subtotal.source,
                note="sum of the line totals",
            )
        )
    base = subtotal if subtotal is not None else (None if totals.subtotal else lines_sum)
    tax = _value(totals.tax, "totals.tax", bad)
    discount = _value(totals.discount, "totals.discount", bad)
    discount = abs(discount) if discount is not None else None  # written as 50.00, -50.00 or (50.00)
    charges_ok = all(f"totals.charges[{i}]" not in bad for i in range(len(totals.charges)))
    charges = sum((decimal(c.value) for c in totals.charges), Decimal(0))
    inputs_ok = (
        charges_ok and (totals.tax is None or tax is not None) and (totals.discount is None or discount is not None)
    )
    total = _value(totals.total, "totals.total", bad)
    if totals.total and total is not None and base is not None and inputs_ok:
        expected = base + (tax or 0) + charges - (discount or 0)
        if expected != total:
            found.append(
                Discrepancy(
                    rule="invoice-total",
                    field="totals.total",
                    expected=amount_string(expected),
                    actual=amount_string(total),
                    source=totals.total.source,
                    note="subtotal + tax + charges − discount",
                )
            )
    rate = _value(totals.tax_rate, "totals.tax_rate", bad)
    if totals.tax and tax is not None and rate is not None and base is not None:
        bases = [base, base - (discount or 0)]
        if all(abs(tax - b * rate / 100) > _TAX_TOLERANCE for b in bases):
            expected_tax = (base * rate / 100).quantize(CENT, rounding=ROUND_HALF_UP)
            found.append(
                Discrepancy(
                    rule="invoice-total",
                    field="totals.tax",
                    expected=amount_string(expected_tax),
                    actual=amount_string(tax),
                    source=totals.tax.source,
                    note=f"{quantity_string(rate)}% of {amount_string(base)}",
                )
            )
    return found


def check(invoice: ExtractedInvoice, price_list: PriceList, errors: Sequence[SourcingError] = ()) -> list[Discrepancy]:
    """Every discrepancy of a sourced invoice, given the sourcing errors that survived re-extraction."""
    bad = {error.field for error in errors}
    found = _unsourced(errors)
    sourced_items: list[ExtractedLineItem] = []
    all_items_sourced = True
    for i, item in enumerate(invoice.line_items):
        if any(field.startswith(f"line_items[{i}].") for field in bad):
            all_items_sourced = False
            continue
        sourced_items.append(item)
        found.extend(_line_rules(i, item, price_list))
    found.extend(_currency_rule(invoice, price_list, bad))
    found.extend(_total_rules(invoice, sourced_items if all_items_sourced else None, bad))
    return found
