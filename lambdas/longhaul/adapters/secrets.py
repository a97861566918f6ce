"""Per-tenant webhook secrets in AWS Secrets Manager: one secret per tenant, `<prefix><tenant>`.

Its value is `{"current": "whsec_…", "previous": "whsec_…", "previous_until": "<ISO time>"}` (or just the
`whsec_…` string). `rotate` makes a new current secret and keeps the old one signing until the grace period ends,
so receivers can switch at their pace. Locally, `LONGHAUL_LOCAL_WEBHOOK_SECRETS` seeds the same secrets into the
in-memory Secrets Manager.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core.clock import Clock, SystemClock, iso

DEFAULT_GRACE = timedelta(hours=24)


class SecretsManagerWebhookSecrets:
    def __init__(self, client: Any, prefix: str, *, clock: Clock | None = None) -> None:
        self._client = client
        self._prefix = prefix
        self._clock = clock or SystemClock()

    def name(self, tenant_id: str) -> str:
        return f"{self._prefix}{tenant_id}"

    def _value(self, tenant_id: str) -> dict[str, Any] | None:
        try:
            text = self._client.get_secret_value(SecretId=self.name(tenant_id))["SecretString"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return None
            raise
        if text.startswith("whsec_"):
            return {"current": text}
        value: dict[str, Any] = json.loads(text)
        return value

    def signing_secrets(self, tenant_id: str) -> list[str]:
        value = self._value(tenant_id)
        if not value:
            return []
        found = [str(value["current"])]
        previous, until = value.get("previous"), value.get("previous_until")
        if previous and until and self._clock.now() < datetime.fromisoformat(str(until).replace("Z", "+00:00")):
            found.append(str(previous))
        return found

    def put(self, tenant_id: str, secret: str) -> None:
        """Set the tenant's secret (no grace period for an older one): seeding and first use."""
        self._write(tenant_id, {"current": secret})

    def rotate(self, tenant_id: str, *, secret: str, grace: timedelta = DEFAULT_GRACE) -> str:
        """`secret` (made by `longhaul.webhooks.signing.new_secret`) becomes the current one; the old one keeps
        signing for `grace`. Returns the new secret."""
        fresh = secret
        old = self._value(tenant_id)
        value: dict[str, Any] = {"current": fresh}
        if old:
            value.update(previous=old["current"], previous_until=iso(self._clock.now() + grace))
        self._write(tenant_id, value)
        return fresh

    def _write(self, tenant_id: str, value: dict[str, Any]) -> None:
        text = json.dumps(value)
        try:
            self._client.put_secret_value(SecretId=self.name(tenant_id), SecretString=text)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            self._client.create_secret(Name=self.name(tenant_id), SecretString=text)
