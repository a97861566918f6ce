"""The reviewer routes of the API function (`/v1/reviews/...`): a tenant's reviews, one review, a decision.

The handler refuses other roles on these paths before routing (403); each use case checks the role again.
"""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from handlers.api_shared import (
    BAD_CURSOR,
    INVALID_PARAMETERS,
    REVIEWS,
    Cursor,
    keyed,
    principal,
    problems,
    with_json_body,
)
from longhaul.api.reviews import ReviewService
from longhaul.core import limits
from longhaul.review.contracts import DecisionOutcome, ReviewDetail, ReviewList
from longhaul.services import services
from longhaul.workflows import DecisionBody, decision_request

router = Router()
NOT_REVIEWER = "Not a reviewer key"
REVIEW_PROBLEMS = {**keyed(NOT_REVIEWER), **problems(404, "No such review for this tenant")}


def _service() -> ReviewService:
    return ReviewService(services())


@router.get(
    "/v1/reviews",
    summary="List reviews",
    description="The tenant's reviews in a status (pending by default), newest first, paged.",
    operation_id="list_reviews",
    tags=[REVIEWS],
    responses={**keyed(NOT_REVIEWER), **BAD_CURSOR, **INVALID_PARAMETERS},
)
def list_reviews(
    status: Annotated[Literal["pending", "decided", "expired"], Query()] = "pending",
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)] = 50,
    cursor: Cursor = None,
) -> ReviewList:
    return _service().list(principal(router), status, limit, cursor)


@router.get(
    "/v1/reviews/<review_id>",
    summary="Get what to review",
    description="The draft result, the evidence with its sources, and why review was required.",
    operation_id="get_review",
    tags=[REVIEWS],
    responses=REVIEW_PROBLEMS,
)
def get_review(review_id: Annotated[str, Path()]) -> ReviewDetail:
    return _service().detail(principal(router), review_id)


@router.post(
    "/v1/reviews/<review_id>/decision",
    summary="Decide a review",
    description="Approve, reject, or edit (the edits are validated like model output); the job resumes.",
    operation_id="decide_review",
    tags=[REVIEWS],
    responses={
        200: {"description": "Decided", "content": {"application/json": {"model": DecisionOutcome}}},
        **REVIEW_PROBLEMS,
        **keyed(NOT_REVIEWER, takes_body=True),
        **problems(409, "Already decided, expired or cancelled"),
        **with_json_body("Invalid decision, or edits that are not the review's workflow's"),
    },
)
def decide_review(review_id: Annotated[str, Path()], request: Annotated[DecisionBody, Body()]) -> Response[str]:
    outcome = _service().decide(principal(router), review_id, decision_request(request))
    return Response(status_code=200, content_type="application/json", body=outcome.model_dump_json())
