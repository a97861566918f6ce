"""Standard Webhooks signatures (https://www.standardwebhooks.com): sign a delivery, and the reference verifier.

A delivery carries `webhook-id` (the same on every retry of one event: receivers deduplicate by it),
`webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature`: space-separated `v1,<base64>` entries,
each the HMAC-SHA256 of `"{id}.{timestamp}.{body}"` under one of the tenant's secrets. A secret is written
`whsec_<base64 key>`; the key is the base64-decoded part. While a rotated-out secret is in its grace period, both
secrets sign, so a receiver that still has the old one keeps verifying.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

PREFIX = "whsec_"
VERSION = "v1"
TOLERANCE_SECONDS = 300
ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER = "webhook-id", "webhook-timestamp", "webhook-signature"


class VerificationFailed(ValueError):
    """The delivery is not authentic or not timely; the message says which check failed."""


def new_secret() -> str:
    """A fresh `whsec_` secret (24 random bytes)."""
    return PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret."""
    if not secret.startswith(PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        return base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret is whsec_ followed by base64") from None


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,<base64>` signature of the delivery."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"{VERSION},{base64.b64encode(digest).decode()}"


def sign(secrets_in_use: Sequence[str], webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one delivery attempt, signed with every secret in use (current first)."""
    if not secrets_in_use:
        raise ValueError("no webhook secret to sign with")
    return {
        ID_HEADER: webhook_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: " ".join(signature(s, webhook_id, timestamp, body) for s in secrets_in_use),
    }


def verify(
    body: bytes,
    headers: Mapping[str, str],
    secret: str | Sequence[str],
    *,
    tolerance_seconds: int = TOLERANCE_SECONDS,
    now: datetime | None = None,
) -> str:
    """Verify a delivery as a receiver should; returns its `webhook-id` (deduplicate by it) or raises
    `VerificationFailed`. The raw body is verified, byte for byte, before it is parsed."""
    lowered = {k.lower(): v for k, v in headers.items()}
    webhook_id, timestamp_text, signatures = (lowered.get(h) for h in (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER))
    if not webhook_id or not timestamp_text or not signatures:
        raise VerificationFailed("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(timestamp_text)
    except ValueError:
        raise VerificationFailed("webhook-timestamp is not an integer") from None
    current = int((now or datetime.now(UTC)).timestamp())
    if timestamp < current - tolerance_seconds:
        raise VerificationFailed("webhook-timestamp is too old")
    if timestamp > current + tolerance_seconds:
        raise VerificationFailed("webhook-timestamp is in the future")
    candidates = [secret] if isinstance(secret, str) else list(secret)
    expected = {signature(s, webhook_id, timestamp, body).encode() for s in candidates}
    for entry in signatures.split():
        version, _, _ = entry.partition(",")
        if version == VERSION and any(hmac.compare_digest(entry.encode(), e) for e in expected):
            return webhook_id
    raise VerificationFailed("no signature matches (tampered body, wrong secret, or another id or timestamp)")
