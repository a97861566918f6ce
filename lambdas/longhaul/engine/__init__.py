"""How a step runs: the workflow spec language and its registry, the step runner (checkpoints, events,
progress), fan-out items, the failure recorder, per-invocation usage; agents: one turn of an agent step, tools run
through the outbox, the saga's compensations, memory tools.

May import: guardrails, services, storage, adapters, core, documents."""
