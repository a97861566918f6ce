"""The local platform's OIDC issuer: what a Cognito user pool (or a company's identity provider) is on AWS.

An RSA signing key is generated when the platform starts and kept with its in-memory state (a restart makes a new
one: tokens of an earlier run are refused, as everything else of it is gone). The front door serves the discovery
document and the public keys (`/.well-known/openid-configuration`, `/.well-known/jwks.json`) at the API's own origin,
which is the issuer (`iss`); the API's authorizer fetches the keys from there as it fetches Cognito's on AWS. A token
is minted for whoever asks (`POST /local/token`, what `longhaul local token` calls): this issuer signs anyone in, so
it is for a laptop only, as the printed API keys are. The claim names are those the deployed authorizer reads (the
`LONGHAUL_OIDC_*_CLAIM` settings; by default a Cognito ID token's `custom:tenant`, `custom:role`, `cognito:groups`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from local import lambda_runtime

lambda_runtime.ensure_code_root_on_path()
from longhaul.core.auth import Role  # noqa: E402
from longhaul.core.settings import Env, Settings  # noqa: E402

#: The audience (`aud`) of the local issuer's tokens: on AWS, the Cognito app client's id.
LOCAL_AUDIENCE = "longhaul-local"
ALGORITHM = "RS256"  # what Cognito signs with
#: The longest a local token may live (seconds), and its default.
MAX_TTL_SECONDS = 24 * 3600
DEFAULT_TTL_SECONDS = 15 * 60
JWKS_PATH = "/.well-known/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"
TOKEN_PATH = "/local/token"
_ROLES: tuple[str, ...] = ("tenant", "reviewer", "pii_reviewer", "operator")
_REVIEWER_ROLES = ("reviewer", "pii_reviewer")


class TokenRequestError(ValueError):
    """A token request the issuer refuses (its message says which field and why)."""


class LocalIssuer:
    def __init__(self, claim_names: Mapping[str, str] | None = None, *, kid: str | None = None) -> None:
        """`kid`: the key's id (default: its RFC 7638 thumbprint; a test names another issuer's to forge a token)."""
        from joserfc.jwk import RSAKey

        parameters: dict[str, Any] = {"use": "sig", "alg": ALGORITHM, **({"kid": kid} if kid else {})}
        self._key = RSAKey.generate_key(2048, parameters=parameters, auto_kid=kid is None)  # type: ignore[arg-type]
        self.url = ""  # the front door's origin, once it serves (`LocalPlatform`)
        self.audience = LOCAL_AUDIENCE
        names = dict(claim_names or {})
        self.tenant_claim = names.get("tenant") or str(Settings.model_fields["oidc_tenant_claim"].default)
        self.role_claim = names.get("role") or str(Settings.model_fields["oidc_role_claim"].default)
        self.groups_claim = names.get("groups") or str(Settings.model_fields["oidc_groups_claim"].default)

    @classmethod
    def for_environment(cls, environment: Mapping[str, str]) -> LocalIssuer:
        """An issuer whose tokens carry the claims a function of `environment` reads."""
        return cls(
            {
                "tenant": environment.get(Env.OIDC_TENANT_CLAIM, ""),
                "role": environment.get(Env.OIDC_ROLE_CLAIM, ""),
                "groups": environment.get(Env.OIDC_GROUPS_CLAIM, ""),
            }
        )

    @property
    def kid(self) -> str:
        return str(self._key.kid)

    def function_environment(self) -> dict[str, str]:
        """What the authorizer is told of this issuer (it replaces the template's Cognito user pool locally)."""
        return {
            Env.OIDC_ISSUER: self.url,
            Env.OIDC_AUDIENCE: self.audience,
            Env.OIDC_JWKS_URL: self.url + JWKS_PATH,
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self._key.as_dict(private=False)]}

    def discovery(self) -> dict[str, Any]:
        """The OpenID Provider metadata this issuer has (OpenID Connect Discovery 1.0, section 3)."""
        return {
            "issuer": self.url,
            "jwks_uri": self.url + JWKS_PATH,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "nbf", *self.claim_names()],
        }

    def claim_names(self) -> list[str]:
        return [self.tenant_claim, self.role_claim, self.groups_claim]

    def mint(
        self,
        *,
        tenant: str,
        role: str = "tenant",
        groups: Sequence[str] | None = None,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        subject: str | None = None,
        now: float | None = None,
        not_before: float | None = None,
    ) -> dict[str, Any]:
        """A signed token and what it says: `{"token", "subject", "expires_at", "issuer", "audience"}`.
        `now` and `not_before` are for tests (a token issued in the past, or valid only later)."""
        from joserfc import jwt

        if not self.url:
            raise RuntimeError("the issuer has no URL until the front door serves")
        if not tenant.strip():
            raise TokenRequestError("tenant: required")
        if role not in _ROLES:
            raise TokenRequestError(f"role: one of {', '.join(_ROLES)}, not {role!r}")
        if not 0 < ttl_seconds <= MAX_TTL_SECONDS:
            raise TokenRequestError(f"ttl_seconds: from 1 to {MAX_TTL_SECONDS}, not {ttl_seconds}")
        chosen: list[str] | None = [g.strip() for g in groups if g.strip()] if groups is not None else None
        if chosen is not None and role not in _REVIEWER_ROLES:
            raise TokenRequestError("groups: for a reviewer's token (role reviewer)")
        issued = int(time.time() if now is None else now)
        sub = subject or f"local-{role}@{tenant.strip()}"
        claims: dict[str, Any] = {
            "iss": self.url,
            "aud": self.audience,
            "sub": sub,
            "iat": issued,
            "nbf": int(not_before) if not_before is not None else issued,
            "exp": issued + ttl_seconds,
            "jti": uuid.uuid4().hex,
            "token_use": "id",
            self.tenant_claim: tenant.strip(),
            self.role_claim: role,
        }
        if chosen is not None:
            claims[self.groups_claim] = chosen
        token = jwt.encode({"alg": ALGORITHM, "kid": self.kid}, claims, self._key, algorithms=[ALGORITHM])
        return {
            "token": token,
            "subject": sub,
            "expires_at": claims["exp"],
            "issuer": self.url,
            "audience": self.audience,
        }

    def mint_request(self, body: Any) -> dict[str, Any]:
        """`POST /local/token`'s body (`{"tenant", "role"?, "groups"?, "ttl_seconds"?, "subject"?}`) → `mint`."""
        if not isinstance(body, dict):
            raise TokenRequestError("the body must be a JSON object")
        unknown = set(body) - {"tenant", "role", "groups", "ttl_seconds", "subject"}
        if unknown:
            raise TokenRequestError(f"{sorted(unknown)[0]}: not a field of a token request")
        groups = body.get("groups")
        if groups is not None and not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
            raise TokenRequestError("groups: a list of names")
        ttl = body.get("ttl_seconds", DEFAULT_TTL_SECONDS)
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            raise TokenRequestError("ttl_seconds: an integer")
        for field in ("tenant", "role", "subject"):
            if body.get(field) is not None and not isinstance(body[field], str):
                raise TokenRequestError(f"{field}: a string")
        role: Role | str = body.get("role") or "tenant"
        return self.mint(
            tenant=str(body.get("tenant") or ""),
            role=role,
            groups=groups,
            ttl_seconds=ttl,
            subject=body.get("subject") or None,
        )
