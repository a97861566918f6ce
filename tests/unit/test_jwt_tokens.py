"""JWTs beside API keys (`longhaul.adapters.tokens`): an RS256 token of the configured issuer maps to the tenant and
role in its claims; anything else is refused."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from longhaul.adapters.tokens import InvalidToken, JwtConfig, JwtVerifier, looks_like_jwt

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example"
CONFIG = JwtConfig(issuer=ISSUER, audience="client-1", tenant_claim="custom:tenant", role_claim="custom:role")
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwks(url: str) -> dict[str, Any]:
    assert url == f"{ISSUER}/.well-known/jwks.json"
    numbers = KEY.public_key().public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    return {"keys": [{"kty": "RSA", "kid": "k1", "e": _b64(numbers.e.to_bytes(3, "big")), "n": _b64(n)}]}


def token(claims: dict[str, Any], *, key: rsa.RSAPrivateKey = KEY, alg: str = "RS256", kid: str = "k1") -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": "client-1", "exp": now + 300, "sub": "user-1", **claims}
    signed = f"{_b64(json.dumps({'alg': alg, 'kid': kid}).encode())}.{_b64(json.dumps(body).encode())}"
    signature = key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signed}.{_b64(signature)}"


def test_a_token_of_the_issuer_maps_to_the_tenant_and_role_of_its_claims() -> None:
    verifier = JwtVerifier(CONFIG, fetch=_jwks)
    good = token({"custom:tenant": "acme", "custom:role": "reviewer"})
    assert looks_like_jwt(good) and not looks_like_jwt("lh_local_alpha_5f3a9c2e7b1d4068")
    principal = verifier.principal(good)
    assert (principal.tenant_id, principal.role) == ("acme", "reviewer")
    assert verifier.principal(token({"custom:tenant": "acme"})).role == "tenant"


@pytest.mark.parametrize(
    ("claims", "options"),
    [
        ({"custom:tenant": "acme"}, {"key": OTHER}),  # signed by another key
        ({"custom:tenant": "acme", "iss": "https://elsewhere.example"}, {}),
        ({"custom:tenant": "acme", "aud": "client-2"}, {}),
        ({"custom:tenant": "acme", "exp": int(time.time()) - 3600}, {}),
        ({"custom:role": "tenant"}, {}),  # no tenant
        ({"custom:tenant": "acme", "custom:role": "admin"}, {}),
        ({"custom:tenant": "acme"}, {"kid": "unknown"}),
        ({"custom:tenant": "acme"}, {"alg": "HS256"}),
    ],
)
def test_anything_else_is_refused(claims: dict[str, Any], options: dict[str, Any]) -> None:
    with pytest.raises(InvalidToken):
        JwtVerifier(CONFIG, fetch=_jwks).principal(token(claims, **options))
