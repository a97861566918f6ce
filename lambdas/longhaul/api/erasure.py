"""The API's erasures: a tenant's `DELETE /v1/jobs/{job_id}`, an operator's `DELETE /v1/ops/tenants/{tenant_id}/data`.

A job still running is cancelled first, as `POST /v1/jobs/{job_id}/cancel` would (its execution stopped, its review
closed, its compensation started); then `longhaul.operations.erasure` erases it store by store.
"""

from __future__ import annotations

from collections.abc import Callable

from longhaul.api.jobs import JobService
from longhaul.core.auth import Principal
from longhaul.core.erasure import ErasureAccepted, StoreReport
from longhaul.core.problems import NotFound
from longhaul.core.records import JOB_ID
from longhaul.operations.erasure import erase_job, erase_tenant
from longhaul.services import Services


def _canceller(services: Services, principal: Principal) -> Callable[[str], None]:
    def cancel(job_id: str) -> None:
        JobService(services).cancel(principal, job_id, any_tenant=True, reason="erased")

    return cancel


def erase_own_job(services: Services, principal: Principal, job_id: str) -> ErasureAccepted:
    """The tenant's job erased (or its erasure gone on with: the same answer again once it is done); 404 for a job
    that is not the tenant's."""
    done = (
        erase_job(
            services,
            job_id,
            reason="requested",
            by=principal,
            tenant_id=principal.tenant_id,
            cancel=_canceller(services, principal),
        )
        if JOB_ID.match(job_id)
        else None
    )
    if done is None:
        raise NotFound(f"no job {job_id!r}")
    return done


def erase_tenant_data(services: Services, principal: Principal, tenant_id: str) -> list[StoreReport]:
    """Every job of the tenant erased, and its memory and uploads: what each store deleted."""
    return erase_tenant(services, tenant_id, by=principal, cancel=_canceller(services, principal)).report
