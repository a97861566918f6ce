"""JWTs of an OIDC issuer (the stack's Cognito user pool, an external issuer, or the local platform's own), checked by
the API's Lambda authorizer beside API keys.

Configured by the `LONGHAUL_OIDC_*` settings (`OidcConfig.from_settings`). A token is accepted when its signature
(RS256 or ES256, never `none` or a shared secret) verifies under a key of the issuer's JWKS, `iss` is the issuer, `aud`
names the audience, `exp` (required) is in the future, and `nbf` and `iat` are not later than `LEEWAY_SECONDS` from
now (the issuer's clock may be a little ahead; an expiry gets no such grace). The JOSE work is joserfc's (a
maintained implementation of RFC 7515-7519, pinned in `lambdas/requirements.txt`); what is ours is the JWKS cache and
the claims' mapping. The JWKS is fetched once, kept `JWKS_SECONDS`, and fetched again for a `kid` it does not hold (an
issuer's key rotation), at most once per `REFETCH_SECONDS` so a flood of made-up `kid`s does not become a flood of
fetches. The tenant, the role (`tenant` when absent) and a reviewer's groups are the claims the settings name.
"""

import ipaddress
import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, get_args

from longhaul.core.auth import JWT_KEY_PREFIX, Principal, Role
from longhaul.core.settings import Settings

ALGORITHMS = ("RS256", "ES256")
#: Clock skew allowed on `nbf` and `iat` (seconds); `exp` is strict: a token is refused from its expiry on.
LEEWAY_SECONDS = 30
#: How long a fetched JWKS is kept before it is fetched again.
JWKS_SECONDS = 3600
#: An unknown `kid` fetches the JWKS again at most this often.
REFETCH_SECONDS = 30
#: The longest subject kept in a principal's `key_id` (`jwt:<sub>`) and audit records.
MAX_SUBJECT = 128


class OidcConfig(NamedTuple):
    issuer: str
    audience: str
    jwks_url: str
    tenant_claim: str
    role_claim: str
    groups_claim: str

    @classmethod
    def from_settings(cls, settings: Settings) -> "OidcConfig | None":
        """The configured issuer, or None when the API takes API keys only."""
        if not settings.oidc_issuer:
            return None
        return cls(
            issuer=settings.oidc_issuer,
            audience=settings.oidc_audience,
            jwks_url=settings.oidc_jwks_url or settings.oidc_issuer.rstrip("/") + "/.well-known/jwks.json",
            tenant_claim=settings.oidc_tenant_claim,
            role_claim=settings.oidc_role_claim,
            groups_claim=settings.oidc_groups_claim,
        )


class InvalidToken(Exception):
    """The token is not one this API accepts; `reason` says why (logged, never shown to the caller: the answer is one
    401 whatever the reason)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def expires_later(exp: float, now: float) -> bool:
    """Whether a token expiring at `exp` still holds at `now` (no grace: RFC 7519's "on or after" is expired)."""
    return now < exp


def looks_like_jwt(token: str) -> bool:
    """A compact JWS (three base64url parts, a JSON header): what an API key never is."""
    return token.count(".") == 2 and token.startswith("ey")


def fetch_jwks(url: str) -> dict[str, Any]:
    """The JWKS document at `url`: over https, or plain http to a loopback address (the local platform's issuer)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "https" and not (parsed.scheme == "http" and _loopback(parsed.hostname or "")):
        raise InvalidToken("jwks-unreachable", f"the JWKS URL must be https: {url}")
    # a loopback address is asked directly, never through a proxy the environment names
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({})) if parsed.scheme == "http" else None
    with (opener.open if opener else urllib.request.urlopen)(url, timeout=5) as response:
        document = json.loads(response.read())
    if not isinstance(document, dict):
        raise InvalidToken("jwks-unreachable", "the JWKS is not a JSON object")
    return document


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class JwtVerifier:
    """Checks tokens of one issuer; thread-safe, one per configuration (its JWKS cache lives as long as it does)."""

    def __init__(
        self,
        config: OidcConfig,
        *,
        fetch: Callable[[str], Mapping[str, Any]] = fetch_jwks,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config, self._fetch, self._clock = config, fetch, clock
        self._keys: Any = None  # joserfc KeySet
        self._fetched_at = float("-inf")
        self._lock = threading.Lock()

    def principal(self, token: str) -> Principal:
        """The caller a valid token names; `InvalidToken` otherwise."""
        from joserfc import jwt
        from joserfc.errors import BadSignatureError, ExpiredTokenError, InvalidClaimError, JoseError, MissingClaimError

        now = int(self._clock())
        try:
            decoded = jwt.decode(token, self._resolve, algorithms=list(ALGORITHMS))
        except BadSignatureError:
            raise InvalidToken("bad-signature") from None
        except InvalidToken:
            raise
        except (JoseError, ValueError, TypeError, KeyError) as malformed:
            raise InvalidToken("malformed", f"{type(malformed).__name__}: {malformed}") from None
        claims = decoded.claims
        registry = jwt.JWTClaimsRegistry(
            now=now,
            leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": self.config.issuer},
            aud={"essential": True, "value": self.config.audience},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise InvalidToken("expired") from None
        except (InvalidClaimError, MissingClaimError) as wrong:
            claim = getattr(wrong, "claim", "")
            if claim == "nbf":
                raise InvalidToken("not-yet-valid") from None
            if claim == "iat":
                raise InvalidToken("issued-in-the-future") from None
            raise InvalidToken(f"wrong-{claim or 'claim'}", str(wrong)) from None
        if not expires_later(claims["exp"], now):
            raise InvalidToken("expired")
        return self._principal(claims)

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        c = self.config
        tenant = claims.get(c.tenant_claim)
        if not isinstance(tenant, str) or not tenant.strip():
            raise InvalidToken("no-tenant", f"no {c.tenant_claim!r} claim")
        role = claims.get(c.role_claim) or "tenant"
        if role not in get_args(Role):
            raise InvalidToken("unknown-role", f"{c.role_claim!r} is {role!r}, not one of {get_args(Role)}")
        groups = claims.get(c.groups_claim)
        if isinstance(groups, str):
            groups = groups.replace(",", " ").split()
        subject = str(claims.get("sub") or "")[:MAX_SUBJECT]
        if not subject:
            raise InvalidToken("no-subject")
        return Principal(
            tenant_id=tenant.strip(),
            role=role,
            key_id=f"{JWT_KEY_PREFIX}{subject}",
            subject=subject,
            groups=[str(g) for g in groups] if isinstance(groups, list) else None,
            expires_at=int(claims["exp"]),
        )

    def _resolve(self, guest: Any) -> Any:
        """The issuer's key for the token's header (joserfc calls this before it checks the signature)."""
        header = guest.headers()
        kid = header.get("kid")
        keys = self._key_set(str(kid) if kid else None)
        if kid is None:
            candidates = [k for k in keys.keys if k.get("use") in (None, "sig")]
            if len(candidates) != 1:
                raise InvalidToken("unknown-key", "a token without `kid` from an issuer of several keys")
            return candidates[0]
        return keys.get_by_kid(str(kid))

    def _key_set(self, kid: str | None) -> Any:
        with self._lock:
            now = time.monotonic()
            held = self._keys is not None and (kid is None or _holds(self._keys, kid))
            stale = now - self._fetched_at > JWKS_SECONDS
            may_refetch = now - self._fetched_at > REFETCH_SECONDS
            if stale or (not held and may_refetch):
                self._load()
            if self._keys is None or (kid is not None and not _holds(self._keys, kid)):
                raise InvalidToken("unknown-key", f"no key {kid!r} in the issuer's JWKS")
            return self._keys

    def _load(self) -> None:
        from joserfc.jwk import KeySet

        try:
            document = self._fetch(self.config.jwks_url)
        except InvalidToken:
            raise
        except Exception as unreachable:  # the issuer is down: refuse (401) now, try again on a later token
            raise InvalidToken("jwks-unreachable", f"{type(unreachable).__name__}: {unreachable}") from None
        usable = [k for k in document.get("keys", []) if isinstance(k, dict) and k.get("kty") in ("RSA", "EC")]
        self._keys = KeySet.import_key_set({"keys": usable})
        self._fetched_at = time.monotonic()


def _holds(keys: Any, kid: str) -> bool:
    return any(k.kid == kid for k in keys.keys)
