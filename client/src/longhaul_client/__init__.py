"""`longhaul_client`: the typed Python client of the Longhaul API, and (`longhaul_client.cli`) the `longhaul` command.

    from longhaul_client import LonghaulClient

    with LonghaulClient(os.environ["LONGHAUL_URL"], os.environ["LONGHAUL_API_KEY"]) as longhaul:
        job = longhaul.wait(longhaul.submit(request).job_id)

Not part of the Lambda asset: a distribution of its own (`client/pyproject.toml`) that depends on the domain
package for the API's contracts.
"""

from longhaul_client.client import JobUpdate, LonghaulClient, Result, RetryPolicy, WaitTimedOut
from longhaul_client.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidRequest,
    LonghaulError,
    NotFound,
    PayloadTooLarge,
    Problem,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
    UnsupportedMediaType,
)

__all__ = [
    "BadRequest",
    "Conflict",
    "Forbidden",
    "InvalidRequest",
    "JobUpdate",
    "LonghaulClient",
    "LonghaulError",
    "NotFound",
    "PayloadTooLarge",
    "Problem",
    "Result",
    "RetryPolicy",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "UnsupportedMediaType",
    "WaitTimedOut",
]
