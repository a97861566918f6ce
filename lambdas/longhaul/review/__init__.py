"""Human review: the review step's lane (open a review, wait on a task token one rung of the escalation ladder at a
time, apply the decision) and what a workflow shows its reviewers (`contracts.py`). The reviewers' API use cases are
`longhaul.api.reviews`.

May import: engine, guardrails, services, documents, adapters, storage, core."""
