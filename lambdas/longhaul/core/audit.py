"""The audit trail's contract: one entry per action of an operator, administrator or reviewer (and a tenant's own
changes to its resources), hash-chained so that an edited, removed or inserted entry is detectable.

Each entry holds the hash of the entry before it (`prev_hash`) and its own `hash`: the SHA-256 of its canonical JSON
(sorted keys, no spaces, UTF-8) without the `hash` field. Entries are numbered by a gapless `seq` from 1. Verifying
the chain recomputes every hash and checks each link and each number; the command line (`longhaul ops audit verify`)
does it on the pages the API hands out, with its own copy of `entry_hash`, so it trusts nothing the server computed.
"""

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from longhaul.core.model import Model

GENESIS_HASH = "0" * 64  # the `prev_hash` of the first entry

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The reads that disclose a job's or a tenant's content: kept prompts and responses, policies, a job's input, a
# tenant's memory, a job's trace (its spans may hold content), a review's draft.
SENSITIVE_READS = re.compile(
    r"^GET (/v1/ops/.*/(prompts|responses)/\{[^}]+\}|/v1/ops/tenants/\{tenant_id\}/(policy|memory)"
    r"|/v1/ops/jobs/\{job_id\}/(input|trace)|/v1/reviews/\{review_id\})$"
)
# A tenant's own requests that are its traffic, not its administration: not recorded.
TENANT_TRAFFIC = re.compile(r"^POST (/v1/jobs|/v1/uploads|/v1/jobs/\{job_id\}/signals/\{name\})$")


def audited(role: str, action: str) -> bool:
    """Whether a request (`action`: method and route template) of a caller with `role` is recorded."""
    method = action.partition(" ")[0]
    if method in READ_METHODS:
        return SENSITIVE_READS.match(action) is not None
    return role != "tenant" or TENANT_TRAFFIC.match(action) is None


class AuditActor(Model):
    """Who acted: the tenant of the key or token, its role, the key's id (a prefix of its hash) or a token's
    subject."""

    tenant_id: str | None = None
    role: str
    key_id: str | None = None
    subject: str | None = None


class AuditEntry(Model):
    """One action, as recorded. `action` is the route's method and template (`POST /v1/ops/jobs/{job_id}/replay`) or
    an administrative command's name (`admin create-key`); `target` what it acted on (the request's path); `tenant_id`
    the tenant whose resource it was (null for a platform-wide action)."""

    seq: int = Field(ge=1, description="Position in the chain: 1, 2, 3, … without gaps.")
    at: str = Field(description="When the action was recorded (ISO 8601, UTC).")
    actor: AuditActor
    actor_id: str = Field(description="The actor in one string (the `actor` filter): subject, key id, or role:tenant.")
    action: str
    target: str
    tenant_id: str | None = None
    job_id: str | None = None
    request_id: str | None = None
    source_ip: str | None = None
    outcome: int = Field(description="The HTTP status the action was answered with (0 for a command's success).")
    before_digest: str | None = Field(default=None, description="SHA-256 of what the action was given or replaced.")
    after_digest: str | None = Field(default=None, description="SHA-256 of what the action answered or stored.")
    prev_hash: str = Field(description="The `hash` of the entry before (64 zeros for the first).")
    hash: str = Field(description="SHA-256 of this entry's canonical JSON without `hash`.")


class AuditPage(Model):
    entries: list[AuditEntry]
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page; null at the end.")


class AuditVerification(Model):
    """What a walk of the chain found: `ok` when every entry's hash and link hold and no number is missing."""

    ok: bool
    entries: int
    last_seq: int = 0
    last_hash: str = GENESIS_HASH
    problems: list[str] = Field(default_factory=list)


def digest(value: Any) -> str | None:
    """SHA-256 (hex) of bytes, text or a JSON-able value; None for None."""
    if value is None:
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode()
    else:
        data = canonical(value)
    return hashlib.sha256(data).hexdigest()


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(fields: Mapping[str, Any]) -> str:
    """The hash of an entry: its canonical JSON without `hash` (None-valued fields included, as null)."""
    return hashlib.sha256(canonical({k: v for k, v in fields.items() if k != "hash"})).hexdigest()


def verify(entries: Iterable[Mapping[str, Any]]) -> AuditVerification:
    """Walk a chain from its first entry, in `seq` order: every hash recomputed, every link and number checked."""
    problems: list[str] = []
    count, last_seq, last_hash = 0, 0, GENESIS_HASH
    for entry in entries:
        count += 1
        seq = int(entry["seq"])
        if seq != last_seq + 1:
            problems.append(
                f"entries {last_seq + 1}-{seq - 1} are missing" if seq > last_seq + 1 else f"seq {seq} out of order"
            )
        if entry["prev_hash"] != last_hash:
            problems.append(f"entry {seq} does not link to the entry before it")
        if entry_hash(entry) != entry["hash"]:
            problems.append(f"entry {seq} was changed after it was recorded")
        last_seq, last_hash = seq, str(entry["hash"])
    return AuditVerification(ok=not problems, entries=count, last_seq=last_seq, last_hash=last_hash, problems=problems)
