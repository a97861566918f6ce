"""JWTs beside API keys (`longhaul.adapters.tokens`): a token of the configured issuer, signed with a key of its JWKS,
maps to the tenant, role and groups its claims name; each way a token can be wrong is refused with its own reason.
The tokens are signed here (joserfc), the JWKS served by a fake fetch (no network)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey

from longhaul.adapters.tokens import (
    REFETCH_SECONDS,
    InvalidToken,
    JwtVerifier,
    OidcConfig,
    fetch_jwks,
    looks_like_jwt,
)
from longhaul.core.settings import Settings

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"
CLAIMS = {"tenant": "custom:tenant", "role": "custom:role", "groups": "cognito:groups"}
CONFIG = OidcConfig(
    issuer=ISSUER,
    audience="client-1",
    jwks_url=f"{ISSUER}/.well-known/jwks.json",
    tenant_claim="custom:tenant",
    role_claim="custom:role",
    groups_claim="cognito:groups",
)
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
EC_KEY = ECKey.generate_key("P-256", parameters={"kid": "k2", "alg": "ES256"})
OTHER = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"})  # same kid, not the issuer's key
ROTATED = RSAKey.generate_key(2048, parameters={"kid": "k3", "alg": "RS256"})


class Issuer:
    """The issuer's JWKS endpoint: the keys it publishes now, and how often it was asked."""

    def __init__(self, *keys: Any) -> None:
        self.keys = list(keys)
        self.fetches = 0

    def __call__(self, url: str) -> dict[str, Any]:
        assert url == CONFIG.jwks_url
        self.fetches += 1
        return {"keys": [k.as_dict(private=False) for k in self.keys]}


def _jwks(url: str) -> dict[str, Any]:
    """The issuer's JWKS (`KEY` and `EC_KEY`), for other tests' verifiers."""
    return Issuer(KEY, EC_KEY)(url)


def token(claims: dict[str, Any], *, key: Any = KEY, alg: str | None = None, kid: str | None = "k1") -> str:
    """A token of `ISSUER` for `client-1`, valid for five minutes, with `claims` over those."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": "client-1", "exp": now + 300, "iat": now, "sub": "user-1", **claims}
    body = {k: v for k, v in body.items() if v is not None}
    algorithm = alg or ("ES256" if isinstance(key, ECKey) else "HS256" if isinstance(key, OctKey) else "RS256")
    header = {"alg": algorithm, **({"kid": kid} if kid else {})}
    return jwt.encode(header, body, key, algorithms=[algorithm])


def unsigned(claims: dict[str, Any]) -> str:
    """`alg: none`: no signature at all."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    body = {"iss": ISSUER, "aud": "client-1", "exp": now + 300, "sub": "user-1", **claims}
    return f"{part({'alg': 'none', 'kid': 'k1'})}.{part(body)}."


def verifier(issuer: Issuer | None = None, **options: Any) -> JwtVerifier:
    return JwtVerifier(CONFIG, fetch=issuer or Issuer(KEY, EC_KEY), **options)


def test_a_token_of_the_issuer_maps_to_the_tenant_role_and_groups_of_its_claims() -> None:
    good = token({"custom:tenant": "acme", "custom:role": "reviewer", "cognito:groups": ["analysts", "leads"]})
    principal = verifier().principal(good)

    assert looks_like_jwt(good) and not looks_like_jwt("lh_local_alpha_5f3a9c2e7b1d4068")
    assert (principal.tenant_id, principal.role, principal.groups) == ("acme", "reviewer", ["analysts", "leads"])
    assert principal.subject == "user-1" and principal.key_id == "jwt:user-1"
    assert principal.expires_at is not None and principal.expires_at > time.time()


def test_an_es256_token_a_role_left_out_and_groups_as_text_are_understood() -> None:
    principal = verifier().principal(
        token({"custom:tenant": "acme", "cognito:groups": "analysts, leads"}, key=EC_KEY, kid="k2")
    )
    assert principal.role == "tenant" and principal.groups == ["analysts", "leads"]
    assert verifier().principal(token({"custom:tenant": "acme"})).groups is None  # every group of its tenant


@pytest.mark.parametrize(
    ("reason", "made"),
    [
        ("expired", lambda: token({"custom:tenant": "acme", "exp": int(time.time()) - 1})),
        ("expired", lambda: token({"custom:tenant": "acme", "exp": int(time.time())})),  # "on or after" exp
        ("not-yet-valid", lambda: token({"custom:tenant": "acme", "nbf": int(time.time()) + 120})),
        ("issued-in-the-future", lambda: token({"custom:tenant": "acme", "iat": int(time.time()) + 120})),
        ("bad-signature", lambda: token({"custom:tenant": "acme"}, key=OTHER)),
        ("wrong-iss", lambda: token({"custom:tenant": "acme", "iss": "https://elsewhere.example"})),
        ("wrong-aud", lambda: token({"custom:tenant": "acme", "aud": "client-2"})),
        ("wrong-aud", lambda: token({"custom:tenant": "acme", "aud": None})),
        ("wrong-exp", lambda: token({"custom:tenant": "acme", "exp": None})),
        ("no-tenant", lambda: token({"custom:role": "tenant"})),
        ("unknown-role", lambda: token({"custom:tenant": "acme", "custom:role": "admin"})),
        ("no-subject", lambda: token({"custom:tenant": "acme", "sub": None})),
        ("unknown-key", lambda: token({"custom:tenant": "acme"}, key=ROTATED, kid="k3")),
        ("malformed", lambda: token({"custom:tenant": "acme"}, key=OctKey.generate_key(256), kid="k1")),  # HS256
        ("malformed", lambda: unsigned({"custom:tenant": "acme"})),
        ("bad-signature", lambda: token({"custom:tenant": "acme"}).split(".")[0] + ".dGFtcGVyZWQ.x"),  # tampered
    ],
)
def test_each_kind_of_wrong_token_is_refused_with_its_reason(reason: str, made: Any) -> None:
    with pytest.raises(InvalidToken) as refused:
        verifier().principal(made())
    assert refused.value.reason == reason


def test_a_token_of_a_rotated_key_fetches_the_jwks_again_and_made_up_kids_do_not_flood_the_issuer() -> None:
    issuer = Issuer(KEY)
    checker = verifier(issuer)
    checker.principal(token({"custom:tenant": "acme"}))
    checker.principal(token({"custom:tenant": "acme"}))
    assert issuer.fetches == 1  # kept

    issuer.keys.append(ROTATED)
    checker._fetched_at -= REFETCH_SECONDS + 1  # the last fetch is older than the refetch pause
    rotated = checker.principal(token({"custom:tenant": "acme"}, key=ROTATED, kid="k3"))
    for _ in range(5):
        with pytest.raises(InvalidToken, match="unknown-key"):
            checker.principal(token({"custom:tenant": "acme"}, key=ROTATED, kid="made-up"))

    assert rotated.tenant_id == "acme"
    assert issuer.fetches == 2  # the rotation's, and none for the made-up kids within the pause


def test_an_unreachable_issuer_is_a_refusal_not_a_failure() -> None:
    def down(url: str) -> dict[str, Any]:
        raise OSError("connection refused")

    with pytest.raises(InvalidToken) as refused:
        JwtVerifier(CONFIG, fetch=down).principal(token({"custom:tenant": "acme"}))
    assert refused.value.reason == "jwks-unreachable"


@pytest.mark.parametrize("url", ["http://issuer.example/.well-known/jwks.json", "file:///etc/passwd"])
def test_the_jwks_is_fetched_over_https_only_but_from_a_loopback_address(url: str) -> None:
    with pytest.raises(InvalidToken, match="must be https"):
        fetch_jwks(url)


def test_the_configuration_comes_from_the_settings_with_cognitos_claims_by_default() -> None:
    base = {"LONGHAUL_TABLE": "t", "LONGHAUL_BUCKET": "b"}
    assert OidcConfig.from_settings(Settings.model_validate(base)) is None  # API keys only
    config = OidcConfig.from_settings(
        Settings.model_validate({**base, "LONGHAUL_OIDC_ISSUER": ISSUER + "/", "LONGHAUL_OIDC_AUDIENCE": "client-1"})
    )
    custom = OidcConfig.from_settings(
        Settings.model_validate(
            {**base, "LONGHAUL_OIDC_ISSUER": ISSUER, "LONGHAUL_OIDC_GROUPS_CLAIM": "groups",
             "LONGHAUL_OIDC_JWKS_URL": "https://keys.example/jwks"}
        )
    )  # fmt: skip
    assert config is not None and config.jwks_url == f"{ISSUER}/.well-known/jwks.json"
    assert (config.tenant_claim, config.role_claim, config.groups_claim) == tuple(CLAIMS.values())
    assert custom is not None and custom.groups_claim == "groups" and custom.jwks_url == "https://keys.example/jwks"
