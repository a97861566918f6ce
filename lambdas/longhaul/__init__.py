"""Longhaul's domain package: one folder per part of the platform, one per workflow. Handlers (`handlers/`) stay thin.

Imports run downward only, top to bottom (the layers contract in `pyproject.toml`, checked by import-linter):

    api          the API's use cases: submission, jobs, results, uploads, reviewers' routes
    operations   replay, the sweep, dead letters, tenant policies, admission control, costs, admin commands
    workflows    one package per workflow (spec, steps, its own library), found by folder
    review       the review lane            |  webhooks   signing, delivery
    engine       the spec language and registry, the step runner, fan-out items, the failure recorder, usage
    guardrails   the model gateway (routes, breakers, budgets) and the validation ladder
    services     the composition root: which adapter serves each port
    documents    the document library the workflows share: intake, archives, parsing, OCR planning
    adapters     ports' AWS and model-provider implementations
    storage      DynamoDB stores and the S3 artifact store
    core         contracts, records, errors, limits, clock, settings, schema, ports, prices and meters
"""
