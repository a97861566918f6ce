"""API keys: stored hashed; a key maps to a tenant and a role (`tenant`, `reviewer` or `pii_reviewer` of that tenant,
`operator`).

Personal data (`longhaul.core.redaction`, a tenant's policy `redact`): a `reviewer` sees a review's draft and evidence
with placeholders where the policy says; a `pii_reviewer` (a reviewer in every other respect) sees them unredacted.
No operator sees them unredacted: the kept prompts and responses are kept redacted, and the operators' views of older
ones are redacted when read."""

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from longhaul.core.model import Model

Role = Literal["tenant", "operator", "reviewer", "pii_reviewer"]
#: The roles of the review routes (`/v1/reviews`); of them only `pii_reviewer` sees personal data unredacted.
REVIEWER_ROLES = frozenset({"reviewer", "pii_reviewer"})
ROLES: tuple[Role, ...] = ("tenant", "operator", "reviewer", "pii_reviewer")
# How a JWT's principal is named (`longhaul.adapters.tokens`: `jwt:<sub>`); an API key's `key_id` is a hash prefix.
JWT_KEY_PREFIX = "jwt:"


class Principal(Model):
    """Who calls: a tenant's key, a reviewer of that tenant, or an operator. `key_id` names the key in audit
    records (a prefix of its hash, never the key)."""

    tenant_id: str
    role: Role = "tenant"
    key_id: str | None = None
    # A reviewer's groups (the key's `groups`, a JWT's groups claim): it sees and decides the reviews assigned to one
    # of them. None: a reviewer of every group of its tenant (a key made without groups, as keys were before them).
    groups: list[str] | None = None
    # A JWT's: its subject (`sub`; audit records and review decisions name it) and its expiry (Unix seconds), after
    # which the API function refuses it whatever the gateway's cached answer says.
    subject: str | None = None
    expires_at: int | None = None

    @property
    def is_reviewer(self) -> bool:
        return self.role in REVIEWER_ROLES

    @property
    def sees_personal_data(self) -> bool:
        """Whether this principal's views of a review show the personal data the tenant's policy redacts."""
        return self.role == "pii_reviewer"

    def reviews_for(self, groups: Iterable[str]) -> str | None:
        """The group through which this reviewer may see and decide a review that `groups` may (the first of them
        it belongs to; the first of them for a reviewer of every group), or None when it may not."""
        ordered = list(groups)
        if self.groups is None:
            return ordered[0] if ordered else None
        return next((g for g in ordered if g in self.groups), None)


def key_hash(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def api_key_item(
    api_key: str, tenant_id: str, role: Role = "tenant", groups: Iterable[str] | None = None
) -> dict[str, Any]:
    """The table item for a key (only its hash is stored); `groups`: a reviewer's groups (absent: every group)."""
    item: dict[str, Any] = {
        "pk": f"APIKEY#{key_hash(api_key)}",
        "sk": "APIKEY",
        "tenant_id": tenant_id,
        "role": role,
        "created_at": datetime.now(UTC).isoformat(),
    }
    if groups is not None:
        item["groups"] = list(groups)
    return item


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
