"""Which tenants exist. A tenant comes to exist when a key is made for it (`register`, by `longhaul admin create-key`
and the local platform's seeded keys) or when an operator stores its policy; a tenant that has submitted jobs exists
too (its admission and spending are items of its partition, its jobs are listed under it)."""

from __future__ import annotations

from typing import Any

from longhaul.core import schema
from longhaul.core.clock import Clock, SystemClock, iso


class TenantStore:
    def __init__(self, table: Any, *, clock: Clock | None = None) -> None:
        self.table = table
        self.clock = clock or SystemClock()

    def register(self, tenant_id: str) -> None:
        """Record the tenant (idempotent: a second key for it keeps the first record's time)."""
        self.table.update_item(
            Key=schema.tenant_key(tenant_id),
            UpdateExpression="SET tenant_id = :tenant, created_at = if_not_exists(created_at, :now)",
            ExpressionAttributeValues={":tenant": tenant_id, ":now": iso(self.clock.now())},
        )

    def exists(self, tenant_id: str) -> bool:
        """Whether the platform holds anything of the tenant: its record, policy, spending or admission, or a job."""
        partition = schema.tenant_partition(tenant_id)
        own = self.table.query(
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": schema.PK},
            ExpressionAttributeValues={":pk": partition},
            ProjectionExpression="#pk",
            Limit=1,
            ConsistentRead=True,
        )
        if own.get("Items"):
            return True
        jobs = self.table.query(
            IndexName=schema.BY_TENANT,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": schema.GSI1_PK},
            ExpressionAttributeValues={":pk": partition},
            Limit=1,
        )
        return bool(jobs.get("Items"))
