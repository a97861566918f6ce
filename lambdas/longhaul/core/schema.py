"""The storage schema in one place: item keys, index names, the TTL attribute and artifact prefixes.

Imported by the storage construct (`stacks/storage.py`), the stores and the artifact store, and by the unit tests'
tables (built from the synthesized template), so the three cannot drift.

Items:  JOB#<id>/JOB  ·  JOB#<id>/STEP#<step>[#<item>]  ·  JOB#<id>/EVENT#<seq>  ·  JOB#<id>/CHARGE#<id>
        JOB#<id>/DEADLETTER#<step>#<item>  ·  IDEMP#<tenant>#<key>/IDEMP  ·  APIKEY#<sha256>/APIKEY
        TENANT#<id>/TENANT (the tenant's record)  ·  TENANT#<id>/POLICY  ·  TENANT#<id>/USAGE#<yyyy-mm-dd>
        BREAKER#<provider>#<model>/BREAKER
        ROUTELIMIT#<route>/SLOT#<epoch slot> (the route's calls and tokens in one 10-second slot; TTL'd) ·
        ROUTELIMIT#<route>/ALLOWANCE (the share of its limits a provider's 429 left it, and since when)
        REVIEW#<id>/REVIEW  ·  REVIEW#<id>/TOKEN (the task token: no index key, never projected anywhere)
        OUTBOX#<webhook id>/OUTBOX
        HISTORY#<workflow>/ETA (the step durations of its recent completed jobs, which ETAs come from)
        JOB#<id>/EFFECT#<operation id> (a tool's side effect: intent, outcome, compensation)
        JOB#<id>/SAGA#<attempt> (an attempt's effects to compensate)
        JOB#<id>/BUS#<ordinal> (an event for the EventBridge bus, written with the change it announces)
        MEMORY#<tenant>/EPISODE#<subject>#<time>#<id> · MEMORY#<tenant>/FACT#<subject>#<id> (a tenant's memory)
        STREAM#<job id>/SEQ (the job's stream counter) · STREAM#<job id>/REC#<id> (a stream record: coalesced model
        output, TTL'd; apart from the job's partition and its event log on purpose)
        RETENTION/<retain until>#<job id> (the retention calendar: the sweep erases a job once its time has come)
        JOB#<id>/JOB with `erased_at`: an erased job's tombstone (its usage and cost, `job_erased`; nothing else)
        ADMISSION/GLOBAL · TENANT#<id>/ADMISSION (jobs in flight and waiting) · TENANT#<id>/RATE (its last minute's
        submissions, per second; TTL'd)
Indexes: by_tenant (gsi1pk TENANT#<tenant>, gsi1sk <created_at>#<job>) lists a tenant's jobs by time;
         by_tenant also lists a tenant's reviews by status (gsi1pk REVIEWS#<tenant>#<status>, gsi1sk <since>#<id>);
         by_state (gsi2pk STATUS#<status> | DEADLETTER, gsi2sk <time>) lists jobs by status and dead letters,
         and webhooks by delivery status (gsi2pk OUTBOX#<status>), and sagas by status (gsi2pk SAGA#<status>),
         and erasures not finished yet (gsi2pk ERASURE#pending, gsi2sk <erased_at>: the sweep finishes them);
         and the bus's events not yet published (gsi2pk BUS#pending);
         by_created (gsi3pk JOBS, gsi3sk <created_at>#<job>, keys only) lists every job by time.
"""

from __future__ import annotations

PK, SK = "pk", "sk"
TTL_ATTRIBUTE = "expires_at"
BY_TENANT, GSI1_PK, GSI1_SK = "by_tenant", "gsi1pk", "gsi1sk"
BY_STATE, GSI2_PK, GSI2_SK = "by_state", "gsi2pk", "gsi2sk"
BY_CREATED, GSI3_PK, GSI3_SK = "by_created", "gsi3pk", "gsi3sk"
INDEXES = {BY_TENANT: (GSI1_PK, GSI1_SK), BY_STATE: (GSI2_PK, GSI2_SK), BY_CREATED: (GSI3_PK, GSI3_SK)}
KEYS_ONLY_INDEXES = frozenset({BY_CREATED})
# Every job in one partition of a keys-only index: written once per job (status updates do not touch it), so it
# bounds submissions to the index's write rate per partition (about 1,000 a second), not the job updates.
ALL_JOBS_PARTITION = "JOBS"

JOB_SK = "JOB"
STEP_PREFIX = "STEP#"
ITEMS_DONE_PREFIX = "ITEMSDONE#"
EVENT_PREFIX = "EVENT#"
CHARGE_PREFIX = "CHARGE#"
DEAD_LETTER_PREFIX = "DEADLETTER#"
DEAD_LETTER_PARTITION = "DEADLETTER"
EVENT_SEQ_DIGITS = 10

REVIEW_SK = "REVIEW"
REVIEW_TOKEN_SK = "TOKEN"
PAUSE_TOKEN_SK = "TOKEN#pause"  # in the job's partition: the task token of its pause wait (server side only)
SIGNAL_PREFIX = "SIGNAL#"  # in the job's partition: a signal sent to the job (its body, received or consumed)
WAIT_TOKEN_PREFIX = "TOKEN#wait#"  # in the job's partition: a signal wait's or a segment timer's task token
OUTBOX_SK = "OUTBOX"
BUS_PREFIX = "BUS#"  # in the job's partition: an event for the bus, in the job's order (`storage.bus`)
EFFECT_PREFIX = "EFFECT#"
SAGA_PREFIX = "SAGA#"
EPISODE_PREFIX = "EPISODE#"
STREAM_SEQ_SK = "SEQ"
STREAM_RECORD_PREFIX = "REC#"
FACT_PREFIX = "FACT#"
BATCH_PREFIX = "BATCH#"  # in the job's partition: a step's batch inference job (`guardrails.batch`)
OPEN_BATCHES_PARTITION = "BATCHES"  # the batches not yet resumed, by name: what the scheduled check reads

# Artifact prefixes: intermediate ones expire (bucket lifecycle), results are kept.
UPLOADS_PREFIX = "uploads/"
WORK_PREFIX = "work/"
RESULTS_PREFIX = "results/"
# An S3 trigger's inbox: `inbox/<tenant>/<trigger>/…`; each object created there starts a job (`api/triggers.py`).
INBOX_PREFIX = "inbox/"
MAP_RESULTS_PREFIX = "map-results/"  # a Distributed Map's ResultWriter output (the tally reads checkpoints instead)
INTERMEDIATE_PREFIXES = (WORK_PREFIX, UPLOADS_PREFIX, MAP_RESULTS_PREFIX, INBOX_PREFIX)
INTERMEDIATE_EXPIRY_DAYS = 14


RETENTION_PARTITION = "RETENTION"
ERASURE_PENDING = "ERASURE#pending"  # (by_state) an erasure begun and not finished: its tombstone says how far


def retention_key(retain_until: str, job_id: str) -> dict[str, str]:
    """The job's entry in the retention calendar (one partition, sorted by when retention ends)."""
    return {PK: RETENTION_PARTITION, SK: f"{retain_until}#{job_id}"}


def job_pk(job_id: str) -> str:
    return f"JOB#{job_id}"


def job_key(job_id: str) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: JOB_SK}


def pause_token_key(job_id: str) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: PAUSE_TOKEN_SK}


def signal_key(job_id: str, name: str) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: f"{SIGNAL_PREFIX}{name}"}


def wait_token_key(job_id: str, wait: str) -> dict[str, str]:
    """`wait`: `signal:<name>` or `segment:<name>`."""
    return {PK: job_pk(job_id), SK: f"{WAIT_TOKEN_PREFIX}{wait}"}


def step_sk(step: str, item: int | None) -> str:
    return f"{STEP_PREFIX}{step}" if item is None else f"{STEP_PREFIX}{step}#{item:06d}"


def event_sk(seq: int) -> str:
    return f"{EVENT_PREFIX}{seq:0{EVENT_SEQ_DIGITS}d}"


def charge_key(job_id: str, charge_id: str) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: f"{CHARGE_PREFIX}{charge_id}"}


def dead_letter_key(job_id: str, step: str, item: int | None) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: f"{DEAD_LETTER_PREFIX}{step}#{'' if item is None else f'{item:06d}'}"}


def tenant_key(tenant_id: str) -> dict[str, str]:
    """The tenant's record: written when a key is made for the tenant (it is how a tenant comes to exist)."""
    return {PK: f"TENANT#{tenant_id}", SK: "TENANT"}


def tenant_policy_key(tenant_id: str) -> dict[str, str]:
    return {PK: f"TENANT#{tenant_id}", SK: "POLICY"}


def tenant_usage_key(tenant_id: str, day: str) -> dict[str, str]:
    """A tenant's spending on one UTC day (`yyyy-mm-dd`)."""
    return {PK: f"TENANT#{tenant_id}", SK: f"USAGE#{day}"}


def admission_global_key() -> dict[str, str]:
    """The platform's jobs in flight and waiting (one item: every admission decision conditions on it)."""
    return {PK: "ADMISSION", SK: "GLOBAL"}


def admission_tenant_key(tenant_id: str) -> dict[str, str]:
    """A tenant's jobs in flight and waiting."""
    return {PK: f"TENANT#{tenant_id}", SK: "ADMISSION"}


def submission_rate_key(tenant_id: str) -> dict[str, str]:
    """A tenant's accepted submissions of the last minute, counted per second (the sliding window)."""
    return {PK: f"TENANT#{tenant_id}", SK: "RATE"}


def breaker_key(provider: str, model_id: str) -> dict[str, str]:
    return {PK: f"BREAKER#{provider}#{model_id}", SK: "BREAKER"}


def route_slot_key(route: str, slot: int) -> dict[str, str]:
    return {PK: f"ROUTELIMIT#{route}", SK: f"SLOT#{slot}"}


def route_allowance_key(route: str) -> dict[str, str]:
    return {PK: f"ROUTELIMIT#{route}", SK: "ALLOWANCE"}


def idempotency_key(tenant_id: str, key: str) -> dict[str, str]:
    return {PK: f"IDEMP#{tenant_id}#{key}", SK: "IDEMP"}


def api_key_key(key_hash: str) -> dict[str, str]:
    return {PK: f"APIKEY#{key_hash}", SK: "APIKEY"}


def tenant_partition(tenant_id: str) -> str:
    return f"TENANT#{tenant_id}"


def status_partition(status: str) -> str:
    return f"STATUS#{status}"


def review_key(review_id: str) -> dict[str, str]:
    return {PK: f"REVIEW#{review_id}", SK: REVIEW_SK}


def review_token_key(review_id: str) -> dict[str, str]:
    return {PK: f"REVIEW#{review_id}", SK: REVIEW_TOKEN_SK}


def reviews_partition(tenant_id: str, status: str) -> str:
    return f"REVIEWS#{tenant_id}#{status}"


def outbox_key(webhook_id: str) -> dict[str, str]:
    return {PK: f"OUTBOX#{webhook_id}", SK: OUTBOX_SK}


HISTORY_SK = "ETA"


def history_key(workflow: str) -> dict[str, str]:
    """A workflow's recent completed jobs' step durations (`storage/history.py`)."""
    return {PK: f"HISTORY#{workflow}", SK: HISTORY_SK}


def outbox_partition(status: str) -> str:
    return f"OUTBOX#{status}"


def bus_key(job_id: str, ordinal: int) -> dict[str, str]:
    """The job's `ordinal`-th event for the bus (1-based, in the order they were written)."""
    return {PK: job_pk(job_id), SK: f"{BUS_PREFIX}{ordinal:08d}"}


def bus_partition(state: str) -> str:
    return f"BUS#{state}"


def effect_key(job_id: str, operation_id: str) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: f"{EFFECT_PREFIX}{operation_id}"}


def saga_key(job_id: str, attempt: int) -> dict[str, str]:
    return {PK: job_pk(job_id), SK: f"{SAGA_PREFIX}{attempt:04d}"}


def saga_partition(status: str) -> str:
    return f"SAGA#{status}"


def memory_pk(tenant_id: str) -> str:
    """A tenant's memory: one partition per tenant, so no query can reach another tenant's."""
    return f"MEMORY#{tenant_id}"


def episode_sk(subject_key: str, recorded_at: str, memory_id: str) -> str:
    return f"{EPISODE_PREFIX}{subject_key}#{recorded_at}#{memory_id}"


def fact_sk(subject_key: str, memory_id: str) -> str:
    return f"{FACT_PREFIX}{subject_key}#{memory_id}"


def stream_pk(job_id: str) -> str:
    """A job's live output (`core.streams`): its own partition, so neither the job's item nor its log is touched."""
    return f"STREAM#{job_id}"


def stream_record_sk(record_id: int) -> str:
    return f"{STREAM_RECORD_PREFIX}{record_id:0{EVENT_SEQ_DIGITS}d}"
