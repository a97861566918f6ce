"""Operators' view of a tenant's memory: list it (episodes and facts, each with its provenance) and delete it, all of
it, a subject's, or one memory. Memory is per tenant: these name the tenant, and nothing else reaches it; a tenant
that does not exist is a 404."""

from __future__ import annotations

from typing import Literal

from longhaul.core.contracts import MemoryDeleted, MemoryList
from longhaul.core.problems import BadRequest, NotFound
from longhaul.operations.policies import known_tenant
from longhaul.services import Services
from longhaul.storage.memory import BadMemoryCursor


def list_memory(
    services: Services,
    tenant_id: str,
    *,
    kind: Literal["episode", "fact"] | None,
    subject: str | None,
    limit: int,
    cursor: str | None,
) -> MemoryList:
    known_tenant(services, tenant_id)
    try:
        records, next_cursor = services.memory.page(tenant_id, kind=kind, subject=subject, limit=limit, cursor=cursor)
    except BadMemoryCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by this listing") from None
    return MemoryList(tenant_id=tenant_id, memories=[r.view() for r in records], next_cursor=next_cursor)


def delete_memory(services: Services, tenant_id: str, *, subject: str | None) -> MemoryDeleted:
    known_tenant(services, tenant_id)
    return MemoryDeleted(tenant_id=tenant_id, deleted=services.memory.delete_all(tenant_id, subject=subject))


def delete_one(services: Services, tenant_id: str, memory_id: str) -> MemoryDeleted:
    if not services.memory.delete(known_tenant(services, tenant_id), memory_id):
        raise NotFound(f"tenant {tenant_id} has no memory {memory_id!r}")
    return MemoryDeleted(tenant_id=tenant_id, deleted=1)
