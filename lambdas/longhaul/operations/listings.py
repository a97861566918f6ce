"""What operators list: dead letters (by job or all) and every tenant's jobs, newest first, paged."""

from __future__ import annotations

from longhaul.core.contracts import (
    DeadLetter,
    JobList,
    JobStatus,
)
from longhaul.core.problems import BadRequest
from longhaul.services import Services
from longhaul.storage.listing import BadCursor, JobFilter


def list_dead_letters(
    services: Services, *, step: str | None, workflow: str | None, tenant: str | None, limit: int
) -> list[DeadLetter]:
    return services.dead_letters.find(step=step, workflow=workflow, tenant=tenant, limit=limit)


def list_jobs(
    services: Services,
    *,
    tenant: str | None,
    status: JobStatus | None,
    limit: int,
    cursor: str | None = None,
    narrow: JobFilter | None = None,
) -> JobList:
    """Every tenant's jobs for operators, newest first and paged; optionally one tenant's (by creation), or those
    in a status (by latest update), or both; narrowed by `narrow`."""
    try:
        jobs, next_cursor = services.jobs.page_jobs(
            tenant_id=tenant, status=status, limit=limit, cursor=cursor, narrow=narrow
        )
    except BadCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by the same listing") from None
    return JobList(jobs=[j.view() for j in jobs], next_cursor=next_cursor)
