"""Where state lives. DynamoDB stores, one per aggregate: jobs (with their events, idempotency records and API keys;
listings in `listing.py`), checkpoints (step records and model charges), reviews, budgets (the ledger), breakers,
admission counters, usage counters, the webhook outbox, the outbox of agents' side effects and their sagas
(`effects.py`, `sagas.py`), tenants' memory (`memory.py`: episodes and facts); and the S3 artifact store
(`artifacts.py`: deterministic keys per job, step and item). Each returns typed records (`longhaul.core.records`),
never dicts. Dead letters are `longhaul.adapters.dead_letters`.

May import: core."""
