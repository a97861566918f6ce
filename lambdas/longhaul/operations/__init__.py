"""What operators do and what runs on a schedule: replay, dead letters, the sweep, tenant policies, admission
control, cost accounting, admin commands against a deployed stack.

May import: workflows, review, webhooks, engine, guardrails, services, storage, adapters, core, documents."""
