"""Operators' view of a tenant's memory: list it (episodes and facts, each with its provenance) and delete it, all of
it, a subject's, or one memory. Memory is per tenant: these name the tenant, and nothing else reaches it."""

from __future__ import annotations

from typing import Literal

from longhaul.core.contracts import MemoryDeleted, MemoryList
from longhaul.core.problems import BadRequest, InvalidRequest, NotFound
from longhaul.operations.policies import TENANT_ID
from longhaul.services import Services
from longhaul.storage.memory import BadMemoryCursor


def _tenant(tenant_id: str) -> str:
    if not TENANT_ID.match(tenant_id):
        raise InvalidRequest("tenant ids are 1-64 characters of A-Z a-z 0-9 . _ -")
    return tenant_id


def list_memory(
    services: Services,
    tenant_id: str,
    *,
    kind: Literal["episode", "fact"] | None,
    subject: str | None,
    limit: int,
    cursor: str | None,
) -> MemoryList:
    try:
        records, next_cursor = services.memory.page(
            _tenant(tenant_id), kind=kind, subject=subject, limit=limit, cursor=cursor
        )
    except BadMemoryCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by this listing") from None
    return MemoryList(tenant_id=tenant_id, memories=[r.view() for r in records], next_cursor=next_cursor)


def delete_memory(services: Services, tenant_id: str, *, subject: str | None) -> MemoryDeleted:
    return MemoryDeleted(tenant_id=tenant_id, deleted=services.memory.delete_all(_tenant(tenant_id), subject=subject))


def delete_one(services: Services, tenant_id: str, memory_id: str) -> MemoryDeleted:
    if not services.memory.delete(_tenant(tenant_id), memory_id):
        raise NotFound(f"tenant {tenant_id} has no memory {memory_id!r}")
    return MemoryDeleted(tenant_id=tenant_id, deleted=1)
