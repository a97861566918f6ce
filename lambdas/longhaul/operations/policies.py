"""Tenant policies as operators read and set them: budgets, rates, in-flight limits, weights, SLA classes."""

from __future__ import annotations

import re

from pydantic import ValidationError

from longhaul.core.budgets import TenantPolicy, TenantPolicyPatch, reset_fields, to_micro, usd
from longhaul.core.contracts import (
    DayUsageView,
    TenantPolicyView,
)
from longhaul.core.problems import InvalidRequest, NotFound, Unavailable
from longhaul.services import Services
from longhaul.storage.budgets import PolicyChanged, StoredPolicy

TENANT_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
PATCH_ATTEMPTS = 5  # conditional writes tried before a 503 (another operator changing the same policy at once)


def known_tenant(services: Services, tenant_id: str) -> str:
    """`tenant_id` as an operator's route names it: a 422 when it is not a tenant id, a 404 for a tenant that does
    not exist (no key was made for it, no policy stored, no job submitted: `longhaul.storage.tenants`)."""
    _tenant_id(tenant_id)
    if not services.tenants.exists(tenant_id):
        raise NotFound(f"no tenant {tenant_id!r}")
    return tenant_id


def _tenant_id(tenant_id: str) -> str:
    if not TENANT_ID.match(tenant_id):
        raise InvalidRequest("tenant ids are 1-64 characters of A-Z a-z 0-9 . _ -")
    return tenant_id


def tenant_policy(services: Services, tenant_id: str) -> TenantPolicyView:
    """A tenant's budget policy (stored, or the defaults) and what it has spent today; 404 for an unknown tenant."""
    return _policy_view(services, known_tenant(services, tenant_id))


def _policy_view(services: Services, tenant_id: str) -> TenantPolicyView:
    budgets = services.budgets
    policy = budgets.policy(tenant_id)
    day = budgets.day()
    used = budgets.day_usage(tenant_id, day)
    daily_cost = to_micro(policy.daily_cost_usd)
    return TenantPolicyView(
        tenant_id=tenant_id,
        policy=policy,
        source="stored" if budgets.has_policy(tenant_id) else "default",
        today=DayUsageView(
            day=day,
            tokens=used.tokens,
            cost_usd=usd(used.cost_micro),
            remaining_tokens=max(policy.daily_tokens - used.tokens, 0),
            remaining_cost_usd=usd(max(daily_cost - used.cost_micro, 0)),
        ),
    )


def set_tenant_policy(services: Services, tenant_id: str, policy: TenantPolicy) -> TenantPolicyView:
    """Replace a tenant's policy (PUT: a field the body omits takes its default); running jobs keep the limits they
    were admitted with, new reservations see the new daily allowance. The view says what the policy was and which
    omitted fields went back to their defaults. A tenant that does not exist yet does from then on: an operator may
    set a tenant's limits before its first key is made."""
    _check(services, tenant_id, policy)
    before = services.budgets.stored_policy(tenant_id)
    services.budgets.put_policy(tenant_id, policy)
    omitted = [name for name in TenantPolicy.model_fields if name not in policy.model_fields_set]
    return _changed(services, tenant_id, before, reset_fields(before.policy, policy, omitted))


def patch_tenant_policy(services: Services, tenant_id: str, patch: TenantPolicyPatch) -> TenantPolicyView:
    """Change some fields of a tenant's policy (PATCH): the others are kept; a field given as null goes back to its
    default. Conditional on the policy read, so two operators' changes never undo each other. A tenant that does not
    exist is a 404 (a mistyped id creates nothing; PUT sets a new tenant's policy)."""
    known_tenant(services, tenant_id)
    for _ in range(PATCH_ATTEMPTS):
        before = services.budgets.stored_policy(tenant_id)
        try:
            after = patch.applied_to(before.policy)
        except ValidationError as invalid:
            raise InvalidRequest(
                "the changed policy is not valid",
                errors=[
                    {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                    for e in invalid.errors(include_url=False, include_input=False)
                ],
            ) from None
        _check(services, tenant_id, after)
        try:
            services.budgets.put_policy(tenant_id, after, replacing=before)
        except PolicyChanged:
            continue
        return _changed(services, tenant_id, before, reset_fields(before.policy, after, patch.nulled()))
    raise Unavailable("the policy kept changing while it was being patched; patch it again")


def _check(services: Services, tenant_id: str, policy: TenantPolicy) -> None:
    _tenant_id(tenant_id)
    unknown = sorted(set(policy.routes or ()) - set(services.routing.routes))
    if unknown:
        raise InvalidRequest(f"unknown routes {unknown}", allowed_routes=sorted(services.routing.routes))


def _changed(services: Services, tenant_id: str, before: StoredPolicy, reset: list[str]) -> TenantPolicyView:
    view = _policy_view(services, tenant_id)
    return view.model_copy(update={"previous": before.policy, "reset": reset})
