"""Events out: what Longhaul puts on its EventBridge bus, and the schema each kind has in the stack's schema registry.

Every job status change is one `Job Status Changed` event; a review's request and its decision are `Review
Requested` and `Review Decided`. Each is decided when the change is written (in the same DynamoDB transaction as the
event of the job's log that records it: `storage.bus`), so its detail is fixed then and every attempt to publish it
puts the same bytes. `seq` is that event's number in the job's log (`GET /v1/jobs/{id}/events`): consumers order a
job's events by it and drop one they have already seen by `(job_id, seq, detail-type)`.
"""

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import Field

from longhaul.core.contracts import JobStatus
from longhaul.core.model import Model

#: The `source` of every event Longhaul puts on its bus.
SOURCE = "longhaul"
JOB_STATUS_CHANGED = "Job Status Changed"
REVIEW_REQUESTED = "Review Requested"
REVIEW_DECIDED = "Review Decided"
DETAIL_TYPES = (JOB_STATUS_CHANGED, REVIEW_REQUESTED, REVIEW_DECIDED)
#: The events of the job's log that record a review's decision (a person's or its policy's).
DECISION_EVENTS = frozenset({"review_decided"})


class JobStatusChanged(Model):
    """`detail` of a `Job Status Changed` event: one per status change of a job, in the order of its log."""

    job_id: str
    tenant_id: str
    workflow: str
    status: JobStatus
    previous_status: JobStatus | None = Field(description="None for the job's first status (`queued`).")
    at: datetime = Field(description="When the change was written.")
    correlation_id: str | None = Field(description="The job's correlation id (its trace), as its webhooks carry.")
    seq: int = Field(ge=1, description="The number of the event recording the change in the job's log.")


class ReviewRequested(Model):
    """`detail` of a `Review Requested` event: the job waits for a person's decision."""

    job_id: str
    tenant_id: str
    workflow: str
    review_id: str
    step: str | None
    assignee_group: str | None
    deadline: str | None
    at: datetime
    correlation_id: str | None
    seq: int = Field(ge=1)


class ReviewDecided(Model):
    """`detail` of a `Review Decided` event: a person (or the workflow's policy) decided the review."""

    job_id: str
    tenant_id: str
    workflow: str
    review_id: str
    step: str | None
    decision: str | None
    decided_by: str | None
    at: datetime
    correlation_id: str | None
    seq: int = Field(ge=1)


DETAILS: dict[str, type[Model]] = {
    JOB_STATUS_CHANGED: JobStatusChanged,
    REVIEW_REQUESTED: ReviewRequested,
    REVIEW_DECIDED: ReviewDecided,
}


class BusEvent(Model):
    """One event of the bus as the operators' tap received it: EventBridge's envelope, its `detail` parsed."""

    id: str = Field(description="EventBridge's id of the event.")
    time: str = Field(description="When EventBridge received it (ISO 8601, seconds).")
    source: str
    detail_type: str = Field(description="`Job Status Changed`, `Review Requested` or `Review Decided`.")
    detail: dict[str, Any]


class BusEventList(Model):
    """Events read from the operators' tap, in the order it received them; each is answered once (the tap is a
    queue: a second reader gets the events the first did not take)."""

    events: list[BusEvent]


def bus_event(envelope: Mapping[str, Any]) -> BusEvent:
    """The view of an envelope EventBridge delivered (`detail-type` as `detail_type`)."""
    detail = envelope.get("detail")
    return BusEvent(
        id=str(envelope.get("id", "")),
        time=str(envelope.get("time", "")),
        source=str(envelope.get("source", "")),
        detail_type=str(envelope.get("detail-type", "")),
        detail=detail if isinstance(detail, dict) else {},
    )


class BusEntry(NamedTuple):
    """One event to put on the bus: its `detail-type` and its `detail` (JSON text, fixed when it was written)."""

    detail_type: str
    detail: str


def _text(model: Model) -> str:
    return json.dumps(model.model_dump(mode="json"), separators=(",", ":"), sort_keys=True)


def entries_for_change(
    *,
    job_id: str,
    tenant_id: str,
    workflow: str,
    correlation_id: str | None,
    to: JobStatus,
    previous: JobStatus | None,
    seq: int,
    at: str,
    event: str | None = None,
    step: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> list[BusEntry]:
    """The events a status change to `to` (recorded by event `seq` of type `event`, with its `detail`) puts on the
    bus, in order: the status change and the review it requests, or the decision it applies and the change."""
    when = datetime.fromisoformat(at.replace("Z", "+00:00"))
    common: dict[str, Any] = {
        "job_id": job_id,
        "tenant_id": tenant_id,
        "workflow": workflow,
        "at": when,
        "correlation_id": correlation_id,
        "seq": seq,
    }
    change = BusEntry(JOB_STATUS_CHANGED, _text(JobStatusChanged(**common, status=to, previous_status=previous)))
    requested = to == JobStatus.WAITING_FOR_REVIEW
    review = review_entries(common, event=event, step=step, detail=detail, requested=requested)
    # A request follows the change that makes the job wait; a decision comes before the change it causes.
    return [change, *review] if requested else [*review, change]


def review_entries(
    common: Mapping[str, Any],
    *,
    event: str | None,
    step: str | None,
    detail: Mapping[str, Any] | None,
    requested: bool = False,
) -> list[BusEntry]:
    """A review's event, when the log event (`event`, `detail`) requests or decides one; else none."""
    review_id = str((detail or {}).get("review_id") or "")
    if not review_id:
        return []
    data = detail or {}
    if requested:
        model: Model = ReviewRequested(
            **common,
            review_id=review_id,
            step=step,
            assignee_group=_optional(data.get("assignee_group")),
            deadline=_optional(data.get("deadline")),
        )
        return [BusEntry(REVIEW_REQUESTED, _text(model))]
    if event in DECISION_EVENTS or data.get("decision"):
        model = ReviewDecided(
            **common,
            review_id=review_id,
            step=step,
            decision=_optional(data.get("decision")),
            decided_by=_optional(data.get("decided_by")),
        )
        return [BusEntry(REVIEW_DECIDED, _text(model))]
    return []


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def registry_schema(detail_type: str) -> dict[str, Any]:
    """The OpenAPI 3 document of one detail type for the schema registry (`AWS::EventSchemas::Schema`, type
    `OpenApi3`), in the shape EventBridge's own schemas have: the `AWSEvent` envelope and its `detail`."""
    name = DETAILS[detail_type].__name__
    detail = DETAILS[detail_type].model_json_schema(ref_template="#/components/schemas/{model}")
    definitions = detail.pop("$defs", {})
    envelope = {
        "type": "object",
        "required": ["detail-type", "source", "detail", "id", "time", "account", "region"],
        "properties": {
            "detail": {"$ref": f"#/components/schemas/{name}"},
            "detail-type": {"type": "string", "enum": [detail_type]},
            "source": {"type": "string", "enum": [SOURCE]},
            "id": {"type": "string"},
            "time": {"type": "string", "format": "date-time"},
            "account": {"type": "string"},
            "region": {"type": "string"},
            "resources": {"type": "array", "items": {"type": "string"}},
            "version": {"type": "string"},
        },
        "x-amazon-events-source": SOURCE,
        "x-amazon-events-detail-type": detail_type,
    }
    return {
        "openapi": "3.0.0",
        "info": {"version": "1.0.0", "title": detail_type},
        "paths": {},
        "components": {"schemas": {"AWSEvent": envelope, name: _openapi3(detail), **_openapi3(definitions)}},
    }


def _openapi3(schema: Any) -> Any:
    """Pydantic's JSON Schema as OpenAPI 3.0 reads it: `anyOf [X, null]` becomes X with `nullable`."""
    if isinstance(schema, dict):
        any_of = schema.get("anyOf")
        if isinstance(any_of, list) and {"type": "null"} in any_of and len(any_of) == 2:
            (kept,) = [s for s in any_of if s != {"type": "null"}]
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            return {**_openapi3(kept), **_openapi3(rest), "nullable": True}
        return {k: _openapi3(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_openapi3(s) for s in schema]
    return schema
