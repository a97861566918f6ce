"""The invoice-reconciliation domain: parse invoices and a price list, source every value, check, report (pure)."""
