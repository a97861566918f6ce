"""The local OIDC issuer (`local.issuer`) and `longhaul local token`'s own checks: what the issuer signs is what the
authorizer's verifier accepts (its JWKS served as the front door serves it), with the claim names the deployed
authorizer reads; a request it cannot honour is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from local.issuer import JWKS_PATH, LOCAL_AUDIENCE, LocalIssuer, TokenRequestError
from longhaul.adapters.tokens import InvalidToken, JwtVerifier, OidcConfig
from longhaul_client.cli import app
from longhaul_client.cli.local import ttl_seconds

URL = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def issuer() -> LocalIssuer:
    made = LocalIssuer()
    made.url = URL
    return made


def verifier(issuer: LocalIssuer, **claims: str) -> JwtVerifier:
    def served(url: str) -> dict[str, Any]:
        assert url == URL + JWKS_PATH
        return issuer.jwks()

    env = {**issuer.function_environment()}
    config = OidcConfig(
        issuer=env["LONGHAUL_OIDC_ISSUER"],
        audience=env["LONGHAUL_OIDC_AUDIENCE"],
        jwks_url=env["LONGHAUL_OIDC_JWKS_URL"],
        tenant_claim=claims.get("tenant", "custom:tenant"),
        role_claim=claims.get("role", "custom:role"),
        groups_claim=claims.get("groups", "cognito:groups"),
    )
    return JwtVerifier(config, fetch=served)


def test_a_local_token_is_what_the_authorizer_accepts(issuer: LocalIssuer) -> None:
    minted = issuer.mint(tenant="alpha", role="reviewer", groups=["analysts"], subject="ana@alpha.example")
    principal = verifier(issuer).principal(minted["token"])

    assert (principal.tenant_id, principal.role, principal.groups) == ("alpha", "reviewer", ["analysts"])
    assert principal.subject == "ana@alpha.example" and minted["audience"] == LOCAL_AUDIENCE
    assert issuer.discovery()["issuer"] == URL and issuer.discovery()["jwks_uri"] == URL + JWKS_PATH
    assert set(issuer.jwks()["keys"][0]) >= {"kty", "kid", "n", "e"} and "d" not in issuer.jwks()["keys"][0]


def test_the_issuer_writes_the_claim_names_the_deployed_authorizer_reads() -> None:
    named = LocalIssuer.for_environment(
        {"LONGHAUL_OIDC_TENANT_CLAIM": "tenant", "LONGHAUL_OIDC_GROUPS_CLAIM": "groups"}
    )
    named.url = URL
    token = named.mint(tenant="beta", role="reviewer", groups=["leads"])["token"]

    principal = verifier(named, tenant="tenant", groups="groups").principal(token)
    assert (principal.tenant_id, principal.groups) == ("beta", ["leads"])
    with pytest.raises(InvalidToken, match="no-tenant"):
        verifier(named).principal(token)  # an authorizer reading Cognito's claims finds no tenant


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"role": "tenant"}, "tenant"),
        ({"tenant": "alpha", "role": "admin"}, "role"),
        ({"tenant": "alpha", "ttl_seconds": 0}, "ttl_seconds"),
        ({"tenant": "alpha", "ttl_seconds": 86_401}, "ttl_seconds"),
        ({"tenant": "alpha", "groups": ["analysts"]}, "groups"),  # a tenant's token has no groups
        ({"tenant": "alpha", "role": "reviewer", "groups": "analysts"}, "groups"),
        ({"tenant": "alpha", "scope": "all"}, "scope"),
        ([], "JSON object"),
    ],
)
def test_a_token_request_it_cannot_honour_names_the_field(issuer: LocalIssuer, body: Any, field: str) -> None:
    with pytest.raises(TokenRequestError, match=field):
        issuer.mint_request(body)


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("30", 30)])
def test_a_ttl_is_a_span_people_write(text: str, seconds: int) -> None:
    assert ttl_seconds(text) == seconds


@pytest.mark.parametrize(
    "arguments",
    [
        ["--tenant", "alpha", "--groups", "analysts"],
        ["--tenant", "alpha", "--ttl", "0m"],
        ["--tenant", "alpha", "--ttl", "soon"],
    ],
)
def test_the_command_refuses_what_it_can_tell_is_wrong_before_asking(arguments: list[str]) -> None:
    result = CliRunner().invoke(app, ["local", "token", "--url", "http://127.0.0.1:9", *arguments])
    assert result.exit_code == 2


def test_the_command_says_when_no_platform_answers() -> None:
    result = CliRunner().invoke(app, ["local", "token", "--url", "http://127.0.0.1:9", "--tenant", "alpha"])
    assert result.exit_code == 2 and "make run" in result.stderr
