"""Fault-injection scenarios run on the same local platform as the workflow scenarios."""

from collections.abc import Iterator

import pytest

from local.platform import LocalPlatform
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


@pytest.fixture
def ops(platform: LocalPlatform) -> Client:  # noqa: F811 - `platform` is the shared fixture imported above
    """An operator's client."""
    return Client(platform, "ops")


@pytest.fixture
def fast_timeouts(platform: LocalPlatform) -> Iterator[None]:  # noqa: F811
    """A hang ends at the Task timeout: scale the interpreter's waits further down for this scenario."""
    before = platform.time_scale
    platform.set_time_scale(0.03)
    yield
    platform.set_time_scale(before)
