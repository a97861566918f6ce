"""Another tenant's job is a 404 on every route of a live and steerable job, before anything else is checked: the
answer says nothing of the job (not its status, not whether the signal exists) and changes nothing of it."""

from __future__ import annotations

from typing import Any

import requests

from local.platform import LocalPlatform
from tests.workflows.conftest import Client

# (method, path under the job, body): every route a tenant steers or watches a job by.
ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/stream", None),
    ("GET", "/trace", None),
    ("GET", "/result?provisional=true", None),
    ("POST", "/pause", {}),
    ("POST", "/resume", {}),
    ("POST", "/signals/price_list", {"name": "prices.txt", "text": "Widget: $1.00"}),
    ("PATCH", "", {"deadline_seconds": 600}),
]


def _call(client: Client, method: str, path: str, body: Any) -> requests.Response:
    return requests.request(
        method,
        f"{client.base}{path}",
        json=body,
        headers={**client.headers, "Accept": "application/json"},
        timeout=30,
    )


def test_another_tenants_job_is_404_on_every_steering_route(
    platform: LocalPlatform, alpha: Client, beta: Client, sample_request: dict[str, Any]
) -> None:
    job_id = alpha.submit(sample_request)
    alpha.wait(job_id)
    before = len(alpha.events(job_id))
    for method, suffix, body in ROUTES:
        answer = _call(beta, method, f"/v1/jobs/{job_id}{suffix}", body)
        assert answer.status_code == 404, (method, suffix, answer.status_code, answer.text)
        assert answer.headers["Content-Type"].startswith("application/problem+json"), (method, suffix)
        # the same answer as for a job that does not exist at all
        missing = _call(beta, method, f"/v1/jobs/job_{'0' * 28}{suffix}", body)
        assert missing.status_code == 404, (method, suffix, missing.text)
        assert missing.json()["type"] == answer.json()["type"], (method, suffix)
    assert len(alpha.events(job_id)) == before, "a refused request changes nothing of the job"
