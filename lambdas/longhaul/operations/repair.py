"""Repair a job an operator has in hand: fix its input (a JSON merge patch, validated as a submission is, kept as a new
version beside the earlier ones) so the next replay reads it and reruns what read the changed fields; flag it for
engineering (`escalation` on the job, the alarm topic told, the tenant's webhook if its policy asks).

Reaches AWS through the ports only (the stores, the artifacts, the alerts), so it is unit-tested with the local ones.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from longhaul.core.auth import Principal
from longhaul.core.contracts import (
    Escalation,
    EscalationRequest,
    InputChange,
    InputFixOutcome,
    InputFixRequest,
    InputVersion,
    JobInputView,
    JobStatus,
)
from longhaul.core.observability import logger
from longhaul.core.problems import ApiProblem, InvalidRequest, NotFound
from longhaul.core.records import JOB_ID, Job
from longhaul.documents.intake import Intake
from longhaul.operations.sweep import reconcile
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.dynamo import Cancelled
from longhaul.storage.jobs import NewEvent
from longhaul.storage.outbox import ESCALATED_EVENT
from longhaul.workflows import REGISTRY

# A job whose input may be fixed: it stopped (failed, cancelled) or, expired, left dead letters: nothing runs it.
FIXABLE = frozenset({JobStatus.FAILED, JobStatus.CANCELLED})
WRITE_TRIES = 5
SHOWN_VALUE_CHARS = 200  # a changed value longer than this is shortened in the diff (the version keeps it whole)
SHOWN_CHANGES = 50


class NotFixable(ApiProblem):
    status, slug, title = 409, "not-fixable", "The job's input cannot be fixed in its current status"


class Contended(ApiProblem):
    status, slug, title = 409, "job-changed", "The job kept changing meanwhile; try again"


# ---------------------------------------------------------------------- the input


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 (JSON Merge Patch), section 2: an object patches member by member (`null` removes one), anything else
    replaces the target whole (an array too)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = merge_patch(result.get(name), value)
    return result


def diff(before: Any, after: Any, path: tuple[str | int, ...] = ()) -> list[InputChange]:
    """The leaves that differ between two JSON values (objects by member, arrays by position), in document order."""
    if isinstance(before, dict) and isinstance(after, dict):
        names = [*before, *(n for n in after if n not in before)]
        return [c for n in names for c in diff(before.get(n), after.get(n), (*path, n))]
    if isinstance(before, list) and isinstance(after, list):
        longer = max(len(before), len(after))
        return [
            c
            for i in range(longer)
            for c in diff(before[i] if i < len(before) else None, after[i] if i < len(after) else None, (*path, i))
        ]
    if before == after:
        return []
    return [InputChange(path="/".join(str(p) for p in path), before=_shown(before), after=_shown(after))]


def _shown(value: Any) -> Any:
    text = json.dumps(value)
    if len(text) <= SHOWN_VALUE_CHARS:
        return value
    return text[:SHOWN_VALUE_CHARS] + "…"


def _stored(value: Any) -> Any:
    """A JSON value as DynamoDB keeps it (its numbers as Decimals: it refuses floats)."""
    return json.loads(json.dumps(value), parse_float=Decimal)


def _job(services: Services, job_id: str) -> Job:
    job = services.jobs.get_job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    return job


def current_input(services: Services, job: Job) -> dict[str, Any]:
    """The job's input as a request gives it (its workflow's input model): the last fix's, or the submitted one read
    back from what the workflow stored (`submitted_input` of its domain module)."""
    store = services.artifacts
    if store.head(job.input_key) is None:
        raise NotFixable(f"job {job.job_id}'s input has expired with its artifacts; submit it again")
    if job.input_version > 1:
        found: dict[str, Any] = store.get_json(keys.submitted_input_key(job.job_id, job.input_version))
        return found
    submitted: dict[str, Any] = REGISTRY[job.workflow].hook("submitted_input")(store, store.get_json(job.input_key))
    return submitted


def input_view(services: Services, job_id: str) -> JobInputView:
    job = _job(services, job_id)
    return JobInputView(
        job_id=job.job_id,
        workflow=job.workflow,
        version=job.input_version,
        input=current_input(services, job),
        versions=[InputVersion(version=1, at=job.created_at), *job.input_versions],
    )


def _fixable(services: Services, job: Job) -> Job:
    """The job, if its input may be fixed now (one whose execution ended without saying so is brought up to date
    first, as a replay does); else a 409."""
    if job.status not in FIXABLE:
        job = reconcile(services, job) or job
    dead_lettered = job.status == JobStatus.EXPIRED and bool(services.dead_letters.of_job(job.job_id))
    if job.status not in FIXABLE and not dead_lettered:
        raise NotFixable(
            f"job {job.job_id} is {job.status.value}; only a failed, cancelled or dead-lettered job's input is fixed"
        )
    if job.compensation is not None and job.compensation.status in ("pending", "running"):
        raise NotFixable(
            f"job {job.job_id} is undoing its side effects (its compensation is {job.compensation.status})"
        )
    return job


def fix_input(services: Services, principal: Principal, job_id: str, request: InputFixRequest) -> InputFixOutcome:
    """Apply the operator's merge patch to the job's input, validate the result as a submission of the job's tenant
    (its model, then its workflow's own checks: document references resolve for that tenant), and keep it as a new
    version (the earlier kept) with who, why and the diff; the next replay reads it and reruns, from the first of them,
    the steps that read a changed field. A patch that changes nothing is a 422: there is nothing to record."""
    job = _fixable(services, _job(services, job_id))
    spec = REGISTRY[job.workflow]
    before = current_input(services, job)
    after = merge_patch(before, request.patch)
    changes = diff(before, after)
    if not changes:
        raise InvalidRequest("the patch changes nothing in the job's input", errors=[])
    try:
        validated = spec.input_model.model_validate(after)
    except ValidationError as invalid:
        errors = [
            {"loc": ["input", *e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in invalid.errors(include_url=False, include_context=False, include_input=False)
        ]
        raise InvalidRequest("the fixed input does not match the workflow's input", errors=errors) from None
    version = job.input_version + 1
    # The workflow's own checks, as at submission, for the job's tenant; nothing is written unless they all pass.
    intake = Intake(
        job_id=job.job_id, tenant_id=job.tenant_id, artifacts=services.artifacts, jobs=services.jobs, version=version
    )
    prepared = spec.prepare()(intake, validated)
    input_key = intake.store(prepared)
    services.artifacts.put_json(keys.submitted_input_key(job.job_id, version), after)
    names = [*before, *(n for n in after if n not in before)]
    changed = [name for name in names if before.get(name) != after.get(name)]
    invalidated = _ordered(spec.step_names, {*spec.steps_reading(changed), *(job.invalidated_steps or ())})
    entry = InputVersion(
        version=version,
        at=services.now(),
        by=principal.tenant_id,
        role=principal.role,
        reason=request.reason,
        changed=changed,
        diff=changes[:SHOWN_CHANGES],
    )
    detail = {
        "by": principal.tenant_id,
        "role": principal.role,
        "reason": request.reason,
        "version": version,
        "from_version": job.input_version,
        "changed": changed,
        "diff": [c.model_dump(mode="json") for c in changes[:SHOWN_CHANGES]],
        "invalidated_steps": invalidated,
    }
    for _ in range(WRITE_TRIES):
        try:
            services.jobs.write(
                job,
                [NewEvent("input_fixed", detail=_stored(detail))],
                fields={
                    "input_key": input_key,
                    "input_version": version,
                    "input_versions": _stored([v.model_dump(mode="json") for v in (*job.input_versions, entry)]),
                    "invalidated_steps": invalidated,
                },
                only_if=[job.status],
            )
            break
        except Cancelled:  # something else wrote to the job: decide again on what it is now
            fresh = _fixable(services, _job(services, job_id))
            if fresh.input_version != job.input_version:
                raise Contended(f"job {job_id}'s input was fixed meanwhile (version {fresh.input_version})") from None
            job = fresh
    else:
        raise Contended(f"job {job_id} kept changing; fix its input again")
    logger.info("job input fixed", extra={"job_id": job_id, **detail})
    return InputFixOutcome(
        job_id=job_id,
        status=job.status,
        input_version=version,
        changed=changed,
        diff=changes[:SHOWN_CHANGES],
        invalidated_steps=invalidated,
        replay_from=invalidated[0] if invalidated else None,
    )


def _ordered(steps: tuple[str, ...], wanted: set[str]) -> list[str]:
    return [s for s in steps if s in wanted]


# ---------------------------------------------------------------------- escalation


ALL_STATUSES = tuple(JobStatus)


def escalate(services: Services, principal: Principal, job_id: str, request: EscalationRequest) -> Escalation:
    """Flag the job for engineering (again: the flag is updated), record it on the job's log, tell the alarm topic, and
    the tenant's callback when its policy opts in (`webhook_escalations`)."""
    job = _job(services, job_id)
    escalation = Escalation(by=principal.tenant_id, at=services.now(), note=request.note, link=request.link)
    announce = ESCALATED_EVENT if services.budgets.policy(job.tenant_id).webhook_escalations else None
    detail = {
        "by": principal.tenant_id,
        "role": principal.role,
        "note": request.note,
        "link": request.link,
        "updated": job.escalation is not None,
    }
    flagged = escalation.model_dump(mode="json")
    _write(services, job, NewEvent("job_escalated", detail=detail), flagged, announce=announce)
    _tell_alarm_topic(services, job, escalation)
    return escalation


def clear_escalation(services: Services, principal: Principal, job_id: str) -> bool:
    """Clear the job's escalation (recorded with who); False when it had none (nothing is recorded then)."""
    job = _job(services, job_id)
    if job.escalation is None:
        return False
    detail = {"by": principal.tenant_id, "role": principal.role, "was": job.escalation.model_dump(mode="json")}
    _write(services, job, NewEvent("escalation_cleared", detail=detail), None, announce=None)
    return True


def _write(services: Services, job: Job, event: NewEvent, escalation: Any, *, announce: str | None) -> None:
    for _ in range(WRITE_TRIES):
        try:
            services.jobs.write(
                job,
                [event],
                fields={"escalation": escalation},
                only_if=ALL_STATUSES,
                announce=announce,
            )
            return
        except Cancelled:  # another writer moved the job's log on: write on top of what it is now
            job = _job(services, job.job_id)
    raise Contended(f"job {job.job_id} kept changing; try again")


def _tell_alarm_topic(services: Services, job: Job, escalation: Escalation) -> None:
    """Best effort: the escalation is on the job whatever happens here (the log line says when it did not reach)."""
    if services.alerts is None:
        return
    message = {
        "event": "job_escalated",
        "job_id": job.job_id,
        "tenant_id": job.tenant_id,
        "workflow": job.workflow,
        "status": job.status.value,
        "error": job.error.model_dump(mode="json", exclude_none=True) if job.error else None,
        "escalation": escalation.model_dump(mode="json"),
    }
    try:
        services.alerts.publish(
            subject=f"Longhaul: job {job.job_id} escalated ({job.workflow}, {job.status.value})",
            message=json.dumps(message, indent=2),
            attributes={"job_id": job.job_id, "tenant_id": job.tenant_id, "event": "job_escalated"},
        )
    except Exception:
        logger.exception("the alarm topic was not told of an escalation", extra={"job_id": job.job_id})
