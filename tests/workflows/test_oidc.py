"""Signing in with a JWT on the local platform, as a new user would: `longhaul local token` asks the front door's
issuer for a token, which goes where a key goes (front door → the stack's authorizer → the API). An expired or
wrongly signed token is a 401, a tenant's token on another tenant's job a 404, an operator's route a 403; a reviewer's
token outside the review's group finds nothing (404) and one inside decides it, the decision and the audit trail
naming its subject and group."""

from __future__ import annotations

import json
import time
from typing import Any

import requests
from typer.testing import CliRunner

from local.issuer import LocalIssuer
from local.platform import LocalPlatform
from longhaul_client.cli import app
from tests.workflows.conftest import Client
from tests.workflows.test_review_and_webhooks import status_of


class Bearer(Client):
    """A client app calling with a JWT instead of a key."""

    def __init__(self, platform: LocalPlatform, token: str) -> None:
        self.base = platform.api_url
        self.headers = {"Authorization": f"Bearer {token}"}


def cli_token(platform: LocalPlatform, *arguments: str) -> str:
    """`longhaul local token …` against the running platform: the token alone on stdout."""
    result = CliRunner().invoke(app, ["local", "token", "--url", str(platform.api_url), *arguments])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_a_jwt_of_the_local_issuer_works_where_a_key_works_and_a_bad_one_does_not(
    platform: LocalPlatform, beta: Client, sample_request: dict[str, Any]
) -> None:
    discovery = requests.get(f"{platform.api_url}/.well-known/openid-configuration", timeout=10).json()
    jwks = requests.get(discovery["jwks_uri"], timeout=10).json()
    token = cli_token(platform, "--tenant", "alpha", "--role", "tenant", "--ttl", "15m")
    alpha = Bearer(platform, token)
    forged = LocalIssuer(kid=jwks["keys"][0]["kid"])  # the issuer's key id, a key the platform never published
    forged.url = discovery["issuer"]
    wrongly_signed = Bearer(platform, forged.mint(tenant="alpha")["token"])

    job_id = alpha.submit(sample_request)
    own = alpha.get(f"/v1/jobs/{job_id}")
    assert platform.issuer is not None
    short = Bearer(platform, platform.issuer.mint(tenant="alpha", ttl_seconds=2)["token"])
    allowed_once = short.get("/v1/jobs")  # the front door keeps this answer for the template's cache TTL
    time.sleep(2.5)
    expired = short.get("/v1/jobs")  # though the kept answer says allowed: the API function reads its expiry
    others = Bearer(platform, cli_token(platform, "--tenant", "beta")).get(f"/v1/jobs/{job_id}")
    beta_key = beta.get(f"/v1/jobs/{job_id}")
    ops = alpha.get("/v1/ops/jobs")
    operator = Bearer(platform, cli_token(platform, "--tenant", "platform", "--role", "operator")).get("/v1/ops/jobs")
    bad_signature = wrongly_signed.get("/v1/jobs")

    assert discovery["issuer"] == platform.api_url and [k["kid"] for k in jwks["keys"]]
    assert "d" not in jwks["keys"][0]  # only the public part
    assert own.status_code == 200 and own.json()["job_id"] == job_id
    assert allowed_once.status_code == 200
    assert expired.status_code == 401 and expired.headers["Content-Type"] == "application/problem+json"
    assert bad_signature.status_code == 401
    assert bad_signature.json()["type"] == "https://longhaul.dev/problems/unauthorized"
    assert others.status_code == 404 and beta_key.status_code == 404
    assert ops.status_code == 403 and operator.status_code == 200


def test_a_reviewer_jwt_outside_the_reviews_group_finds_nothing_and_one_inside_decides_it(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    job_id = alpha.submit({**sample_request, "review": {"mode": "always", "deadline_seconds": 3600}})
    waiting = status_of(alpha, job_id, "waiting_for_review")
    review_id = waiting["review"]["review_id"]
    outsider = Bearer(platform, cli_token(platform, "--tenant", "alpha", "--role", "reviewer", "--groups", "leads"))
    member = Bearer(
        platform,
        cli_token(platform, "--tenant", "alpha", "--role", "reviewer", "--groups", "analysts,leads",
                  "--subject", "ana@alpha.example"),
    )  # fmt: skip

    listed_by_outsider = outsider.get("/v1/reviews", status="pending").json()["reviews"]
    seen_by_outsider = outsider.get(f"/v1/reviews/{review_id}")
    refused = outsider.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"})
    listed = member.get("/v1/reviews", status="pending").json()["reviews"]
    decided = member.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve", "comment": "signed in"})
    finished = alpha.wait(job_id)
    audit = alpha.get("/v1/audit").json()["entries"]

    assert review_id not in [r["review_id"] for r in listed_by_outsider]
    assert seen_by_outsider.status_code == 404 and refused.status_code == 404
    assert review_id in [r["review_id"] for r in listed]
    assert decided.status_code == 200, decided.text
    assert finished["status"] == "completed"
    decision = next(e for e in alpha.events(job_id) if e["type"] == "review_decided")
    assert "ana@alpha.example" in json.dumps(decision) and "analysts" in json.dumps(decision)
    decisions = [
        e for e in audit if e["action"] == "POST /v1/reviews/{review_id}/decision" and review_id in e["target"]
    ]
    by_outcome = {e["outcome"]: e["actor"] for e in decisions}
    assert by_outcome[200] == {"tenant_id": "alpha", "role": "reviewer", "key_id": "jwt:ana@alpha.example",
                               "subject": "ana@alpha.example"}  # fmt: skip
    assert by_outcome[404]["subject"] == "local-reviewer@alpha"  # the refused attempt is recorded too
