"""Every limit of the API, stated once: the contracts, the API function, the job service and the local front
door read them from here, and the limits page (docs/operating/limits.md) and the OpenAPI descriptions quote them."""

from __future__ import annotations

MIB = 1024 * 1024

# Request bodies. API Gateway refuses anything above its own hard limit before the function runs; below it, the
# API function answers 413 above the platform's limit (`LONGHAUL_MAX_BODY_BYTES`, this default).
API_GATEWAY_MAX_BODY_BYTES = 10 * MIB
MAX_BODY_BYTES = 1 * MIB

# A job's input.
MAX_DOCUMENTS = 5000
MAX_QUESTION_CHARS = 2000
MIN_QUESTION_CHARS = 3
MAX_PASSAGES = 100
DEFAULT_PASSAGES = 16
MAX_PASSAGES_PER_GROUP = 20
DEFAULT_PASSAGES_PER_GROUP = 4
MIN_DEADLINE_SECONDS = 60
MAX_DEADLINE_SECONDS = 24 * 3600
DEFAULT_DEADLINE_SECONDS = 2 * 3600
# A review's deadline (the escalation ladder's length). Bounded by the execution's own 24 h bound, with the rest of
# the job's time: a job waiting for review gets its deadline pushed to the review's deadline plus this margin.
MIN_REVIEW_DEADLINE_SECONDS = 10
MAX_REVIEW_DEADLINE_SECONDS = 12 * 3600
DEFAULT_REVIEW_DEADLINE_SECONDS = 4 * 3600
# Document analysis: OCR and indexing together, at most this long (`LONGHAUL_OCR_INDEX_SEGMENT_SECONDS` overrides).
OCR_INDEX_SEGMENT_SECONDS = 1200
REVIEW_DEADLINE_MARGIN_SECONDS = 900
# A manual completion's review (kind `complete`) shows this deadline; no ladder runs on it (the job's execution is
# over): it stays pending until decided, or until the job is replayed (then a decision is a 409).
MANUAL_COMPLETION_DEADLINE_SECONDS = 7 * 24 * 3600

# Fan-outs. A list of at most INLINE_MAP_MAX_ITEMS items travels in the state and runs as an inline Map; a longer one
# stays in its S3 manifest (batches of MAP_BATCH_ITEMS items) and runs as a Distributed Map, one child execution per
# batch, so no execution's history (25,000 events) or payload (256 KB) comes near its limit at MAX_DOCUMENTS.
INLINE_MAP_MAX_ITEMS = 40
MAP_BATCH_ITEMS = 50
# A grouped fan-out (`longhaul.engine.items`): one invocation runs a group of consecutive items, at most
# ITEM_GROUP_MAX_ITEMS of them (a Distributed Map's child runs one group) and ITEM_GROUP_MAX_WEIGHT of weight (for
# documents: bytes to parse, so a group's parse stays well inside its step's timeout); an item of unknown weight (an
# upload, whose size the step would have to ask S3 for) runs alone.
ITEM_GROUP_MAX_ITEMS = MAP_BATCH_ITEMS
ITEM_GROUP_MAX_WEIGHT = 8 * 1024 * 1024

# Indexing. Documents are chunked and indexed in batches of consecutive documents (one fan-out item each, one BM25
# index each): a batch closes at INDEX_BATCH_MAX_DOCUMENTS documents or INDEX_BATCH_MAX_CHARS characters of text
# (a page still to be read by OCR counts as INDEX_BATCH_OCR_PAGE_CHARS), whichever comes first; a larger document is
# a batch of its own. Sized so a batch stays far inside its function's limits (`build_index`: 60 s, 1,769 MB): about
# 250 small documents or 5 million characters read, chunked and indexed take seconds and a few hundred MB at most.
INDEX_BATCH_MAX_DOCUMENTS = 250
INDEX_BATCH_MAX_CHARS = 5_000_000
INDEX_BATCH_OCR_PAGE_CHARS = 4_000

# Document and upload names: shown in citations, never used in storage keys.
MAX_NAME_CHARS = 128

# Uploads (checked when a job references the upload: a presigned PUT cannot bound its size).
MAX_UPLOAD_BYTES = 50 * MIB
# A submission's inline texts up to this size travel inside its input document (one object written, not two); every
# step that reads the input reads them too, so the bound keeps that cheap. Larger ones are an object of their own.
INLINE_TEXTS_IN_INPUT_MAX_BYTES = 64 * 1024
UPLOAD_URL_SECONDS = 900

# Result downloads (`GET /v1/jobs/{id}/result/download`): a presigned GET lives this long unless asked for less, at
# most the tenant policy's `download_ttl_seconds`, which is at most SigV4's own limit (7 days). The result route
# answers a result over the inline limit (`LONGHAUL_RESULT_INLINE_MAX_BYTES`, default below a Lambda response's 6 MB
# and API Gateway's 10 MB) by reference to its download.
DOWNLOAD_URL_SECONDS = 900
MAX_DOWNLOAD_TTL_SECONDS = 7 * 24 * 3600
RESULT_INLINE_MAX_BYTES = 5 * MIB

# ZIP archives of documents (`input.archive`), checked at submission from the archive's central directory alone.
# An archive is at most this large, and its documents expand to at most this much in all (each one at most
# MAX_UPLOAD_BYTES, like an upload); at most MAX_DOCUMENTS of them.
MAX_ARCHIVE_BYTES = 2 * 1024 * MIB
MAX_ARCHIVE_EXPANDED_BYTES = 2 * 1024 * MIB
# Names inside an archive may have folders (`contracts/2024/a.pdf`, the document's name): a longer bound.
MAX_ARCHIVE_NAME_CHARS = 255
# A member above ARCHIVE_RATIO_FLOOR_BYTES that expands more than this many times is a bomb (deflate's own ceiling
# is about 1032:1; real documents stay far below 100:1).
MAX_ARCHIVE_RATIO = 100
ARCHIVE_RATIO_FLOOR_BYTES = 1 * MIB
# The central directory is read in one ranged GET: bounded so a hostile archive cannot make the API function read
# (and parse) megabytes of entries it will refuse anyway.
MAX_ARCHIVE_DIRECTORY_BYTES = 8 * MIB

# Agent steps. A job may tighten its agent steps' limits (`"agent": {"max_turns", "max_tool_calls"}`) within its
# tenant's ceilings; each is at most these.
MAX_AGENT_TURNS = 100
MAX_AGENT_TOOL_CALLS = 5000
# A tool call's bound (`Tool.timeout_seconds`): past it the call fails `timeout` and the turn goes on. A tool's bound
# stays below the Lambda timeout of the agent steps that offer it (checked when the spec is built).
DEFAULT_TOOL_TIMEOUT_SECONDS = 30
MAX_TOOL_TIMEOUT_SECONDS = 600
# Instructions added to a running job's prompts (`PATCH /v1/jobs/{job_id}`).
MAX_INSTRUCTIONS_CHARS = 4000
# Memory: a long-term fact is used as is until `valid_until` (this many days after it was recorded or last
# re-verified, unless it says otherwise); after that it is re-checked against its source before use.
DEFAULT_FACT_VALID_DAYS = 7
MAX_FACT_VALID_DAYS = 365

# Retention (a tenant policy's `retention_days`): how long a job's data is kept after its submission, then erased
# (`longhaul.operations.erasure`). The artifacts bucket's lifecycle expires results after the longest of these (a
# backstop for the sweep, `stacks/storage.py`).
RETENTION_DAYS_DEFAULT = 30
RETENTION_DAYS_MIN = 1
RETENTION_DAYS_MAX = 3650
# How long after its retention ended a job's items and objects are removed by DynamoDB TTL and the bucket's lifecycle
# if the sweep did not erase them first (they expire lazily; the sweep erases at once and leaves the tombstone).
RETENTION_BACKSTOP_DAYS = 2

# Budgets and quotas: the largest token figure (a job's budget, a tenant's ceiling or daily allowance) and the largest
# rate or count of a tenant's policy (submissions a minute, jobs in flight). Far above any real need, and far below
# what the ledger's integers and a DynamoDB number (38 digits) hold.
MAX_TOKENS = 10**12
MAX_RATE = 1_000_000

# Request bodies as JSON: nesting deeper than this is refused (no request of the API needs more than a dozen levels;
# DynamoDB stores 32), and so is an integer of more digits (a DynamoDB number has 38).
MAX_JSON_DEPTH = 32
MAX_JSON_DIGITS = 38

# Pages.
MAX_PAGE_SIZE = 200
MAX_OPS_PAGE_SIZE = 500

# The events long-poll (`GET …/events?wait=`): the longest a request may wait for a new event. The API function waits
# inside API Gateway's 29 s integration timeout (the function's own timeout), with room for the reads around it.
MAX_EVENTS_WAIT_SECONDS = 20

ACCEPTED_MEDIA_TYPE = "application/json"


def body_too_large(limit: int = MAX_BODY_BYTES) -> str:
    """The 413 detail, word for word the same wherever a body is refused for its size."""
    return f"request bodies are limited to {limit} bytes ({limit / MIB:g} MiB); upload large documents instead"


# The house retry policy of a step's transient failures (`state_machines/policy.py` applies it; the steps compute a
# retry's latest time from it, for the job's wait state): exponential backoff from the interval, full jitter, capped.
RETRY_INTERVAL_SECONDS = 1
RETRY_BACKOFF_RATE = 2.0
RETRY_MAX_ATTEMPTS = 3
RETRY_MAX_DELAY_SECONDS = 30


# A step that failed `rate-limited` (a route's shared limit had no room within its bounded wait, a provider's 429, a
# budget held by calls in flight) is retried longer and further apart: what it waits for frees at a known pace (a
# route limited to N calls a minute lets a queue of M through in M/N minutes), so each attempt, with its in-step wait
# (`LONGHAUL_ROUTE_LIMIT_WAIT_SECONDS`), takes its turn. 5 s doubling, capped at 60 s, eight times: with 20-second
# in-step waits, five to eight minutes of a saturated route before the step fails for good (full jitter: the backoffs
# add up to between 0 and 315 s).
RATE_LIMITED_RETRY_INTERVAL_SECONDS = 5
RATE_LIMITED_RETRY_MAX_ATTEMPTS = 8
RATE_LIMITED_RETRY_MAX_DELAY_SECONDS = 60


def retry_delay_seconds(retries_before: int, *, rate_limited: bool = False) -> float | None:
    """The longest wait before the next attempt of a step that has been retried `retries_before` times (full jitter
    waits anything up to it); None when no retry is left. `rate_limited`: the step's failure was `rate-limited`."""
    if rate_limited:
        if retries_before >= RATE_LIMITED_RETRY_MAX_ATTEMPTS:
            return None
        delay = RATE_LIMITED_RETRY_INTERVAL_SECONDS * RETRY_BACKOFF_RATE**retries_before
        return float(min(delay, RATE_LIMITED_RETRY_MAX_DELAY_SECONDS))
    if retries_before >= RETRY_MAX_ATTEMPTS:
        return None
    return float(min(RETRY_INTERVAL_SECONDS * RETRY_BACKOFF_RATE**retries_before, RETRY_MAX_DELAY_SECONDS))
