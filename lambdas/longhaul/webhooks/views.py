"""What operators see of a webhook (never its body's secrets: it has none; never the signing secret)."""

from datetime import datetime

from longhaul.core.model import Model
from longhaul.core.records import OutboxRecord


class WebhookView(Model):
    webhook_id: str
    job_id: str
    tenant_id: str
    event: str
    status: str
    attempts: int
    created_at: datetime
    last_attempt_at: datetime | None = None
    last_error: str | None = None
    redeliveries: int = 0

    @classmethod
    def of(cls, record: OutboxRecord) -> "WebhookView":
        return cls.model_validate(record.model_dump(exclude={"url", "body", "delivered_at"}))


class WebhookList(Model):
    webhooks: list[WebhookView]
