"""The local runtime's seeded credentials: API keys (tenants, reviewers of a tenant, operators) and each tenant's
webhook signing secret. Printed by `python -m local`, never valid anywhere but here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from local import lambda_runtime

#: The local API keys: `"alpha=key1,ops=key3:operator,alpha-reviewer=key4:reviewer@alpha"` (the role defaults to
#: `tenant`, the tenant to the name); default: `alpha`, `beta`, `ops`, `alpha-reviewer`, `beta-reviewer`.
KEYS_ENV = "LONGHAUL_LOCAL_KEYS"
#: Each tenant's webhook signing secret, `"alpha=whsec_…,beta=whsec_…"`, seeded into the in-memory Secrets Manager
#: (default: one for `alpha` and `beta`, printed in the banner).
WEBHOOK_SECRETS_ENV = "LONGHAUL_LOCAL_WEBHOOK_SECRETS"
#: name -> "key", "key:role" or "key:role@tenant" (the name is the tenant unless given); printed by
#: `python -m local`, never valid anywhere but here.
DEFAULT_KEYS: dict[str, str] = {
    "alpha": "lh_local_alpha_5f3a9c2e7b1d4068",
    "beta": "lh_local_beta_8e1b6d0c4a2f9357",
    "ops": "lh_local_ops_2c7e9a41b8d05f63:operator",
    "alpha-reviewer": "lh_local_alpha_reviewer_7c1e5a9d3b0f8264:reviewer@alpha",
    "beta-reviewer": "lh_local_beta_reviewer_4e8a2c6f0d1b9357:reviewer@beta",
}
#: tenant -> its webhook signing secret (Standard Webhooks `whsec_`), seeded into the in-memory Secrets Manager.
DEFAULT_WEBHOOK_SECRETS: dict[str, str] = {
    "alpha": "whsec_bG9jYWwtYWxwaGEtd2ViaG9vay1zZWNyZXQtMDE=",
    "beta": "whsec_bG9jYWwtYmV0YS13ZWJob29rLXNlY3JldC0wMg==",
}
Role = Literal["tenant", "operator", "reviewer", "pii_reviewer"]
ROLES: tuple[Role, ...] = get_args(Role)


@dataclass(frozen=True)
class ApiKey:
    tenant: str
    key: str
    role: Role = "tenant"
    name: str = ""  # how `key_for`/`auth_header` find it (the tenant's name unless given)

    @property
    def label(self) -> str:
        return self.name or self.tenant


def parse_keys(spec: str | Mapping[str, str]) -> list[ApiKey]:
    """`"alpha=key1,ops=key3:operator,alpha-reviewer=key4:reviewer@alpha"` (or the same as a mapping) -> keys.

    The name before `=` is the key's tenant unless `@tenant` follows the role (a reviewer belongs to a tenant)."""
    pairs = spec.items() if isinstance(spec, Mapping) else (p.split("=", 1) for p in spec.split(",") if p.strip())
    keys = []
    for name, value in pairs:
        key, _, rest = value.strip().partition(":")
        role, _, tenant = rest.partition("@")
        matched = [r for r in ROLES if r == (role or "tenant")]
        if not matched:
            raise ValueError(f"unknown role {role!r} for {name!r}; expected one of {ROLES}")
        keys.append(ApiKey(tenant.strip() or name.strip(), key, matched[0], name.strip()))
    return keys


def parse_webhook_secrets(spec: str | Mapping[str, str]) -> dict[str, str]:
    """`"alpha=whsec_…,beta=whsec_…"` -> {tenant: secret}."""
    pairs = spec.items() if isinstance(spec, Mapping) else (p.split("=", 1) for p in spec.split(",") if p.strip())
    secrets = {tenant.strip(): secret.strip() for tenant, secret in pairs}
    for tenant, secret in secrets.items():
        if not secret.startswith("whsec_"):
            raise ValueError(f"the webhook secret of {tenant!r} must start with whsec_")
    return secrets


def seed_api_keys(table: Any, keys: list[ApiKey]) -> None:
    """Store each key, hashed (`longhaul.core.auth.api_key_item`), in the boto3 `Table` resource `table`; the tenant
    of a tenant's or reviewer's key exists from then on (`longhaul.storage.tenants`)."""
    lambda_runtime.ensure_code_root_on_path()
    from longhaul.core.auth import api_key_item
    from longhaul.storage.tenants import TenantStore

    for api_key in keys:
        if api_key.role != "operator":
            TenantStore(table).register(api_key.tenant)
        table.put_item(Item=api_key_item(api_key.key, api_key.tenant, api_key.role))
