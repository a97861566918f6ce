"""Jobs started by schedules and triggers: their routes' use cases (create, list, read, change, pause, delete) and
what happens when one fires. Every fire submits through the same path as `POST /v1/jobs` (`JobService.submit`:
validation, the tenant's policy, its rate, admission), as the tenant, with an Idempotency-Key derived from the fire
(`longhaul.core.triggers`): a schedule's id and scheduled minute, an object's bucket, key and ETag, a batch window's
number, an event's id. A fire delivered twice starts one job.

What a schedule or trigger will submit is checked when it is created or changed, against the workflow's input model
and the tenant's policy, so a bad one is a 422 with `errors` then, not a failure at 2 a.m.; what still fails at a
fire (the policy changed, an event lacks a field its template takes) is kept on the record as `last_error`.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import ValidationError

from longhaul.api.jobs import JobService
from longhaul.core import limits, schema
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy, job_limits
from longhaul.core.clock import iso, parse_iso
from longhaul.core.contracts import (
    EventTrigger,
    JobTrigger,
    ObjectTrigger,
    ScheduleTrigger,
    UploadRequest,
    UploadTicket,
)
from longhaul.core.observability import logger
from longhaul.core.ports import WiringRefused, WiringUnavailable
from longhaul.core.problems import ApiProblem, InvalidRequest, NotFound, RateLimited, Unavailable
from longhaul.core.triggers import (
    ScheduleList,
    SchedulePatch,
    ScheduleRequest,
    ScheduleView,
    TemplateError,
    TriggerList,
    TriggerPatch,
    TriggerRequest,
    TriggerView,
    check_pattern,
    check_schedule,
    check_template,
    event_idempotency_key,
    fill,
    minute_of,
    next_fire,
    object_idempotency_key,
    placeholders,
    render,
    sample_object_event,
    schedule_idempotency_key,
    upload_id_for,
    window_idempotency_key,
)
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.workflows import JOB_REQUEST, REGISTRY

#: How a fire's invocation says what it is (the `longhaul_trigger` field of the function's event).
FIRE_SCHEDULE = "schedule"
FIRE_RULE = "rule"
FIRE_WINDOW = "window"
SAMPLE_TEXT = "sample"  # what an EventBridge template's placeholder stands for when the template is checked
MEDIA_TYPES = {".pdf": "application/pdf", ".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain"}
WINDOW_GRACE_SECONDS = 2  # a window's job starts this long after its end: an object written at its last moment is in


def new_id(prefix: str) -> str:
    """Time-ordered (a listing is oldest first), unguessable: `sch_` or `trg_` + 20 hex digits."""
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(4)}"


def inbox_prefix(tenant_id: str, trigger_id: str) -> str:
    return f"{schema.INBOX_PREFIX}{tenant_id}/{trigger_id}/"


def rule_name(prefix: str, trigger_id: str) -> str:
    return f"{prefix}-{trigger_id}"


def _tenant(tenant_id: str) -> Principal:
    return Principal(tenant_id=tenant_id, role="tenant", key_id="trigger")


def _request_errors(error: ValidationError, field: str) -> list[dict[str, Any]]:
    """A job request's validation errors at the body paths of a schedule (`input`) or trigger (`input_template`)."""
    located = []
    for e in error.errors():
        loc = list(e.get("loc", ()))
        if loc and loc[0] in REGISTRY:
            loc = loc[1:]
        if loc and loc[0] == "input":
            loc = [field, *loc[1:]]
        located.append({"loc": ["body", *loc], "msg": e.get("msg", ""), "type": e.get("type", "")})
    return located


class TriggerService:
    """Schedules and triggers: their routes and their fires (a plain class: the API import defines few dataclasses)."""

    def __init__(self, services: Services) -> None:
        self.services = services

    @property
    def jobs(self) -> JobService:
        return JobService(self.services)

    # ------------------------------------------------------------------ shared checks

    def _job_request(self, body: Mapping[str, Any], job_input: Any) -> Any:
        """The job request a fire submits (`ValidationError` when it is not one)."""
        data = {
            "workflow": body["workflow"],
            "input": job_input,
            "sla_class": body["sla_class"],
            **({"budget": body["budget"]} if body.get("budget") else {}),
            **({"callback_url": body["callback_url"]} if body.get("callback_url") else {}),
        }
        return JOB_REQUEST.validate_json(json.dumps(data))

    def _check_workflow(self, workflow: str) -> None:
        if workflow not in self.services.settings.workflows or workflow not in REGISTRY:
            raise InvalidRequest(
                f"workflow {workflow!r} is not deployed",
                errors=[{"loc": ["body", "workflow"], "msg": "not a deployed workflow", "type": "unknown_workflow"}],
                allowed_workflows=sorted(self.services.settings.workflows),
            )

    def _policy_problems(self, body: Mapping[str, Any], policy: TenantPolicy) -> list[dict[str, Any]]:
        from longhaul.core.budgets import JobBudget

        budget = JobBudget.model_validate(body["budget"]) if body.get("budget") else None
        _, _, problems = job_limits(budget, policy)
        if body["sla_class"] not in policy.sla_classes:
            problems.append(
                {"loc": ["body", "sla_class"], "msg": f"not an SLA class this tenant may use: {policy.sla_classes}"}
            )
        if body.get("callback_url"):
            try:
                self.jobs._check_callback(body["callback_url"])
            except InvalidRequest as refused:
                problems.extend(refused.errors or [])
        return problems

    def _refuse(self, problems: list[dict[str, Any]], what: str) -> None:
        if problems:
            raise InvalidRequest(f"the {what} is not valid: see `errors`", errors=problems)

    # ------------------------------------------------------------------ schedules

    def create_schedule(
        self, principal: Principal, request: ScheduleRequest, *, target: str, base_url: str
    ) -> ScheduleView:
        s = self.services
        tenant = principal.tenant_id
        self._check_workflow(request.workflow)
        policy = s.budgets.recent_policy(tenant)
        self._check_room(tenant, "SCHEDULE", "schedules", policy.max_schedules)
        body = request.model_dump(mode="json")
        self._check_schedule(body, policy)
        now = s.now()
        schedule_id = new_id("sch")
        record = {
            **body,
            "schedule_id": schedule_id,
            "created_at": iso(now),
            "updated_at": iso(now),
            "links_base": base_url,
            "target": target,
        }
        s.triggers.put(tenant, "SCHEDULE", schedule_id, record)
        try:
            self._wire_schedule(tenant, record)
        except Exception:
            s.triggers.delete(tenant, "SCHEDULE", schedule_id)  # nothing is kept of a schedule that could not be made
            raise
        return self._schedule_view(record)

    def _check_schedule(self, body: Mapping[str, Any], policy: TenantPolicy) -> None:
        problems = check_schedule(
            body["schedule"],
            body["timezone"],
            min_interval_seconds=policy.min_schedule_interval_seconds,
            now=self.services.now(),
        )
        try:
            self._job_request(body, body["input"])
        except ValidationError as error:
            problems.extend(_request_errors(error, "input"))
        problems.extend(self._policy_problems(body, policy))
        self._refuse(problems, "schedule")

    def _wire_schedule(self, tenant_id: str, record: Mapping[str, Any]) -> None:
        self._needs_scheduler()
        with _wiring():
            self.services.trigger_wiring.put_schedule(
                tenant_id,
                record["schedule_id"],
                expression=record["schedule"],
                timezone=record["timezone"],
                enabled=record["enabled"],
                target=record["target"],
                payload={
                    "longhaul_trigger": FIRE_SCHEDULE,
                    "tenant_id": tenant_id,
                    "schedule_id": record["schedule_id"],
                    "scheduled_time": "<aws.scheduler.scheduled-time>",
                },
            )

    def _needs_scheduler(self) -> None:
        if not self.services.settings.scheduler_role:
            raise Unavailable("schedules are not configured on this deployment (LONGHAUL_SCHEDULER_ROLE)")

    def _schedule_view(self, record: Mapping[str, Any]) -> ScheduleView:
        upcoming = None
        if record["enabled"]:
            upcoming = next_fire(
                record["schedule"], record["timezone"], self.services.now(), anchor=parse_iso(record["created_at"])
            )
        fields = {k: v for k, v in record.items() if k in ScheduleView.model_fields}
        return ScheduleView.model_validate({**fields, "next_run_at": upcoming})

    def _schedule(self, principal: Principal, schedule_id: str) -> dict[str, Any]:
        record = self.services.triggers.get(principal.tenant_id, "SCHEDULE", schedule_id)
        if record is None:
            raise NotFound(f"no schedule {schedule_id!r}")
        return record

    def list_schedules(self, principal: Principal) -> ScheduleList:
        records = self.services.triggers.records(principal.tenant_id, "SCHEDULE")
        return ScheduleList(schedules=[self._schedule_view(r) for r in records])

    def get_schedule(self, principal: Principal, schedule_id: str) -> ScheduleView:
        return self._schedule_view(self._schedule(principal, schedule_id))

    def update_schedule(self, principal: Principal, schedule_id: str, change: SchedulePatch) -> ScheduleView:
        s = self.services
        record = self._schedule(principal, schedule_id)
        given = change.model_dump(mode="json", exclude_unset=True)
        body = {**record, **given}
        self._check_schedule(body, s.budgets.recent_policy(principal.tenant_id))
        body["updated_at"] = iso(s.now())
        self._wire_schedule(principal.tenant_id, body)
        s.triggers.replace(principal.tenant_id, "SCHEDULE", schedule_id, body)
        return self._schedule_view(body)

    def delete_schedule(self, principal: Principal, schedule_id: str) -> None:
        self._schedule(principal, schedule_id)
        with _wiring():
            self.services.trigger_wiring.delete_schedule(principal.tenant_id, schedule_id)
        self.services.triggers.delete(principal.tenant_id, "SCHEDULE", schedule_id)

    # ------------------------------------------------------------------ triggers

    def create_trigger(self, principal: Principal, request: TriggerRequest, *, target: str) -> TriggerView:
        s = self.services
        tenant = principal.tenant_id
        self._check_workflow(request.workflow)
        policy = s.budgets.recent_policy(tenant)
        self._check_room(tenant, "TRIGGER", "triggers", policy.max_triggers)
        body = request.model_dump(mode="json")
        if request.type == "eventbridge":
            body["event_bus"] = request.event_bus or s.settings.event_bus or "default"
            body["prefix"] = ""
            body["batch_seconds"] = None
        self._check_trigger(body, policy)
        now = s.now()
        trigger_id = new_id("trg")
        record = {**body, "trigger_id": trigger_id, "created_at": iso(now), "updated_at": iso(now), "target": target}
        if request.type == "s3" and request.batch_seconds:
            self._needs_scheduler()
        s.triggers.put(tenant, "TRIGGER", trigger_id, record)
        if request.type == "eventbridge":
            try:
                self._wire_rule(tenant, record)
            except Exception:
                s.triggers.delete(tenant, "TRIGGER", trigger_id)
                raise
        return self._trigger_view(tenant, record)

    def _check_room(self, tenant: str, kind: Literal["SCHEDULE", "TRIGGER"], plural: str, limit: int) -> None:
        """A 422 when the tenant already keeps `limit` records of `kind` (its policy's `max_<plural>`)."""
        if len(self.services.triggers.records(tenant, kind)) >= limit:
            raise InvalidRequest(
                f"tenant {tenant} keeps at most {limit} {plural} (its policy's max_{plural}): delete one first",
                errors=[{"loc": ["body"], "msg": f"too many {plural}", "type": f"max_{plural}"}],
            )

    def _check_trigger(self, body: Mapping[str, Any], policy: TenantPolicy) -> None:
        problems: list[dict[str, Any]] = []
        if body["type"] == "eventbridge":
            if body.get("event_pattern") is None:
                problems.append(
                    {"loc": ["body", "event_pattern"], "msg": "an eventbridge trigger needs one", "type": "missing"}
                )
            else:
                problems.extend(check_pattern(body["event_pattern"]))
        else:
            if body.get("event_pattern") is not None:
                problems.append(
                    {"loc": ["body", "event_pattern"], "msg": "only an eventbridge trigger has one", "type": "extra"}
                )
            if body.get("event_bus") is not None:
                problems.append(
                    {"loc": ["body", "event_bus"], "msg": "only an eventbridge trigger has one", "type": "extra"}
                )
        template_problems = check_template(body["input_template"])
        problems.extend(template_problems)
        if not template_problems:
            problems.extend(self._template_problems(body))
        problems.extend(self._policy_problems(body, policy))
        self._refuse(problems, "trigger")

    def _template_problems(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The template against the workflow's input model, its placeholders standing for sample values: for `s3`
        the object's own fields; for `eventbridge` a string, whose errors (a number expected there) are not counted
        (an event may well carry a number at that path)."""
        template = body["input_template"]
        if body["type"] == "s3":
            sample = self._object_input(body, sample_object_event())
            unknown: set[tuple[str | int, ...]] = set()
        else:
            sample = fill(template, SAMPLE_TEXT)
            unknown = {where for where, _ in placeholders(template)}
        try:
            self._job_request(body, sample)
        except ValidationError as error:
            located = _request_errors(error, "input_template")
            return [e for e in located if not any(tuple(e["loc"][2 : 2 + len(u)]) == u for u in unknown)]
        except TemplateError as error:
            return [{"loc": ["body", "input_template"], "msg": str(error), "type": "invalid_template"}]
        return []

    def _object_input(self, body: Mapping[str, Any], event: Mapping[str, Any]) -> Any:
        """An S3 trigger's job input: the template on the object's event, with the object (or the window's objects) as
        the workflow's `documents` unless the template gives them."""
        job_input = render(body["input_template"], event)
        spec = REGISTRY[body["workflow"]]
        takes_documents = "documents" in spec.input_model.model_fields
        if isinstance(job_input, dict) and takes_documents and not {"documents", "archive"} & set(job_input):
            job_input = {**job_input, "documents": event["documents"]}
        return job_input

    def _wire_rule(self, tenant_id: str, record: Mapping[str, Any]) -> None:
        with _wiring():
            self.services.trigger_wiring.put_rule(
                rule_name(self.services.settings.trigger_prefix, record["trigger_id"]),
                bus=record["event_bus"],
                pattern=record["event_pattern"],
                enabled=record["enabled"],
                target=record["target"],
                payload={"longhaul_trigger": FIRE_RULE, "tenant_id": tenant_id, "trigger_id": record["trigger_id"]},
            )

    def _trigger_view(self, tenant_id: str, record: Mapping[str, Any]) -> TriggerView:
        fields = {k: v for k, v in record.items() if k in TriggerView.model_fields}
        if record["type"] == "s3":
            fields["inbox"] = inbox_prefix(tenant_id, record["trigger_id"]) + record.get("prefix", "")
            fields["bucket"] = self.services.settings.bucket_name
        return TriggerView.model_validate(fields)

    def _trigger(self, principal: Principal, trigger_id: str) -> dict[str, Any]:
        record = self.services.triggers.get(principal.tenant_id, "TRIGGER", trigger_id)
        if record is None:
            raise NotFound(f"no trigger {trigger_id!r}")
        return record

    def list_triggers(self, principal: Principal) -> TriggerList:
        records = self.services.triggers.records(principal.tenant_id, "TRIGGER")
        return TriggerList(triggers=[self._trigger_view(principal.tenant_id, r) for r in records])

    def get_trigger(self, principal: Principal, trigger_id: str) -> TriggerView:
        return self._trigger_view(principal.tenant_id, self._trigger(principal, trigger_id))

    def update_trigger(self, principal: Principal, trigger_id: str, change: TriggerPatch) -> TriggerView:
        s = self.services
        record = self._trigger(principal, trigger_id)
        given = change.model_dump(mode="json", exclude_unset=True)
        if "event_pattern" in given and record["type"] != "eventbridge":
            raise InvalidRequest(
                "only an eventbridge trigger has an event pattern",
                errors=[
                    {"loc": ["body", "event_pattern"], "msg": "only an eventbridge trigger has one", "type": "extra"}
                ],
            )
        body = {**record, **given}
        self._check_trigger(body, s.budgets.recent_policy(principal.tenant_id))
        body["updated_at"] = iso(s.now())
        if body["type"] == "eventbridge":
            self._wire_rule(principal.tenant_id, body)
        s.triggers.replace(principal.tenant_id, "TRIGGER", trigger_id, body)
        return self._trigger_view(principal.tenant_id, body)

    def delete_trigger(self, principal: Principal, trigger_id: str) -> None:
        record = self._trigger(principal, trigger_id)
        if record["type"] == "eventbridge":
            name = rule_name(self.services.settings.trigger_prefix, trigger_id)
            with _wiring():
                self.services.trigger_wiring.delete_rule(name, bus=record["event_bus"])
        self.services.triggers.delete(principal.tenant_id, "TRIGGER", trigger_id)

    def inbox_upload(self, principal: Principal, request: UploadRequest) -> UploadTicket:
        """An upload ticket into an S3 trigger's inbox (`POST /v1/uploads` with `trigger_id`): the object it puts
        starts the trigger's job (the file's name is the document's)."""
        assert request.trigger_id is not None
        record = self.services.triggers.get(principal.tenant_id, "TRIGGER", request.trigger_id)
        if record is None or record["type"] != "s3":
            raise InvalidRequest(
                f"no S3 trigger {request.trigger_id!r}",
                errors=[
                    {"loc": ["body", "trigger_id"], "msg": "not one of the tenant's S3 triggers", "type": "unknown"}
                ],
            )
        folder = inbox_prefix(principal.tenant_id, request.trigger_id) + record.get("prefix", "")
        url = self.services.artifacts.presigned_put(
            f"{folder}{request.filename}", request.media_type, limits.UPLOAD_URL_SECONDS
        )
        return UploadTicket(
            upload_id=f"up_{uuid.uuid4().hex}",
            upload_url=url,
            headers={"Content-Type": request.media_type},
            expires_in=limits.UPLOAD_URL_SECONDS,
        )

    # ------------------------------------------------------------------ fires

    def _submit(
        self,
        kind: Literal["SCHEDULE", "TRIGGER"],
        tenant_id: str,
        record: Mapping[str, Any],
        job_input: Any,
        idempotency_key: str,
        trigger: JobTrigger,
    ) -> str | None:
        """Submit a fire's job as the tenant; the job's id, or None when it was refused (`last_error` says why). A
        refusal that a retry may cure (a rate limit, the engine unavailable) is raised: the fire is delivered again."""
        s = self.services
        record_id = trigger.id
        try:
            request = self._job_request(record, job_input)
            accepted, _ = self.jobs.submit(
                _tenant(tenant_id), request, idempotency_key, record.get("links_base") or "", trigger=trigger
            )
        except (RateLimited, Unavailable):
            raise
        except ValidationError as error:
            return self._refused(
                kind,
                tenant_id,
                record_id,
                "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in _request_errors(error, "input")),
            )
        except ApiProblem as problem:
            detail = problem.detail or problem.title
            if problem.errors:
                detail += ": " + "; ".join(
                    f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg')}" for e in problem.errors
                )
            return self._refused(kind, tenant_id, record_id, detail)
        s.triggers.note(
            tenant_id, kind, record_id, last_fired_at=iso(s.now()), last_job_id=accepted.job_id, last_error=None
        )
        return accepted.job_id

    def _refused(self, kind: Literal["SCHEDULE", "TRIGGER"], tenant_id: str, record_id: str, reason: str) -> str | None:
        """Keep why a fire started no job on its record (`last_error`); None: the job it did not start."""
        logger.warning("a fire started no job", extra={"record_id": record_id, "reason": reason[:500]})
        self.services.triggers.note(
            tenant_id, kind, record_id, last_fired_at=iso(self.services.now()), last_error=reason[:1000]
        )
        return None

    def fire_schedule(self, tenant_id: str, schedule_id: str, scheduled_time: str) -> str | None:
        """A schedule's fire at `scheduled_time` (Scheduler's `<aws.scheduler.scheduled-time>`): its job, once per
        scheduled minute however often the fire is delivered; None for a deleted or paused schedule."""
        record = self.services.triggers.get(tenant_id, "SCHEDULE", schedule_id)
        if record is None or not record.get("enabled"):
            logger.info("a fire of a deleted or paused schedule", extra={"schedule_id": schedule_id})
            return None
        try:
            scheduled_at = minute_of(parse_iso(scheduled_time))
        except ValueError:
            scheduled_at = minute_of(self.services.now())
        trigger = ScheduleTrigger(id=schedule_id, scheduled_at=scheduled_at)
        key = schedule_idempotency_key(schedule_id, scheduled_at)
        return self._submit("SCHEDULE", tenant_id, record, record["input"], key, trigger)

    def fire_event(self, tenant_id: str, trigger_id: str, event: Mapping[str, Any]) -> str | None:
        """An event an EventBridge trigger's rule matched: its job (one per event id)."""
        record = self.services.triggers.get(tenant_id, "TRIGGER", trigger_id)
        if record is None or not record.get("enabled") or record["type"] != "eventbridge":
            return None
        event_id = str(event.get("id") or "")
        trigger = EventTrigger(id=trigger_id, event_id=event_id or "-")
        try:
            job_input = render(record["input_template"], event)
        except TemplateError as error:
            return self._refused("TRIGGER", tenant_id, trigger_id, str(error))
        key = event_idempotency_key(trigger_id, event_id or json.dumps(event, sort_keys=True))
        return self._submit("TRIGGER", tenant_id, record, job_input, key, trigger)

    def object_created(self, bucket: str, key: str, etag: str, size: int, *, target: str) -> str | None:
        """An object created in an inbox (`inbox/<tenant>/<trigger>/…`): its job, or its place in a batch window (whose
        first object sets the timer that closes it). None for an object of no enabled S3 trigger."""
        s = self.services
        parts = key.split("/", 3)
        if len(parts) < 4 or f"{parts[0]}/" != schema.INBOX_PREFIX or not parts[3] or key.endswith("/"):
            return None
        tenant_id, trigger_id, rest = parts[1], parts[2], parts[3]
        record = s.triggers.get(tenant_id, "TRIGGER", trigger_id)
        if record is None or record["type"] != "s3" or not record.get("enabled"):
            return None
        if not rest.startswith(record.get("prefix", "")):
            return None
        name = PurePosixPath(rest).name
        media_type = MEDIA_TYPES.get(PurePosixPath(name).suffix.lower())
        if media_type is None:
            return self._refused(
                "TRIGGER", tenant_id, trigger_id, f"{name}: not a document (.pdf, .txt, .md, .markdown)"
            )
        upload_id = upload_id_for(bucket, key, etag)
        s.artifacts.copy(key, keys.upload_key(tenant_id, upload_id), media_type)
        document = {"name": _document_name(name), "upload_id": upload_id, "media_type": media_type}
        batch = record.get("batch_seconds")
        if batch:
            window, closes = s.triggers.join_window(tenant_id, trigger_id, upload_id, document, seconds=batch)
            if closes is not None:  # it opened the window: its timer closes it (one job for the window's objects)
                s.trigger_wiring.put_timer(
                    tenant_id,
                    f"{trigger_id}-{window}",
                    at=closes + timedelta(seconds=WINDOW_GRACE_SECONDS),
                    target=target,
                    payload={
                        "longhaul_trigger": FIRE_WINDOW,
                        "tenant_id": tenant_id,
                        "trigger_id": trigger_id,
                        "window": window,
                    },
                )
            return None
        event = {
            "bucket": bucket,
            "key": key,
            "name": name,
            "etag": etag.strip('"'),
            "size": size,
            "document": document,
            "documents": [document],
        }
        trigger = ObjectTrigger(id=trigger_id, key=key)
        try:
            job_input = self._object_input(record, event)
        except TemplateError as error:
            return self._refused("TRIGGER", tenant_id, trigger_id, str(error))
        return self._submit(
            "TRIGGER", tenant_id, record, job_input, object_idempotency_key(trigger_id, bucket, key, etag), trigger
        )

    def close_window(self, tenant_id: str, trigger_id: str, window: str) -> str | None:
        """A batch window's end: one job for its objects (once, however often the timer fires)."""
        s = self.services
        record = s.triggers.get(tenant_id, "TRIGGER", trigger_id)
        if record is None or record["type"] != "s3":
            return None
        documents = s.triggers.close_window(tenant_id, trigger_id, window)
        if not documents:
            return None
        first = documents[0]
        event = {
            "bucket": s.settings.bucket_name,
            "key": "",
            "name": first["name"],
            "etag": "",
            "size": 0,
            "document": first,
            "documents": documents,
            "window": window,
        }
        first_key = inbox_prefix(tenant_id, trigger_id) + record.get("prefix", "") + first["name"]
        trigger = ObjectTrigger(id=trigger_id, key=first_key, objects=len(documents))
        try:
            job_input = self._object_input(record, event)
        except TemplateError as error:
            return self._refused("TRIGGER", tenant_id, trigger_id, str(error))
        return self._submit(
            "TRIGGER", tenant_id, record, job_input, window_idempotency_key(trigger_id, window), trigger
        )


@contextmanager
def _wiring() -> Iterator[None]:
    """AWS's refusal of a schedule or rule as the request's 422 (at the field it is about), its unavailability as a
    503 (nothing is kept: the caller retries)."""
    try:
        yield
    except WiringRefused as refused:
        raise InvalidRequest(
            refused.reason, errors=[{"loc": ["body", refused.field], "msg": refused.reason, "type": "refused_by_aws"}]
        ) from None
    except WiringUnavailable as error:
        raise Unavailable(f"AWS did not take the schedule or rule now ({error}); retry") from None


def _document_name(name: str) -> str:
    """A document's name as citations show it (the contract's safe name: at most 200 characters)."""
    return name[:200]
