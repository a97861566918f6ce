"""Webhook delivery use cases: one attempt (sign, send pinned to a checked address, record), the dead letter once
the retries are exhausted, the relay of webhooks whose delivery was never started, and an operator's redelivery.

The delivery state machine (`stacks/webhooks.py`) runs `deliver` with Retry on `WebhookDeliveryFailed`
(exponential backoff, full jitter, over hours) and catches the rest into `dead_letter` and its own queue. Nothing
here changes a job's status: only its `callback` view.
"""

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any

from opentelemetry.semconv.attributes.http_attributes import HTTP_RESPONSE_STATUS_CODE
from pydantic import Field, ValidationError

from longhaul.core import correlation, tracing
from longhaul.core.addresses import Resolver, UnsafeCallback, check_url, system_resolver
from longhaul.core.clock import iso
from longhaul.core.errors import WebhookDeliveryFailed, WebhookUndeliverable
from longhaul.core.model import Model
from longhaul.core.observability import bind_job, emit, logger
from longhaul.core.ports import EngineUnavailable
from longhaul.core.records import OutboxRecord
from longhaul.services import Services
from longhaul.webhooks import http
from longhaul.webhooks.signing import sign

RELAY_AFTER = timedelta(minutes=1)  # a pending webhook older than this was not started after its commit


class DeliveryEvent(Model):
    webhook_id: Annotated[str, Field(min_length=1, max_length=200)]
    job_id: Annotated[str, Field(min_length=1, max_length=200)]
    error: str | None = None
    cause: str | None = None


class WebhookDeadLetter(Model):
    """The message in the webhooks' dead-letter queue (the URL's origin only: a query may hold a receiver's token)."""

    webhook_id: str
    job_id: str
    tenant_id: str
    event: str
    origin: str
    attempts: int
    last_error: str | None
    failed_at: str
    redeliver: dict[str, str]


class PoisonDelivery(Model):
    """The dead letter of a delivery that carried no webhook of the outbox (a malformed input, an unknown id):
    nothing to redeliver, only what it was, for an operator."""

    poison: bool = True
    webhook_id: str | None
    job_id: str | None
    reason: str
    failed_at: str


def _event(raw_event: Any) -> DeliveryEvent:
    """The delivery's input, or `WebhookUndeliverable` (dead at once: no retry can make it valid)."""
    try:
        return DeliveryEvent.model_validate(raw_event)
    except ValidationError as invalid:
        raise WebhookUndeliverable(f"not a webhook delivery: {invalid.error_count()} invalid field(s)") from None


def _record(services: Services, webhook_id: str) -> OutboxRecord:
    record = services.outbox.get(webhook_id)
    if record is None:
        raise WebhookUndeliverable(f"no webhook {webhook_id} in the outbox")
    return record


def deliver(raw_event: Mapping[str, Any], services: Services, *, resolver: Resolver | None = None) -> dict[str, Any]:
    """One attempt; raises `WebhookDeliveryFailed` (retried) or `WebhookUndeliverable` (dead at once, as is a delivery
    whose input names no webhook of the outbox: poison is never retried)."""
    event = _event(raw_event)
    outbox, record = services.outbox, _record(services, event.webhook_id)
    bind_job(record.job_id, record.correlation_id, attempt=record.attempts + 1)  # every line of the attempt
    if record.status in ("delivered", "dead"):  # a late or repeated attempt: the webhook is settled
        return {"status": record.status, "attempts": record.attempts}
    secrets = services.webhook_secrets.signing_secrets(record.tenant_id) if services.webhook_secrets else []
    if not secrets:
        outbox.attempted(record, delivered=False, error="the tenant has no webhook secret")
        raise WebhookUndeliverable(f"tenant {record.tenant_id} has no webhook secret")
    try:
        target = check_url(record.url, allowlist=services.settings.callback_allowlist)
    except UnsafeCallback as unsafe:
        outbox.attempted(record, delivered=False, error=f"refused: {unsafe}")
        raise WebhookUndeliverable(f"refused: {unsafe}") from None
    body = record.body.encode()
    headers = {
        **correlation.outgoing_headers(record.correlation_id),
        **sign(secrets, record.webhook_id, int(services.now().timestamp()), body),
    }
    attributes = {
        tracing.JOB_ID: record.job_id,
        "longhaul.webhook_id": record.webhook_id,
        "longhaul.webhook_event": record.event,
        tracing.ATTEMPT: record.attempts + 1,
    }
    try:
        with (
            tracing.job_trace(record.correlation_id, "deliver webhook", {tracing.JOB_ID: record.job_id}),
            tracing.span("webhook delivery", attributes) as span,
        ):
            delivered = http.post(target, body, headers, resolver=resolver or system_resolver)
            if span is not None:
                span.set_attribute(HTTP_RESPONSE_STATUS_CODE, delivered.status)
    except http.DeliveryFailed as failed:
        outbox.attempted(record, delivered=False, error=str(failed))
        emit("WebhookAttemptsFailed", event=record.event)
        raise WebhookDeliveryFailed(str(failed)) from None
    outbox.attempted(record, delivered=True)
    emit("WebhooksDelivered", event=record.event)
    logger.info("webhook delivered", extra={"webhook_id": record.webhook_id, "status": delivered.status})
    return {"status": "delivered", "attempts": record.attempts + 1}


def dead_letter(raw_event: Mapping[str, Any], services: Services) -> dict[str, Any]:
    """The retries are exhausted (or the webhook cannot be delivered): mark it dead; the message for its queue.

    A delivery that carried no webhook of the outbox is poison: logged once, here, and dead-lettered as what it was
    (`PoisonDelivery`), so that the execution always ends in the queue and never fails in its own failure path."""
    try:
        event = DeliveryEvent.model_validate(raw_event)
        record = services.outbox.get(event.webhook_id)
    except ValidationError:
        event, record = None, None
    if event is None or record is None:
        fields = raw_event if isinstance(raw_event, Mapping) else {}
        reason = "not a webhook delivery" if event is None else f"no webhook {event.webhook_id} in the outbox"
        logger.warning("poison webhook delivery dead-lettered", extra={"reason": reason})
        emit("WebhooksDead", event="poison")
        return PoisonDelivery(
            webhook_id=_text(fields.get("webhook_id")),
            job_id=_text(fields.get("job_id")),
            reason=reason,
            failed_at=iso(services.now()),
        ).model_dump(mode="json")
    bind_job(record.job_id, record.correlation_id, attempt=record.attempts)
    services.outbox.dead(record, event.error if not record.last_error else None)
    fresh = services.outbox.get(record.webhook_id) or record
    emit("WebhooksDead", event=record.event)
    target_origin = _origin(record.url)
    return WebhookDeadLetter(
        webhook_id=record.webhook_id,
        job_id=record.job_id,
        tenant_id=record.tenant_id,
        event=record.event,
        origin=target_origin,
        attempts=fresh.attempts,
        last_error=fresh.last_error,
        failed_at=iso(services.now()),
        redeliver={"method": "POST", "path": f"/v1/ops/webhooks/{record.webhook_id}/redeliver"},
    ).model_dump(mode="json")


def _text(value: Any) -> str | None:
    """A field of a poison input, kept only when it is a short string (the rest of it is not trusted)."""
    return value[:200] if isinstance(value, str) else None


def _origin(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


def relay_pending(services: Services) -> int:
    """Start the delivery of webhooks still pending a while after their commit (their start was lost)."""
    if services.dispatch is None:
        return 0
    started = 0
    for record in services.outbox.by_status("pending", before=iso(services.now() - RELAY_AFTER), limit=200):
        name = record.webhook_id if not record.redeliveries else f"{record.webhook_id}-r{record.redeliveries}"
        try:
            services.dispatch.start(record.webhook_id, record.job_id, name=name)
            started += 1
        except EngineUnavailable:
            logger.warning("webhook relay failed; next sweep", extra={"webhook_id": record.webhook_id})
    return started


def dead_webhooks(services: Services, *, limit: int) -> list[OutboxRecord]:
    return services.outbox.by_status("dead", limit=limit)


def redeliver(services: Services, webhook_id: str) -> OutboxRecord | None:
    """An operator's replay of a dead webhook: the same id and body, a new run of retries. None if unknown."""
    record = services.outbox.get(webhook_id)
    if record is None or services.dispatch is None:
        return None
    fresh = services.outbox.requeue(record)
    services.dispatch.start(fresh.webhook_id, fresh.job_id, name=f"{fresh.webhook_id}-r{fresh.redeliveries}")
    return fresh
