"""The API function keeps API keys and tenant policies for `LOOKUP_CACHE_SECONDS` (`storage/cache.py`): a revoked
key and a policy changed elsewhere take effect within that time, on the stores' own (injected) clock; a key unknown
a moment ago works at once; a policy written through the store applies at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from longhaul.core.budgets import TenantPolicy
from longhaul.core.schema import tenant_policy_key
from longhaul.operations import admin
from longhaul.storage.budgets import BudgetStore
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS
from longhaul.storage.jobs import JobStore
from tests.unit.conftest import FakeClock

JUST_BEFORE = timedelta(seconds=LOOKUP_CACHE_SECONDS - 0.5)
JUST_AFTER = timedelta(seconds=1)


def test_a_revoked_key_stops_authenticating_once_its_cached_lookup_expires(table: Any, clock: FakeClock) -> None:
    store = JobStore(table, clock=clock)
    key = admin.create_key(table, "acme")
    assert store.principal_for_key(key) is not None

    admin.revoke_key(table, key=key)
    clock.current += JUST_BEFORE
    still = store.principal_for_key(key)
    clock.current += JUST_AFTER
    gone = store.principal_for_key(key)

    assert still is not None and still.tenant_id == "acme"  # within the stated time: the kept answer
    assert gone is None


def test_an_unknown_key_is_not_kept_a_key_created_after_it_was_tried_works_at_once(
    table: Any, clock: FakeClock
) -> None:
    store = JobStore(table, clock=clock)
    assert store.principal_for_key("lh_not_yet_created_0000000000000") is None

    key = admin.create_key(table, "acme")

    assert store.principal_for_key(key) is not None


def test_a_policy_changed_elsewhere_applies_once_its_cached_read_expires(table: Any, clock: FakeClock) -> None:
    api = BudgetStore(table, clock=clock)
    operator = BudgetStore(table, clock=clock)  # another function (or the admin command) writes the policy
    operator.put_policy("acme", TenantPolicy(submissions_per_minute=30))
    assert api.recent_policy("acme").submissions_per_minute == 30

    operator.put_policy("acme", TenantPolicy(submissions_per_minute=5))
    clock.current += JUST_BEFORE
    kept = api.recent_policy("acme")
    clock.current += JUST_AFTER
    changed = api.recent_policy("acme")

    assert kept.submissions_per_minute == 30
    assert changed.submissions_per_minute == 5


def test_a_policy_written_through_the_store_applies_there_at_once(table: Any, clock: FakeClock) -> None:
    budgets = BudgetStore(table, clock=clock)
    budgets.put_policy("acme", TenantPolicy(jobs_in_flight=4))
    assert budgets.recent_policy("acme").jobs_in_flight == 4

    budgets.put_policy("acme", TenantPolicy(jobs_in_flight=1))

    assert budgets.recent_policy("acme").jobs_in_flight == 1


def test_a_deleted_policy_falls_back_to_the_defaults_within_the_stated_time(table: Any, clock: FakeClock) -> None:
    budgets = BudgetStore(table, clock=clock)
    budgets.put_policy("acme", TenantPolicy(jobs_in_flight=7))
    assert budgets.recent_policy("acme").jobs_in_flight == 7

    table.delete_item(Key=tenant_policy_key("acme"))
    clock.current += timedelta(seconds=LOOKUP_CACHE_SECONDS)

    assert budgets.recent_policy("acme") == budgets.policy("acme") == TenantPolicy()
