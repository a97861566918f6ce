"""How a step runs: the workflow spec language and its registry, the step runner (checkpoints, events,
progress), fan-out items, the failure recorder, per-invocation usage.

May import: guardrails, services, storage, adapters, core, documents."""
