"""Deterministic business rules over one sourced invoice and the contract's price list.

Rules (stable names, used in the result):
- `line-total`: quantity × unit price = line total, to the cent (half-up or half-even rounding both accepted);
- `invoice-total`: the totals add up. Each stated figure is checked against its immediate inputs, as a person
  reconciling would: the sum of line totals = subtotal (`totals.subtotal`); subtotal (or, without one, the sum of
  line totals) + tax + charges − discount = total (`totals.total`); and a stated tax rate gives the tax within a
  cent, on the subtotal or on the subtotal less the discount (`totals.tax`). When the invoice says its prices
  include the tax (`totals.tax_included`), the tax is part of the line totals, not added to them: the total is the
  (gross) lines + charges − discount, the subtotal may be the gross lines or the lines less the tax, and a rate
  gives the tax as its share of the gross (rate / (100 + rate)). A tax column per line (`line_items[i].tax`) is
  summed: that sum is the tax when the totals state none, and must equal the stated tax when they do; a line's own
  rate gives its tax within a cent (`line_items[i].tax`);
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


def _tax_share(amount: Decimal, rate: Decimal, included: bool) -> Decimal:
    """The tax at `rate` percent on a net `amount`, or within a gross one when prices include the tax."""
    return amount * rate / (100 + rate) if included else amount * rate / 100


def _line_rules(i: int, item: ExtractedLineItem, prices: PriceList, included: bool) -> list[Discrepancy]:
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
    if item.tax is not None and item.tax_rate is not None:
        tax, rate = decimal(item.tax), decimal(item.tax_rate.replace("%", ""))
        expected_tax = _tax_share(line_total, rate, included)
        if abs(tax - expected_tax) > _TAX_TOLERANCE:
            found.append(
                Discrepancy(
                    rule="invoice-total",
                    field=f"{path}.tax",
                    expected=amount_string(expected_tax.quantize(CENT, rounding=ROUND_HALF_UP)),
                    actual=amount_string(tax),
                    source=item.source,
                    note=f"{quantity_string(rate)}% {'within' if included else 'of'} {amount_string(line_total)}",
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
    included = totals.tax_included is not None and "totals.tax_included" not in bad
    found: list[Discrepancy] = []
    lines_sum = sum((decimal(item.line_total) for item in items), Decimal(0)) if items else None
    line_taxes = [decimal(item.tax) for item in items or [] if item.tax is not None]
    line_tax = sum(line_taxes, Decimal(0)) if items and len(line_taxes) == len(items) else None
    subtotal = _value(totals.subtotal, "totals.subtotal", bad)
    tax = _value(totals.tax, "totals.tax", bad)
    if totals.tax is None and line_tax is not None:
        tax = line_tax  # a tax column and no tax line: the lines' taxes are the invoice's
    elif totals.tax and tax is not None and line_tax is not None and tax != line_tax:
        found.append(_finding("totals.tax", line_tax, tax, totals.tax, "sum of the line taxes"))
    net_subtotal = included and subtotal is not None and tax is not None and subtotal + tax == lines_sum
    wrong_subtotal = subtotal is not None and lines_sum is not None and subtotal != lines_sum and not net_subtotal
    if totals.subtotal and subtotal is not None and lines_sum is not None and wrong_subtotal:
        found.append(_finding("totals.subtotal", lines_sum, subtotal, totals.subtotal, "sum of the line totals"))
    base = subtotal if subtotal is not None else (None if totals.subtotal else lines_sum)
    if net_subtotal:
        base = lines_sum  # the gross: a tax-inclusive invoice's lines; its subtotal is them less the tax
    discount = _value(totals.discount, "totals.discount", bad)
    discount = abs(discount) if discount is not None else None  # written as 50.00, -50.00 or (50.00)
    charges_ok = all(f"totals.charges[{i}]" not in bad for i in range(len(totals.charges)))
    charges = sum((decimal(c.value) for c in totals.charges), Decimal(0))
    inputs_ok = (
        charges_ok and (totals.tax is None or tax is not None) and (totals.discount is None or discount is not None)
    )
    total = _value(totals.total, "totals.total", bad)
    if totals.total and total is not None and base is not None and inputs_ok:
        added = 0 if included else (tax or 0)  # an included tax is already in the lines
        expected = base + added + charges - (discount or 0)
        if expected != total:
            note = "lines (tax included) + charges − discount" if included else "subtotal + tax + charges − discount"
            found.append(_finding("totals.total", expected, total, totals.total, note))
    rate = _value(totals.tax_rate, "totals.tax_rate", bad)
    if totals.tax and tax is not None and rate is not None and base is not None:
        bases = [base, base - (discount or 0)]
        if all(abs(tax - _tax_share(b, rate, included)) > _TAX_TOLERANCE for b in bases):
            expected_tax = _tax_share(base, rate, included).quantize(CENT, rounding=ROUND_HALF_UP)
            share = "within" if included else "of"
            note = f"{quantity_string(rate)}% {share} {amount_string(base)}"
            found.append(_finding("totals.tax", expected_tax, tax, totals.tax, note))
    return found


def _finding(path: str, expected: Decimal, actual: Decimal, value: SourcedValue, note: str) -> Discrepancy:
    return Discrepancy(
        rule="invoice-total",
        field=path,
        expected=amount_string(expected),
        actual=amount_string(actual),
        source=value.source,
        note=note,
    )


def check(invoice: ExtractedInvoice, price_list: PriceList, errors: Sequence[SourcingError] = ()) -> list[Discrepancy]:
    """Every discrepancy of a sourced invoice, given the sourcing errors that survived re-extraction."""
    bad = {error.field for error in errors}
    included = invoice.totals.tax_included is not None and "totals.tax_included" not in bad
    found = _unsourced(errors)
    sourced_items: list[ExtractedLineItem] = []
    all_items_sourced = True
    for i, item in enumerate(invoice.line_items):
        if any(field.startswith(f"line_items[{i}].") for field in bad):
            all_items_sourced = False
            continue
        sourced_items.append(item)
        found.extend(_line_rules(i, item, price_list, included))
    found.extend(_currency_rule(invoice, price_list, bad))
    found.extend(_total_rules(invoice, sourced_items if all_items_sourced else None, bad))
    return found
