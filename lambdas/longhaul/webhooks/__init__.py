"""Completion webhooks: Standard Webhooks signing and verification, delivery over HTTP with retries (`dispatcher.py`,
`http.py`) and what a delivery says (`views.py`). The outbox that a job's final transition writes is
`longhaul.storage.outbox`; the callback address rules are `longhaul.core.addresses`.

May import: engine, guardrails, services, documents, adapters, storage, core."""
