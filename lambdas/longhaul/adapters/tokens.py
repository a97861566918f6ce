"""JWTs from an OIDC issuer (Cognito or any other), checked by the API's Lambda authorizer beside API keys.

Configured from `cdk.json` context `longhaul:jwt` (`{"issuer", "audience", "jwks_url"?, "tenant_claim"?,
"role_claim"?}`, passed to the authorizer as `LONGHAUL_JWT`). A token is accepted when its RS256 signature verifies
under a key of the issuer's JWKS (fetched over HTTPS, kept for an hour, fetched again for an unknown `kid`), `iss` is
the issuer, `aud` (or Cognito's `client_id`) the audience, and `exp`/`nbf` hold; the tenant and the role are its
claims (role `tenant` when absent), and a reviewer's groups the `groups_claim` (Cognito's `cognito:groups` by default;
every group of the tenant when absent). Hand-written on `cryptography` (already a dependency) rather than PyJWT: it is
one algorithm and four claims, and one library fewer in the asset.
"""

import base64
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, get_args

from pydantic import Field

from longhaul.core.auth import Principal, Role
from longhaul.core.model import Model

JWKS_SECONDS = 3600
LEEWAY_SECONDS = 60


class JwtConfig(Model):
    issuer: str
    audience: str
    jwks_url: str | None = None
    tenant_claim: str = "tenant"
    role_claim: str = "role"
    groups_claim: str = "cognito:groups"  # a reviewer's groups: a list, or names separated by commas or spaces
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def keys_url(self) -> str:
        return self.jwks_url or self.issuer.rstrip("/") + "/.well-known/jwks.json"


class InvalidToken(Exception):
    """The token is not one this API accepts (its message says why; never shown to the caller)."""


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("ey")


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _fetch(url: str) -> dict[str, Any]:
    if not url.startswith("https://"):
        raise InvalidToken("the JWKS URL must be https")
    with urllib.request.urlopen(url, timeout=5) as response:
        return dict(json.loads(response.read()))


class JwtVerifier:
    def __init__(self, config: JwtConfig, *, fetch: Callable[[str], Mapping[str, Any]] = _fetch) -> None:
        self.config, self._fetch = config, fetch
        self._keys: dict[str, Any] = {}
        self._fetched_at = 0.0
        self._lock = threading.Lock()

    def principal(self, token: str, *, now: float | None = None) -> Principal:
        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header, claims = json.loads(_b64(header_b64)), json.loads(_b64(payload_b64))
        except ValueError as error:
            raise InvalidToken(f"malformed token: {error}") from None
        if header.get("alg") != "RS256":
            raise InvalidToken(f"algorithm {header.get('alg')!r} is not accepted")
        self._verify(str(header.get("kid", "")), f"{header_b64}.{payload_b64}".encode(), _b64(signature_b64))
        self._check_claims(claims, time.time() if now is None else now)
        tenant = claims.get(self.config.tenant_claim)
        role = claims.get(self.config.role_claim) or "tenant"
        if not isinstance(tenant, str) or not tenant:
            raise InvalidToken(f"no {self.config.tenant_claim!r} claim")
        if role not in get_args(Role):
            raise InvalidToken(f"role {role!r} is not one of {get_args(Role)}")
        groups = claims.get(self.config.groups_claim)
        if isinstance(groups, str):
            groups = groups.replace(",", " ").split()
        return Principal(
            tenant_id=tenant,
            role=role,
            key_id=f"jwt:{str(claims.get('sub', ''))[:24]}",
            groups=[str(g) for g in groups] if isinstance(groups, list) else None,
        )

    def _check_claims(self, claims: Mapping[str, Any], now: float) -> None:
        if claims.get("iss") != self.config.issuer:
            raise InvalidToken("issuer mismatch")
        audience = claims.get("aud", claims.get("client_id"))
        audiences = audience if isinstance(audience, list) else [audience]
        if self.config.audience not in audiences:
            raise InvalidToken("audience mismatch")
        if not isinstance(claims.get("exp"), (int, float)) or now > float(claims["exp"]) + LEEWAY_SECONDS:
            raise InvalidToken("expired")
        if isinstance(claims.get("nbf"), (int, float)) and now + LEEWAY_SECONDS < float(claims["nbf"]):
            raise InvalidToken("not valid yet")

    def _verify(self, kid: str, signed: bytes, signature: bytes) -> None:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        key = self._key(kid)
        try:
            key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise InvalidToken("bad signature") from None

    def _key(self, kid: str) -> Any:
        with self._lock:
            stale = time.monotonic() - self._fetched_at > JWKS_SECONDS
            if kid not in self._keys or stale:
                self._load()
            if kid not in self._keys:
                raise InvalidToken(f"unknown key id {kid!r}")
            return self._keys[kid]

    def _load(self) -> None:
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicNumbers

        keys = {}
        for jwk in self._fetch(self.config.keys_url).get("keys", []):
            if jwk.get("kty") == "RSA" and jwk.get("kid"):
                numbers = RSAPublicNumbers(int.from_bytes(_b64(jwk["e"]), "big"), int.from_bytes(_b64(jwk["n"]), "big"))
                keys[str(jwk["kid"])] = numbers.public_key()
        self._keys, self._fetched_at = keys, time.monotonic()
