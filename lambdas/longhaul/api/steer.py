"""Steering a job through the API: pause and resume, and signals (tenant and operator routes), checked against the
job's status machine (`longhaul.engine.pause`, `longhaul.engine.signals`)."""

from __future__ import annotations

from typing import Any

from longhaul.api.jobs import JobService
from longhaul.core.auth import Principal
from longhaul.core.contracts import SignalAccepted, SteerOutcome
from longhaul.core.problems import InvalidRequest, JobStatusConflict, NotFound, SignalConflict
from longhaul.engine import pause, signals
from longhaul.services import Services


class SteerService:
    def __init__(self, services: Services) -> None:
        self.services = services
        self._jobs = JobService(services)

    def _who(self, principal: Principal) -> str:
        return principal.tenant_id if principal.role != "operator" else f"operator:{principal.tenant_id}"

    def pause(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> SteerOutcome:
        job = self._jobs.job(principal, job_id, any_tenant=any_tenant)
        try:
            return pause.request_pause(self.services, job, requested_by=self._who(principal))
        except pause.NotPausable as refused:
            raise JobStatusConflict(str(refused), job_status=refused.job.status.value) from None

    def resume(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> SteerOutcome:
        job = self._jobs.job(principal, job_id, any_tenant=any_tenant)
        stops = self.services.budgets.policy(job.tenant_id).pause_stops_deadline
        try:
            return pause.resume(self.services, job, requested_by=self._who(principal), stops_deadline=stops)
        except pause.NotPausable as refused:
            raise JobStatusConflict(str(refused), job_status=refused.job.status.value) from None

    def signal(
        self, principal: Principal, job_id: str, name: str, body: Any, *, any_tenant: bool = False
    ) -> SignalAccepted:
        """Send signal `name` to the job: 404 for a name its workflow has no signal step of, 422 for a body its
        step's model refuses, 409 when it cannot be taken (kept already, its wait over, the job finished)."""
        job = self._jobs.job(principal, job_id, any_tenant=any_tenant)
        try:
            return signals.send(self.services, job, name, body, requested_by=self._who(principal))
        except signals.UnknownSignal as unknown:
            raise NotFound(str(unknown)) from None
        except signals.InvalidSignal as invalid:
            raise InvalidRequest(str(invalid), errors=invalid.errors) from None
        except signals.SignalRefused as refused:
            raise SignalConflict(str(refused), **refused.extra) from None
