"""Expiring result downloads, through the local platform: a completed job's result behind a presigned URL that works
until it expires and then answers 403, and a result over the inline limit answered by reference (303) to it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from local.platform import LocalPlatform
from tests.workflows.conftest import Client


@pytest.fixture(scope="module")
def completed(platform: LocalPlatform) -> Iterator[str]:
    from tests.workflows.conftest import SAMPLES

    alpha = Client(platform, "alpha")
    job_id = alpha.submit(json.loads((SAMPLES / "request.json").read_text()))
    assert alpha.wait(job_id)["status"] == "completed"
    yield job_id


def test_a_download_url_works_until_it_expires_and_then_does_not(alpha: Client, completed: str) -> None:
    default = alpha.get(f"/v1/jobs/{completed}/result/download")
    short = alpha.get(f"/v1/jobs/{completed}/result/download", format="json", expires_in=2)
    markdown = alpha.get(f"/v1/jobs/{completed}/result/download", format="markdown")
    inline = alpha.get(f"/v1/jobs/{completed}/result").json()

    assert default.status_code == 200, default.text
    ticket: dict[str, Any] = default.json()
    assert set(ticket) == {"url", "expires_at", "media_type", "bytes"} and ticket["media_type"] == "application/json"
    got = requests.get(ticket["url"], timeout=30)
    assert got.status_code == 200 and len(got.content) == ticket["bytes"]
    assert got.json()["answer"] == inline["answer"]  # the result the workflow wrote (the route adds its budget)
    assert markdown.status_code == 200 and markdown.json()["media_type"] == "text/markdown"
    assert requests.get(markdown.json()["url"], timeout=30).text.strip()
    assert short.status_code == 200
    url = short.json()["url"]
    assert requests.get(url, timeout=30).status_code == 200
    time.sleep(3.5)
    expired = requests.get(url, timeout=30)
    assert expired.status_code == 403 and "Request has expired" in expired.text


def test_a_result_over_the_inline_limit_is_answered_by_reference(
    platform: LocalPlatform, alpha: Client, beta: Client, completed: str
) -> None:
    from local import lambda_runtime

    before = lambda_runtime.environment_overrides()
    platform.set_function_environment(LONGHAUL_RESULT_INLINE_MAX_BYTES="64")
    try:
        referred = requests.get(
            f"{alpha.base}/v1/jobs/{completed}/result", headers=alpha.headers, allow_redirects=False, timeout=30
        )
        followed = alpha.get(f"/v1/jobs/{completed}/result")  # a client that follows redirects
    finally:
        lambda_runtime.configure(environment_overrides=before)

    assert referred.status_code == 303, referred.text
    assert referred.headers["Location"] == referred.json()["url"] and referred.json()["bytes"] > 64
    assert followed.status_code == 200 and followed.json()["answer"]
    assert alpha.get(f"/v1/jobs/{completed}/result").status_code == 200  # inline again under the default limit
    assert beta.get(f"/v1/jobs/{completed}/result/download").status_code == 404
    bad = alpha.get(f"/v1/jobs/{completed}/result/download", format="pdf")
    assert bad.status_code == 422 and bad.json()["errors"]
