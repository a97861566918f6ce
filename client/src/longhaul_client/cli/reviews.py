"""A reviewer's commands (a key with the `reviewer` role): list reviews, show one, approve, reject or edit; for a
failed job handed to a person (a review of kind `complete`), submit its result from a file."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

import typer

from longhaul.review.contracts import DecisionRequest
from longhaul_client.cli.common import CommandError, Key, Output, OutputFormat, Url, read_json, session
from longhaul_client.cli.render import review_detail, reviews_table

app = typer.Typer(no_args_is_help=True, help="One review: show it, approve, reject or edit it (a reviewer's key).")
ReviewId = Annotated[str, typer.Argument(help="The review's id (rev_…).", show_default=False)]
Comment = Annotated[str | None, typer.Option(help="Recorded with the decision.")]


class ReviewStatus(StrEnum):
    PENDING = "pending"
    DECIDED = "decided"
    EXPIRED = "expired"


OUTCOMES = {
    "approve": "approved: job {job} publishes the draft",
    "reject": "rejected: job {job} ends failed (review-rejected)",
    "edit": "edited: job {job} publishes the edited draft",
    "complete": "completed: job {job} completed with the result written by hand",
}


def reviews(
    status: Annotated[ReviewStatus, typer.Option(help="Reviews in this status.")] = ReviewStatus.PENDING,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (newest first).")] = 50,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Your tenant's reviews in a status, newest first (a reviewer's key)."""
    with session(url, key, output) as (client, out):
        found = list(client.reviews(status=status.value, limit=limit))
        if out.json:
            out.document({"reviews": found})
        else:
            out.console.print(reviews_table(found))


@app.command()
def show(review_id: ReviewId, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT) -> None:
    """What to review: the draft, the evidence with its sources, why review was asked for."""
    with session(url, key, output) as (client, out):
        detail = client.review(review_id)
        if out.json:
            out.document(detail)
        else:
            out.console.print(review_detail(detail))


def _decide(
    review_id: str,
    decision: Literal["approve", "reject", "edit", "complete"],
    comment: str | None,
    edits: Path | None,
    url: str | None,
    key: str | None,
    output: OutputFormat,
) -> None:
    what = "result" if decision == "complete" else "edits"
    with session(url, key, output) as (client, out):
        changes = read_json(edits, what) if edits is not None else None
        if changes is not None and not isinstance(changes, dict):
            raise CommandError(f"{what} {edits} must be a JSON object (the workflow's {what})")
        request = (
            DecisionRequest(decision=decision, comment=comment, edits=None, result=changes)
            if decision == "complete"
            else DecisionRequest(decision=decision, comment=comment, edits=changes, result=None)
        )
        outcome = client.decide(review_id, request)
        if out.json:
            out.document(outcome)
        else:
            out.line(f"{outcome.review_id} " + OUTCOMES[outcome.decision].format(job=outcome.job_id))


@app.command()
def approve(
    review_id: ReviewId, comment: Comment = None, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT
) -> None:
    """Approve the draft: the job publishes it and completes."""
    _decide(review_id, "approve", comment, None, url, key, output)


@app.command()
def reject(
    review_id: ReviewId, comment: Comment = None, url: Url = None, key: Key = None, output: Output = OutputFormat.TEXT
) -> None:
    """Reject the draft: the job ends failed (review-rejected)."""
    _decide(review_id, "reject", comment, None, url, key, output)


@app.command()
def edit(
    review_id: ReviewId,
    edits: Annotated[
        Path,
        typer.Argument(
            help="The edits (JSON; document-analysis: answer and/or claims; invoice-reconciliation: summary).",
            show_default=False,
        ),
    ],
    comment: Comment = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Publish an edited draft (the edits are checked like model output)."""
    _decide(review_id, "edit", comment, edits, url, key, output)


@app.command()
def complete(
    review_id: ReviewId,
    result: Annotated[
        Path,
        typer.Argument(
            help="The job's result (JSON; start from `longhaul review show REVIEW_ID --output json`'s draft). "
            "invoice-reconciliation: invoices and summary; document-analysis: answer and claims.",
            show_default=False,
        ),
    ],
    comment: Comment = None,
    url: Url = None,
    key: Key = None,
    output: Output = OutputFormat.TEXT,
) -> None:
    """Submit the result of a failed job handed to you (a review of kind `complete`): the workflow's result model
    and business rules check it; the job completes `completed_by: person`, or the problems are printed and the
    review stays open."""
    _decide(review_id, "complete", comment, result, url, key, output)
