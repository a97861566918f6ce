"""The API's Lambda authorizer (`handlers.authorizer`) and the API function's trust of its answer, driven with API
Gateway's event shapes: a REQUEST authorizer event, then a REST proxy event carrying `requestContext.authorizer` as
API Gateway passes it (the authorizer's `context` and its `principalId`).

API Gateway keeps an authorizer's answer for a key up to the stack's cache TTL (`stacks/api.py`); the bound on a
revocation is the API function's own key cache (`LOOKUP_CACHE_SECONDS`), which the cached context cannot bypass.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from handlers import api, authorizer
from longhaul.adapters.tokens import JwtVerifier
from longhaul.core.settings import function_environment
from longhaul.operations import admin
from longhaul.services import services
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS
from tests.unit import test_jwt_tokens as jwt
from tests.unit.conftest import FakeClock, LambdaContext, rest_event

METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/GET/v1/jobs"


def authorizer_event(authorization: str | None, method_arn: str = METHOD_ARN) -> dict[str, Any]:
    """A REQUEST authorizer's event as API Gateway sends it (identity source: the Authorization header)."""
    headers = {"Host": "api.example.test"} | ({"Authorization": authorization} if authorization else {})
    proxy = rest_event("GET", "/v1/jobs", headers=headers)
    return {"type": "REQUEST", "methodArn": method_arn, **proxy}


def proxy_event(key: str, answer: dict[str, Any]) -> dict[str, Any]:
    """A proxy event for GET /v1/jobs with the authorizer's answer in `requestContext.authorizer`, as API Gateway
    passes it: the `context` entries and the `principalId` (served from its cache as long as the TTL holds)."""
    event = rest_event("GET", "/v1/jobs", headers={"Authorization": f"Bearer {key}"})
    event["requestContext"]["authorizer"] = {**answer["context"], "principalId": answer["principalId"]}
    return event


@pytest.fixture
def env(settings_env: dict[str, str]) -> Iterator[FakeClock]:
    """The functions' environment, the key cache of its services on a fake clock (both handlers share it here; on
    AWS each function has its own, which only makes the authorizer's answer older)."""
    clock = FakeClock()
    with function_environment(settings_env):
        services().jobs._keys.clock = clock
        yield clock


def authorize(event: dict[str, Any]) -> dict[str, Any]:
    return authorizer.handler(event, LambdaContext(function_name="longhaul-authorizer"))


def test_a_known_key_is_allowed_on_the_whole_stage_with_its_tenant_and_role(table: Any, env: FakeClock) -> None:
    key = admin.create_key(table, "acme", "reviewer")

    answer = authorize(authorizer_event(f"Bearer {key}"))

    (statement,) = answer["policyDocument"]["Statement"]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        "Resource": "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/*",
    }
    assert answer["context"]["tenant_id"] == "acme" and answer["context"]["role"] == "reviewer"
    assert answer["principalId"] == f"acme/reviewer/{answer['context']['key_id']}"
    assert all(isinstance(v, str) for v in answer["context"].values())  # API Gateway takes strings, numbers, booleans


@pytest.mark.parametrize("authorization", [None, "Bearer", "Basic dXNlcjpwYXNz", "Bearer lh_unknown-key-0123456789"])
def test_a_missing_malformed_or_unknown_key_is_unauthorized(table: Any, env: FakeClock, authorization: str) -> None:
    with pytest.raises(authorizer.Unauthorized, match=r"^Unauthorized$"):
        authorize(authorizer_event(authorization))


def test_a_revoked_key_is_unauthorized_once_the_authorizers_own_lookup_expires(table: Any, env: FakeClock) -> None:
    key = admin.create_key(table, "acme")
    authorize(authorizer_event(f"Bearer {key}"))

    admin.revoke_key(table, key=key)
    env.advance(timedelta(seconds=LOOKUP_CACHE_SECONDS + 0.1))

    with pytest.raises(authorizer.Unauthorized):
        authorize(authorizer_event(f"Bearer {key}"))


def test_a_revoked_key_is_refused_within_the_bound_though_the_gateways_cached_answer_still_allows(
    table: Any, env: FakeClock
) -> None:
    key = admin.create_key(table, "acme")
    answer = authorize(authorizer_event(f"Bearer {key}"))
    before = api.handler(proxy_event(key, answer), LambdaContext())

    admin.revoke_key(table, key=key)
    env.advance(timedelta(seconds=LOOKUP_CACHE_SECONDS - 0.5))
    within = api.handler(proxy_event(key, answer), LambdaContext())  # the API function's kept lookup
    env.advance(timedelta(seconds=1))
    after = api.handler(proxy_event(key, answer), LambdaContext())  # the gateway's cache would still say allowed

    assert before["statusCode"] == 200 and within["statusCode"] == 200
    assert after["statusCode"] == 401
    assert json.loads(after["body"])["type"] == "https://longhaul.dev/problems/unauthorized"


def test_a_forged_or_stale_context_does_not_stand_for_another_key(table: Any, env: FakeClock) -> None:
    """The API function answers for the key it is given, whatever context travels with it."""
    acme = admin.create_key(table, "acme")
    answer = authorize(authorizer_event(f"Bearer {acme}"))
    other = admin.create_key(table, "globex")
    forged = {**answer, "context": {**answer["context"], "tenant_id": "globex", "role": "operator"}}

    listed = api.handler(proxy_event(acme, forged), LambdaContext())
    unknown = api.handler(proxy_event("lh_unknown-key-0123456789", answer), LambdaContext())
    own = api.handler(proxy_event(other, answer), LambdaContext())

    assert listed["statusCode"] == 200  # acme's own jobs: the forged tenant and role are not taken
    assert unknown["statusCode"] == 401
    assert own["statusCode"] == 200


@pytest.fixture
def with_jwt(monkeypatch: pytest.MonkeyPatch, settings_env: dict[str, str]) -> Iterator[None]:
    """An OIDC issuer configured (`LONGHAUL_OIDC_*`); its keys from `test_jwt_tokens` (no network)."""
    monkeypatch.setattr(authorizer, "_verifier", lambda config: JwtVerifier(config, fetch=jwt._jwks))
    oidc = {"LONGHAUL_OIDC_ISSUER": jwt.ISSUER, "LONGHAUL_OIDC_AUDIENCE": "client-1"}
    with function_environment({**settings_env, **oidc}):
        yield


def test_a_jwt_of_the_issuer_is_allowed_and_the_api_takes_its_principal(table: Any, with_jwt: None) -> None:
    token = jwt.token({"custom:tenant": "acme", "custom:role": "tenant", "sub": "ana@acme.example"})

    answer = authorize(authorizer_event(f"Bearer {token}"))
    listed = api.handler(proxy_event(token, answer), LambdaContext())
    principal = api._authenticate(proxy_event(token, answer))

    assert answer["context"]["tenant_id"] == "acme" and answer["context"]["key_id"] == "jwt:ana@acme.example"
    assert all(isinstance(v, str) for v in answer["context"].values())
    assert listed["statusCode"] == 200
    assert principal is not None and principal.subject == "ana@acme.example"


@pytest.mark.parametrize(
    "claims, key",
    [
        ({"custom:tenant": "acme", "exp": 1}, jwt.KEY),  # expired
        ({"custom:tenant": "acme", "nbf": 4_000_000_000}, jwt.KEY),  # not valid yet
        ({"custom:tenant": "acme", "aud": "another-client"}, jwt.KEY),
        ({"custom:tenant": "acme", "iss": "https://elsewhere.example"}, jwt.KEY),
        ({"custom:tenant": "acme"}, jwt.OTHER),  # signed by another key
        ({"custom:role": "tenant"}, jwt.KEY),  # no tenant
    ],
)
def test_an_expired_foreign_or_wrongly_signed_jwt_is_unauthorized(
    table: Any, with_jwt: None, claims: dict[str, Any], key: Any
) -> None:
    with pytest.raises(authorizer.Unauthorized):
        authorize(authorizer_event(f"Bearer {jwt.token(claims, key=key)}"))


def test_without_an_issuer_a_jwt_is_looked_up_as_a_key_and_refused(table: Any, env: FakeClock) -> None:
    with pytest.raises(authorizer.Unauthorized):
        authorize(authorizer_event(f"Bearer {jwt.token({'custom:tenant': 'acme'})}"))


def test_a_jwt_context_does_not_authenticate_a_key(table: Any, with_jwt: None) -> None:
    """A JWT's principal is taken from the context only for a JWT: a key under a JWT's context is looked up."""
    token = jwt.token({"custom:tenant": "acme"})
    answer = authorize(authorizer_event(f"Bearer {token}"))

    refused = api.handler(proxy_event("lh_unknown-key-0123456789", answer), LambdaContext())

    assert refused["statusCode"] == 401


def test_a_jwt_the_gateway_still_keeps_is_refused_by_the_api_once_it_expires(table: Any, with_jwt: None) -> None:
    """API Gateway keeps the authorizer's answer for the cache TTL, which may outlive the token: the API function
    reads its expiry from the context and refuses it from then on; a JWT without the authorizer's context is refused."""
    token = jwt.token({"custom:tenant": "acme", "exp": int(time.time()) + 2})
    answer = authorize(authorizer_event(f"Bearer {token}"))
    before = api.handler(proxy_event(token, answer), LambdaContext())

    time.sleep(2.1)
    after = api.handler(proxy_event(token, answer), LambdaContext())
    stripped = api.handler(proxy_event(token, {"context": {}, "principalId": ""}), LambdaContext())

    assert before["statusCode"] == 200
    assert after["statusCode"] == 401 and json.loads(after["body"])["type"].endswith("/unauthorized")
    assert stripped["statusCode"] == 401


def test_a_jwts_groups_claim_reaches_the_api_as_the_reviewers_groups(table: Any, with_jwt: None) -> None:
    token = jwt.token({"custom:tenant": "acme", "custom:role": "reviewer", "cognito:groups": ["analysts", "leads"]})
    without = jwt.token({"custom:tenant": "acme", "custom:role": "reviewer"})

    answer = authorize(authorizer_event(f"Bearer {token}"))
    bare = authorize(authorizer_event(f"Bearer {without}"))

    assert answer["context"]["groups"] == "analysts,leads" and "groups" not in bare["context"]
    assert api._authenticate(proxy_event(token, answer)).groups == ["analysts", "leads"]  # type: ignore[union-attr]
    assert api._authenticate(proxy_event(without, bare)).groups is None  # type: ignore[union-attr]
