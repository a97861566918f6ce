"""Identity in the template: by default a Cognito user pool and its app client, whose ID tokens the API's authorizer
trusts (issuer and audience in its settings) and whose client may write no custom attribute (nobody changes their own
tenant or role); with `-c longhaul:oidc_issuer=…` no user pool at all, and the authorizer trusts that issuer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks.identity import IdentityConfigError
from tests.infrastructure.conftest import resources, synthesize

EXTERNAL = "https://login.example.com/realms/longhaul"


def authorizer_environment(template: dict[str, Any]) -> dict[str, Any]:
    (function,) = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "handlers.authorizer.handler"
    ]
    return dict(function["Properties"]["Environment"]["Variables"])


def test_by_default_the_authorizer_trusts_the_stacks_own_user_pool(template: dict[str, Any]) -> None:
    (pool_id, pool), *others = resources(template, "AWS::Cognito::UserPool").items()
    (client_id, client), *more = resources(template, "AWS::Cognito::UserPoolClient").items()
    env = authorizer_environment(template)

    assert not others and not more
    assert pool["Properties"]["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["Properties"]["MfaConfiguration"] == "ON"
    custom = {a["Name"]: a for a in pool["Properties"]["Schema"]}
    assert custom["tenant"]["Mutable"] is False and custom["role"]["Mutable"] is True
    assert client["Properties"]["UserPoolId"] == {"Ref": pool_id}
    assert not any(a.startswith("custom:") for a in client["Properties"]["WriteAttributes"])
    assert {"custom:tenant", "custom:role"} <= set(client["Properties"]["ReadAttributes"])
    assert "GenerateSecret" not in client["Properties"] or client["Properties"]["GenerateSecret"] is False
    assert {"Ref": pool_id} in env["LONGHAUL_OIDC_ISSUER"]["Fn::Join"][1]
    assert env["LONGHAUL_OIDC_AUDIENCE"] == {"Ref": client_id}
    assert "LONGHAUL_OIDC_TENANT_CLAIM" not in env  # the settings' defaults are the pool's ID token's claims
    assert {"OidcIssuer", "OidcAudience", "UserPoolId"} <= set(template["Outputs"])


def test_with_an_external_issuer_no_user_pool_is_made_and_the_authorizer_trusts_it(tmp_path: Path) -> None:
    context = {
        "longhaul:oidc_issuer": EXTERNAL,
        "longhaul:oidc_audience": "longhaul-api",
        "longhaul:oidc_groups_claim": "groups",
    }
    assembly = synthesize(tmp_path, context)
    template = json.loads(next(assembly.glob("Longhaul-*.template.json")).read_text())
    env = authorizer_environment(template)

    assert resources(template, "AWS::Cognito::UserPool") == {}
    assert resources(template, "AWS::Cognito::UserPoolClient") == {}
    assert env["LONGHAUL_OIDC_ISSUER"] == EXTERNAL and env["LONGHAUL_OIDC_AUDIENCE"] == "longhaul-api"
    assert env["LONGHAUL_OIDC_GROUPS_CLAIM"] == "groups"
    assert template["Outputs"]["OidcIssuer"]["Value"] == EXTERNAL and "UserPoolId" not in template["Outputs"]


@pytest.mark.parametrize(
    ("issuer", "audience", "message"),
    [("http://login.example.com", "a", "https"), (EXTERNAL, None, "longhaul:oidc_audience")],
)
def test_an_issuer_that_is_not_https_or_has_no_audience_fails_synthesis(
    issuer: str, audience: str | None, message: str
) -> None:
    from aws_cdk import App, RemovalPolicy, Stack

    from stacks.identity import Identity

    with pytest.raises(IdentityConfigError, match=message):
        Identity(Stack(App(), "S"), "Identity", removal_policy=RemovalPolicy.DESTROY, issuer=issuer, audience=audience)
