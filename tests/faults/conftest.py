"""Fault-injection scenarios run on the same local platform as the workflow scenarios."""

from tests.workflows.conftest import (  # noqa: F401 - fixtures shared with the workflow scenarios
    Client,
    alpha,
    beta,
    inject,
    least_privilege,
    no_faults,
    no_secret_in_any_log_line,
    platform,
    sample_request,
)
