"""The audit trail in the API function: the middleware that records every audited request (whatever its route, so a
route added later is recorded too), and the two listings: an operator's `GET /v1/ops/audit`, a tenant's `GET /v1/audit`
(the actions on its own resources, operators' included).

The middleware runs inside routing, where the matched route's template is known; it records the answer's status,
also when the route raised a problem (a refused action is an action), and never changes the answer: a failure to
record is logged and the caller gets the route's answer (the action already happened).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query

from handlers.api_shared import ADMIN, BAD_CURSOR, INVALID_PARAMETERS, Cursor, keyed, principal
from longhaul.core import correlation, limits
from longhaul.core.audit import AuditPage, audited, digest
from longhaul.core.auth import Principal
from longhaul.core.contracts import IsoTime
from longhaul.core.observability import logger
from longhaul.core.problems import ApiProblem, Forbidden
from longhaul.services import services

router = Router()

AUDIT_LIMIT = Annotated[int, Query(ge=1, le=limits.MAX_OPS_PAGE_SIZE)]
Instant = Annotated[
    IsoTime | None,
    Query(description="An instant (ISO 8601, e.g. `2026-12-07` or `2026-12-07T16:00:00Z`; UTC unless it says)."),
]
ActionFilter = Annotated[
    str | None, Query(max_length=256, description="An action exactly: `POST /v1/ops/jobs/{job_id}/replay`.")
]
ActorFilter = Annotated[
    str | None,
    Query(max_length=256, description="The actor's `actor_id`: a token's subject, a key's id, or role:tenant."),
]


def middleware(app: Any, next_middleware: Callable[[Any], Response[Any]]) -> Response[Any]:
    """Record the request if it is audited (`longhaul.core.audit.audited`), with the status it was answered."""
    route = app.context.get("_route")
    caller = app.context.get("principal")
    if route is None or not isinstance(caller, Principal):
        return next_middleware(app)
    action = f"{route.method} {route.openapi_path}"
    if not audited(caller.role, action):
        return next_middleware(app)
    arguments = dict(app.context.get("_route_args") or {})
    before = _before(caller, action, arguments)
    try:
        response = next_middleware(app)
    except ApiProblem as problem:
        _record(app, caller, action, arguments, problem.status, before, None)
        raise
    except RequestValidationError:
        _record(app, caller, action, arguments, 422, before, None)
        raise
    except Exception:
        _record(app, caller, action, arguments, 500, before, None)
        raise
    _record(app, caller, action, arguments, response.status_code, before, response.body)
    return response


def _before(caller: Principal, action: str, arguments: dict[str, Any]) -> str | None:
    """The digest of what a change replaces, where the route's resource can be read: a tenant's policy."""
    if not action.endswith("/v1/ops/tenants/{tenant_id}/policy") or action.startswith("GET "):
        return None
    from longhaul.operations import policies

    try:
        return digest(policies.tenant_policy(services(), str(arguments["tenant_id"])).model_dump(mode="json"))
    except (ApiProblem, KeyError):
        return None  # no such tenant yet: nothing replaced


def _record(
    app: Any, caller: Principal, action: str, arguments: dict[str, Any], status: int, before: str | None, body: Any
) -> None:
    from longhaul.operations import audit  # the API's cold start imports only the rule (`audited`)
    from longhaul.storage.audit import Action

    try:
        event = app.current_event
        tenant_id, job_id = audit.target_tenant(services(), caller, arguments)
        audit.record(
            services(),
            Action(
                actor=audit.actor_of(caller),
                action=action,
                target=str(event.path),
                outcome=int(status),
                tenant_id=tenant_id,
                job_id=job_id,
                request_id=correlation.current(),
                source_ip=((event.raw_event.get("requestContext") or {}).get("identity") or {}).get("sourceIp"),
                before_digest=before,
                after_digest=digest(body) if body is not None and status < 400 else None,
            ),
        )
    except Exception:  # the action happened: its answer stands; the failure to record it is an error in the log
        logger.exception("audit: could not record an action", extra={"action": action, "status": status})


def _page(
    *,
    actor: str | None,
    tenant_id: str | None,
    action: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    cursor: str | None,
) -> AuditPage:
    from longhaul.operations import audit
    from longhaul.storage.audit import AuditFilter

    filters = AuditFilter(
        actor=actor,
        tenant_id=tenant_id,
        action=action,
        since=since.isoformat() if since else None,
        until=until.isoformat() if until else None,
    )
    return audit.page(services(), filters, cursor, limit)


@router.get(
    "/v1/ops/audit",
    summary="Read the audit trail",
    description="Every recorded action of operators, administrators and reviewers (and tenants' changes to their own "
    "resources), in the order recorded (the chain's `seq`), paged; filter by actor, tenant, action and time. Each "
    "entry links to the one before by its hash: `longhaul ops audit verify` checks the whole chain.",
    operation_id="ops_list_audit",
    tags=[ADMIN],
    responses={**keyed("Not an operator key"), **BAD_CURSOR, **INVALID_PARAMETERS},
)
def ops_list_audit(
    actor: ActorFilter = None,
    tenant_id: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    action: ActionFilter = None,
    since: Instant = None,
    until: Instant = None,
    limit: AUDIT_LIMIT = 100,
    cursor: Cursor = None,
) -> AuditPage:
    if principal(router).role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return _page(actor=actor, tenant_id=tenant_id, action=action, since=since, until=until, limit=limit, cursor=cursor)


@router.get(
    "/v1/audit",
    summary="Read the audit trail of your resources",
    description="The recorded actions on this tenant's jobs, reviews, policy and keys, operators' included, in the "
    "order recorded, paged; filter by actor, action and time.",
    operation_id="list_audit",
    tags=[ADMIN],
    responses={**keyed("A reviewer key (it reaches only the review routes)"), **BAD_CURSOR, **INVALID_PARAMETERS},
)
def list_audit(
    actor: ActorFilter = None,
    action: ActionFilter = None,
    since: Instant = None,
    until: Instant = None,
    limit: AUDIT_LIMIT = 100,
    cursor: Cursor = None,
) -> AuditPage:
    caller = principal(router)
    tenant_id = caller.tenant_id
    return _page(actor=actor, tenant_id=tenant_id, action=action, since=since, until=until, limit=limit, cursor=cursor)
