"""Who did what: which requests the audit trail records, recording one, and reading the trail back.

The API function records generically (`handlers.api_audit`), so an operator route added later is recorded without a
line of its own (`longhaul.core.audit.audited` holds the rule): every request that changes something, made with an
operator's, administrator's or reviewer's credentials, and a tenant's own changes but its submissions, uploads and
signals (a job's own event log holds those, and they are the tenant's traffic, not its administration); and the reads
that disclose what a job or a tenant keeps. The action's name is its route: method and template. What the API does not
see (the `longhaul admin` commands, which write keys and secrets straight through the stores) records itself with
`record`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from longhaul.core.audit import AuditActor, AuditEntry, AuditPage, AuditVerification, digest
from longhaul.core.auth import Principal
from longhaul.core.clock import iso
from longhaul.core.problems import BadRequest, InvalidRequest
from longhaul.services import Services
from longhaul.storage.audit import Action, AuditFilter, BadAuditCursor


def actor_of(principal: Principal) -> AuditActor:
    return AuditActor(
        tenant_id=principal.tenant_id,
        role=principal.role,
        key_id=principal.key_id,
        subject=getattr(principal, "subject", None),  # a token's subject, where the caller signed in with one
    )


def target_tenant(services: Services, principal: Principal, arguments: dict[str, Any]) -> tuple[str | None, str | None]:
    """(tenant, job) whose resource a request acts on: named in its path, or found from its job or review; a
    tenant's or reviewer's own tenant otherwise; None for an operator's platform-wide action."""
    job_id = arguments.get("job_id")
    if arguments.get("tenant_id"):
        return str(arguments["tenant_id"]), job_id
    if principal.role != "operator":
        return principal.tenant_id, job_id
    if job_id:
        job = services.jobs.get_job(str(job_id))
        return (job.tenant_id if job else None), str(job_id)
    if arguments.get("review_id"):
        review = services.reviews.get(str(arguments["review_id"]))
        return (review.tenant_id, review.job_id) if review else (None, None)
    return None, None


def record(services: Services, action: Action) -> AuditEntry:
    """Append one action to the chain (one conditional DynamoDB write)."""
    return services.audit.append(action)


def command_action(
    actor: AuditActor, command: str, target: str, *, tenant_id: str | None, before: Any = None, after: Any = None
) -> Action:
    """An administrative command's action (0: it succeeded; a failed command changed nothing and is not recorded)."""
    return Action(
        actor=actor,
        action=f"admin {command}",
        target=target,
        outcome=0,
        tenant_id=tenant_id,
        before_digest=digest(before),
        after_digest=digest(after),
    )


def _instant(text: str | None, name: str) -> str | None:
    """An instant as the entries' `at` is written (so that the two compare as text); a date is its midnight, UTC."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRequest(
            f"{name} must be an ISO 8601 date or instant", errors=[{"loc": ["query", name], "msg": "not ISO 8601"}]
        ) from None
    return iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def page(services: Services, filters: AuditFilter, cursor: str | None, limit: int) -> AuditPage:
    filters = replace(filters, since=_instant(filters.since, "since"), until=_instant(filters.until, "until"))
    if filters.since and filters.until and filters.since >= filters.until:
        return AuditPage(entries=[])  # an empty window: nothing was recorded in it
    try:
        return services.audit.page(filters, cursor, limit)
    except BadAuditCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by the same listing") from None


def verify(services: Services) -> AuditVerification:
    return services.audit.verify()
