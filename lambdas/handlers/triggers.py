"""A schedule's or trigger's fire, as the API function receives it (the function `POST /v1/schedules` and
`POST /v1/triggers` name as their target, so a fire has the grants a submission has):

- `{"longhaul_trigger": "schedule", "tenant_id", "schedule_id", "scheduled_time"}` from EventBridge Scheduler;
- `{"longhaul_trigger": "rule", "tenant_id", "trigger_id", "event": {…}}` from an EventBridge trigger's rule (its
  input transformer wraps the matching event);
- `{"longhaul_trigger": "window", "tenant_id", "trigger_id", "window"}` from a batch window's one-time timer;
- an S3 `Object Created` event (EventBridge notifications of the artifacts bucket, the stack's inbox rule).

A refusal a retry may cure (the tenant's rate, the engine) fails the invocation, so Scheduler or EventBridge delivers
the fire again (the same Idempotency-Key: still one job); any other is kept on the record as `last_error`.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from longhaul.api.triggers import FIRE_RULE, FIRE_SCHEDULE, FIRE_WINDOW, TriggerService
from longhaul.core import correlation
from longhaul.core.observability import logger
from longhaul.services import services


def fire(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    kind = event.get("longhaul_trigger")
    service = TriggerService(services())
    with correlation.bound(correlation.new_id()):
        if kind == FIRE_SCHEDULE:
            job_id = service.fire_schedule(
                str(event["tenant_id"]), str(event["schedule_id"]), str(event.get("scheduled_time") or "")
            )
        elif kind == FIRE_RULE:
            job_id = service.fire_event(str(event["tenant_id"]), str(event["trigger_id"]), event.get("event") or {})
        elif kind == FIRE_WINDOW:
            job_id = service.close_window(str(event["tenant_id"]), str(event["trigger_id"]), str(event["window"]))
        elif event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created":
            detail = event.get("detail") or {}
            obj = detail.get("object") or {}
            job_id = service.object_created(
                str((detail.get("bucket") or {}).get("name") or ""),
                str(obj.get("key") or ""),
                str(obj.get("etag") or obj.get("eTag") or ""),  # (moto writes `eTag`)
                int(obj.get("size") or 0),
                target=context.invoked_function_arn,
            )
        else:
            logger.warning("an event that is neither a request nor a fire", extra={"keys": sorted(event)[:20]})
            return {"job_id": None}
    logger.info("fire", extra={"fire": kind or "s3", "job_id": job_id})
    return {"job_id": job_id}
