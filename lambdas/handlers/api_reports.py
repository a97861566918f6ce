"""The usage reports of the API function: a tenant's own (`GET /v1/reports/usage`) and the operators' over every
tenant (`GET /v1/ops/reports`), computed from the analytics export (`longhaul.operations.analytics`)."""

from __future__ import annotations

import re
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import AfterValidator

from handlers.api_shared import INVALID_PARAMETERS, JOBS, OPERATORS, keyed, principal, problems
from longhaul.core.analytics import ReportBy, UsageReport
from longhaul.core.contracts import PATTERN_END, IsoTime
from longhaul.core.problems import Forbidden
from longhaul.operations import analytics
from longhaul.services import services

router = Router()

TENANT_KEY = "A reviewer key (it reaches only the review routes)"
NOT_OPERATOR = "Not an operator key"
BAD_WINDOW = problems(400, "`since` does not come before `until`, or the window is longer than 400 days")
#: `7d`, `24h`, `30m`, or an ISO date or time.
SINCE_PATTERN = r"^([1-9][0-9]{0,3}[mhd]|[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.]{2,15})?(Z|[+-][0-9]{2}:?[0-9]{2})?)"
_SINCE = re.compile(SINCE_PATTERN + r"\Z")


def _since(value: str) -> str:
    r"""The pattern checked here (the document's ends with `(?![\s\S])`, which the validator's regex engine lacks)."""
    if not _SINCE.match(value):
        raise ValueError("since must be like 7d, 24h, 30m or an ISO time")
    return value


TENANT_PATTERN = r"^[A-Za-z0-9._-]{1,64}"
_TENANT = re.compile(TENANT_PATTERN + r"\Z")


def _tenant(value: str | None) -> str | None:
    if value is not None and not _TENANT.match(value):
        raise ValueError("a tenant id is 1-64 of A-Z a-z 0-9 . _ -")
    return value


Since = Annotated[
    str,
    AfterValidator(_since),
    Query(
        max_length=40,
        json_schema_extra={"pattern": SINCE_PATTERN + PATTERN_END},
        description="The window's start: back from `until` (`7d`, `24h`, `30m`) or an ISO time. Jobs count by the "
        "time they were created.",
    ),
]
Until = Annotated[IsoTime | None, Query(description="The window's end (an ISO time); default: now.")]
By = Annotated[
    ReportBy,
    Query(description="Group the spend by `workflow`, model `route`, `step` (model calls) or workflow `version`."),
]
REPORT_DESCRIPTION = (
    "Spend (orchestration and model, US dollars), p50/p95 step durations, failure kinds per step, review and queue "
    "waits, and retry cost (model calls whose attempt's output was not kept) of the jobs created in the window, from "
    "the analytics export: a job counts once its export ran (every few minutes after it finished)."
)


@router.get(
    "/v1/reports/usage",
    summary="Get your usage report",
    description=REPORT_DESCRIPTION + " Your own jobs only.",
    operation_id="get_usage_report",
    tags=[JOBS],
    responses={**keyed(TENANT_KEY), **INVALID_PARAMETERS, **BAD_WINDOW},
)
def get_usage_report(since: Since = "30d", until: Until = None, by: By = "workflow") -> UsageReport:
    caller = principal(router)
    return analytics.report(services(), since=since, until=until, tenant_id=caller.tenant_id, by=by)


@router.get(
    "/v1/ops/reports",
    summary="Get the platform's usage report",
    description=REPORT_DESCRIPTION + " Every tenant's jobs, or one tenant's.",
    operation_id="get_ops_report",
    tags=[OPERATORS],
    responses={**keyed(NOT_OPERATOR), **INVALID_PARAMETERS, **BAD_WINDOW},
)
def get_ops_report(
    since: Since = "7d",
    until: Until = None,
    tenant_id: Annotated[
        str | None,
        AfterValidator(_tenant),
        Query(json_schema_extra={"pattern": TENANT_PATTERN + PATTERN_END}, description="Only this tenant's jobs"),
    ] = None,
    by: By = "workflow",
) -> UsageReport:
    if principal(router).role != "operator":
        raise Forbidden("operator routes need a key with the operator role")
    return analytics.report(services(), since=since, until=until, tenant_id=tenant_id, by=by)
