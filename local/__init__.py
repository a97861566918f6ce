"""Embedded local runtime: deploys the synthesized CDK template into moto's in-memory AWS and runs it.

`python -m local` starts everything; tests use `local.platform.LocalPlatform`. Only one platform may run
per process at a time, because moto's backends are process-global.
"""
