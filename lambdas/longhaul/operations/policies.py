"""Tenant policies as operators read and set them: budgets, rates, in-flight limits, weights, SLA classes."""

from __future__ import annotations

import re

from longhaul.core.budgets import TenantPolicy, to_micro, usd
from longhaul.core.contracts import (
    DayUsageView,
    TenantPolicyView,
)
from longhaul.core.problems import InvalidRequest
from longhaul.services import Services

TENANT_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def tenant_policy(services: Services, tenant_id: str) -> TenantPolicyView:
    """A tenant's budget policy (stored, or the defaults) and what it has spent today."""
    if not TENANT_ID.match(tenant_id):
        raise InvalidRequest("tenant ids are 1-64 characters of A-Z a-z 0-9 . _ -")
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
    """Replace a tenant's policy; running jobs keep the limits they were admitted with, new reservations see the
    new daily allowance."""
    if not TENANT_ID.match(tenant_id):
        raise InvalidRequest("tenant ids are 1-64 characters of A-Z a-z 0-9 . _ -")
    unknown = sorted(set(policy.routes or ()) - set(services.routing.routes))
    if unknown:
        raise InvalidRequest(f"unknown routes {unknown}", allowed_routes=sorted(services.routing.routes))
    services.budgets.put_policy(tenant_id, policy)
    return tenant_policy(services, tenant_id)
