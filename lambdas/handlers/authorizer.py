"""API Gateway's Lambda authorizer: an unknown or missing key is refused before the API function runs.

API Gateway caches each key's answer (`stacks/api.py`: five minutes, keyed by the `Authorization` header), so a
flood with made-up keys costs authorizer invocations, never API function time, and a known key costs one lookup per
cache period. That cached answer is not what bounds a revocation: the API function looks a key up again through its
own key cache (`handlers.api._authenticate`, `LOOKUP_CACHE_SECONDS`), so a revoked key is refused within that time
whatever the gateway still keeps. With `longhaul:jwt` configured, a JWT of that issuer is accepted too: the tenant and
the role are its claims (`longhaul.adapters.tokens`). The policy allows the whole stage, since one cached answer
serves every route of the key; the API function still authorizes the route (roles, tenancy). Locally the front door
runs this function as API Gateway does, with the TTL the template declares (`local.frontdoor.GatewayAuthorizer`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers import init_complete
from longhaul.adapters.tokens import InvalidToken, JwtConfig, JwtVerifier, looks_like_jwt
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
def _verifier(config: str) -> JwtVerifier:
    return JwtVerifier(JwtConfig.model_validate_json(config))


def _principal(token: str) -> Principal | None:
    """An API key's principal, or (with `longhaul:jwt` configured) a JWT's, from its claims."""
    s = services()
    if s.settings.jwt and looks_like_jwt(token):
        try:
            return _verifier(json.dumps(s.settings.jwt, sort_keys=True)).principal(token)
        except InvalidToken as refused:
            logger.info("token refused", extra={"reason": str(refused)})
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
        },
    }


init_complete()
