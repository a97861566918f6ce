"""API Gateway's Lambda authorizer: an unknown or missing key is refused before the API function runs.

API Gateway caches each key's answer (`stacks/api.py`: five minutes, keyed by the `Authorization` header), so a
flood with made-up keys costs authorizer invocations, never API function time, and a known key costs one lookup per
cache period. That cached answer is not what bounds a revocation: the API function looks a key up again through its
own key cache (`handlers.api._authenticate`, `LOOKUP_CACHE_SECONDS`), so a revoked key is refused within that time
whatever the gateway still keeps. A JWT of the configured OIDC issuer (`LONGHAUL_OIDC_ISSUER`: the stack's Cognito user
pool, an external issuer, or locally the front door's) is accepted too: its signature, issuer, audience, expiry and
not-before are checked and the tenant, the role and a reviewer's groups are its claims (`longhaul.adapters.tokens`);
its expiry travels in the context, so the API function refuses it once expired whatever the gateway still keeps. The
policy allows the whole stage, since one cached answer serves every route of the key; the API function still
authorizes the route (roles, tenancy). Locally the front door runs this function as API Gateway does, with the TTL the
template declares (`local.frontdoor.GatewayAuthorizer`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.adapters.tokens import InvalidToken, JwtVerifier, OidcConfig, looks_like_jwt
from longhaul.core.auth import Principal, bearer_token
from longhaul.core.observability import logger
from longhaul.services import services


class Unauthorized(Exception):
    """API Gateway answers 401 when an authorizer raises with exactly this message."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def stage_arn(method_arn: str) -> str:
    """`arn:aws:execute-api:region:account:api/stage/METHOD/path` → every method and path of that stage."""
    api, _, _rest = method_arn.partition("/")
    stage = _rest.split("/", 1)[0]
    return f"{api}/{stage}/*"


@lru_cache(maxsize=4)
def _verifier(config: OidcConfig) -> JwtVerifier:
    """One verifier (and its JWKS cache) per configuration, for the life of the execution environment."""
    return JwtVerifier(config)


def _principal(token: str) -> Principal | None:
    """An API key's principal, or (an OIDC issuer configured) a JWT's, from its claims."""
    s = services()
    config = OidcConfig.from_settings(s.settings)
    if config is not None and looks_like_jwt(token):
        try:
            return _verifier(config).principal(token)
        except InvalidToken as refused:
            logger.info("token refused", extra={"reason": refused.reason})
            return None
    return s.jobs.principal_for_key(token)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    token = bearer_token(headers.get("authorization"))
    principal = _principal(token) if token else None
    if principal is None:
        raise Unauthorized()
    logger.append_keys(tenant_id=principal.tenant_id)
    return {
        "principalId": f"{principal.tenant_id}/{principal.role}/{principal.key_id}",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": stage_arn(str(event["methodArn"]))}
            ],
        },
        "context": {
            "tenant_id": principal.tenant_id,
            "role": principal.role,
            "key_id": principal.key_id or "",
            # context values are strings: a JWT's groups joined by commas (absent: every group; see `Principal`)
            **({"groups": ",".join(principal.groups)} if principal.groups is not None else {}),
            **({"subject": principal.subject} if principal.subject else {}),
            **({"expires_at": str(principal.expires_at)} if principal.expires_at is not None else {}),
        },
    }


init_complete()
