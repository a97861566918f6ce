"""On the local platform the front door runs the stack's Lambda authorizer with the cache TTL the template declares,
as API Gateway does: an unknown key never reaches the API function, public routes stay public, and a revoked key is
refused within the API function's key cache (`LOOKUP_CACHE_SECONDS`) though the front door still keeps the
authorizer's answer that allowed it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.operations import admin
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS


def _get(platform: LocalPlatform, path: str, key: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(platform.api_url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def test_the_authorizer_refuses_before_the_api_and_a_revoked_key_ends_within_the_bound(
    platform: LocalPlatform,
) -> None:
    assert platform._servers is not None and platform._servers.front_door is not None
    gateway = platform._servers.front_door.authorizer
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    key = admin.create_key(table, "revocation-tenant")

    health = _get(platform, "/v1/health")
    unknown = _get(platform, "/v1/jobs", "lh_unknown-key-0123456789")
    allowed = _get(platform, "/v1/jobs", key)
    admin.revoke_key(table, key=key)
    refused = wait_until(
        lambda: (lambda got: got if got[0] == 401 else None)(_get(platform, "/v1/jobs", key)),
        timeout=LOOKUP_CACHE_SECONDS + 5,
        interval=0.5,
        what="the revoked key refused",
    )

    assert gateway is not None and gateway.ttl_seconds == 300  # stacks/api.py's results_cache_ttl
    assert health[0] == 200
    assert unknown[0] == 401 and unknown[1]["type"] == "https://longhaul.dev/problems/unauthorized"
    assert allowed[0] == 200
    assert refused[1]["type"] == "https://longhaul.dev/problems/unauthorized"
    assert f"Bearer {key}" in gateway._answers  # the gateway's kept answer still allows it: the API refused
