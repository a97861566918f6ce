"""DynamoDB stores, one per aggregate: jobs (with their events, idempotency records and API keys) and checkpoints
(step records and model charges). Dead letters are `longhaul.adapters.dead_letters`."""
