"""Listing jobs: a tenant's (by creation), those in a status (by last update), or every tenant's (by creation, on
a keys-only index), newest first; whole (`list_jobs`, for the sweep) or in pages with opaque cursors (`page_jobs`),
narrowed by a `JobFilter`; and the jobs an operator's bulk action names (`find_jobs`: per status, by last update).

A filter's time range is a key condition on the index's sort key (a tenant's and every job's listing sort by
creation; a status' by last update, which is never before creation); its other fields are checked on each job read,
so a page may take more than one query, and reads at most `MAX_QUERIES_PER_PAGE` of them: a page can then come back
short with a cursor to go on from."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from longhaul.core import schema
from longhaul.core.clock import iso
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import TransientError
from longhaul.core.records import Job
from longhaul.storage.dynamo import backoff, plain

BATCH_GET_MAX = 100
BATCH_GET_TRIES = 25
# A filtered page reads at most this many index pages (each up to `QUERY_PAGE_ITEMS` items) before it answers what it
# found, with a cursor to go on from: a rare match never makes one request read a whole partition.
MAX_QUERIES_PER_PAGE = 20
QUERY_PAGE_ITEMS = 200
# The words of a job's request kept for search (`search_text`, lower case).
SEARCH_TEXT_MAX = 1000
# Above this on every sort key: `<iso time>#<job id>` up to a time includes that millisecond's jobs.
_AFTER_ANY_ID = "#\uffff"


class JobFilter(NamedTuple):  # (the API imports it: a NamedTuple, not a dataclass, for its cold start)
    """What a listing keeps. `q` finds a job by a prefix of its id or a word of its request (its question);
    `escalated` by the presence of its `escalation`; `failed_step` and `error_kind` by its error."""

    workflow: str | None = None
    sla_class: str | None = None
    created_since: datetime | None = None
    created_until: datetime | None = None
    q: str | None = None
    escalated: bool | None = None
    failed_step: str | None = None
    error_kind: str | None = None
    updated_since: datetime | None = None
    updated_until: datetime | None = None

    @property
    def narrows(self) -> bool:
        return any(value is not None for value in self)

    def keeps(self, item: Mapping[str, Any]) -> bool:
        """Whether the job item (its stored attributes) passes every field given."""
        found = item.get("error")
        error: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        checks = (
            self.workflow is None or item.get("workflow") == self.workflow,
            self.sla_class is None or item.get("sla_class", "standard") == self.sla_class,
            self.created_since is None or str(item.get("created_at", "")) >= iso(self.created_since),
            self.created_until is None or str(item.get("created_at", "")) <= iso(self.created_until),
            self.updated_since is None or str(item.get("updated_at", "")) >= iso(self.updated_since),
            self.updated_until is None or str(item.get("updated_at", "")) <= iso(self.updated_until),
            self.escalated is None or bool(item.get("escalation")) == self.escalated,
            self.failed_step is None or error.get("step") == self.failed_step,
            self.error_kind is None or error.get("kind") == self.error_kind,
            self.q is None or _found(self.q, item),
        )
        return all(checks)


def _found(q: str, item: Mapping[str, Any]) -> bool:
    """A prefix of the job's id, or every word of `q` among the words of its request."""
    needle = q.strip().lower()
    if not needle:
        return True
    if str(item.get("job_id", "")).lower().startswith(needle):
        return True
    words = set(search_words(str(item.get("search_text", ""))))
    return all(word in words for word in search_words(needle))


def search_words(text: str) -> list[str]:
    return [w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split() if w]


# A request's fields that hold a document's content, not words people search by.
CONTENT_FIELDS = frozenset({"text", "content", "data", "body", "base64"})


def strings_of(data: Any, depth: int = 3) -> list[str]:
    """The strings of a request's JSON (its question, names, references; not inline documents' content), to a small
    depth."""
    if isinstance(data, str):
        return [data]
    if depth == 0:
        return []
    if isinstance(data, Mapping):
        return [s for k, v in data.items() if k not in CONTENT_FIELDS for s in strings_of(v, depth - 1)]
    if isinstance(data, list):
        return [s for v in data[:50] for s in strings_of(v, depth - 1)]
    return []


def search_text(values: Iterable[str]) -> str | None:
    """What a job keeps of its request's text for search: its distinct words, in order, lower case, bounded."""
    seen: dict[str, None] = {}
    for value in values:
        for word in search_words(value):
            seen.setdefault(word, None)
    text = " ".join(seen)
    if len(text) > SEARCH_TEXT_MAX:  # whole words only
        text = text[: SEARCH_TEXT_MAX + 1].rsplit(" ", 1)[0]
    return text or None


class BadCursor(ValueError):
    """A listing cursor that this listing did not hand out."""


def _encode_cursor(index: str, item: Mapping[str, Any]) -> str:
    pk_name, sk_name = schema.INDEXES[index]
    key = {name: str(item[name]) for name in (schema.PK, schema.SK, pk_name, sk_name)}
    return base64.urlsafe_b64encode(json.dumps({"index": index, "key": key}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, index: str, partition: str) -> dict[str, str]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise BadCursor("not a cursor of this listing") from None
    pk_name, sk_name = schema.INDEXES[index]
    key = decoded.get("key") if isinstance(decoded, dict) else None
    if (
        decoded.get("index") != index
        or not isinstance(key, dict)
        or set(key) != {schema.PK, schema.SK, pk_name, sk_name}
        or not all(isinstance(v, str) for v in key.values())
        or key[pk_name] != partition  # a cursor never leads into another tenant's (or status') partition
    ):
        raise BadCursor("not a cursor of this listing")
    return key


def _sort_range(index: str, narrow: JobFilter | None) -> tuple[str | None, str | None]:
    """The bounds of a filter's time range on an index's sort key (None: unbounded on that side)."""
    if narrow is None:
        return None, None
    if index == schema.BY_STATE:  # by last update: a job created since a time was updated since then too
        since = narrow.updated_since or narrow.created_since
        if narrow.updated_since and narrow.created_since:
            since = max(narrow.updated_since, narrow.created_since)
        until = narrow.updated_until
        return (iso(since) if since else None), (iso(until) if until else None)
    low = iso(narrow.created_since) if narrow.created_since else None
    high = iso(narrow.created_until) + _AFTER_ANY_ID if narrow.created_until else None
    return low, high


def _kept(item: Mapping[str, Any], keep: JobFilter | None, status: JobStatus | None) -> bool:
    if status is not None and item.get("status") != status.value:
        return False
    return keep is None or keep.keeps(item)


def _shape(tenant_id: str | None, status: JobStatus | None) -> tuple[str, str]:
    """(index, partition) of a listing."""
    if tenant_id is not None:
        return schema.BY_TENANT, schema.tenant_partition(tenant_id)
    if status is not None:
        return schema.BY_STATE, schema.status_partition(status.value)
    return schema.BY_CREATED, schema.ALL_JOBS_PARTITION


class JobListing:
    def __init__(self, table: Any) -> None:
        self.table = table
        self.client = table.meta.client

    def _query(
        self,
        tenant_id: str | None,
        status: JobStatus | None,
        *,
        oldest_first: bool,
        narrow: JobFilter | None = None,
    ) -> dict[str, Any]:
        index, partition = _shape(tenant_id, status)
        pk_name, sk_name = schema.INDEXES[index]
        kwargs: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": f"{pk_name} = :pk",
            "ExpressionAttributeValues": {":pk": partition},
            "ScanIndexForward": oldest_first,
        }
        low, high = _sort_range(index, narrow)
        if low is not None or high is not None:
            kwargs["KeyConditionExpression"] += f" AND {sk_name} BETWEEN :low AND :high"
            kwargs["ExpressionAttributeValues"] |= {":low": low or "0", ":high": high or "9999"}
        if tenant_id is not None and status is not None:
            kwargs["FilterExpression"] = "#status = :status"
            kwargs["ExpressionAttributeNames"] = {"#status": "status"}
            kwargs["ExpressionAttributeValues"][":status"] = status.value
        return kwargs

    def list_jobs(
        self,
        *,
        tenant_id: str | None = None,
        status: JobStatus | None = None,
        limit: int | None = 50,
        oldest_first: bool = False,
    ) -> list[Job]:
        """Jobs of a listing, newest first unless `oldest_first`; `limit=None` reads them all."""
        kwargs = self._query(tenant_id, status, oldest_first=oldest_first)
        found: list[dict[str, Any]] = []
        while limit is None or len(found) < limit:
            response = self.table.query(**kwargs)
            found.extend(response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return self._jobs(kwargs["IndexName"], found if limit is None else found[:limit])

    def page_jobs(
        self,
        *,
        tenant_id: str | None = None,
        status: JobStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        narrow: JobFilter | None = None,
    ) -> tuple[list[Job], str | None]:
        """One page of jobs, newest first, and the cursor of the next page (None at the end). A cursor only resumes
        the listing that handed it out. With `narrow`, only the jobs it keeps; the page may come back short (see the
        module's note), never with a job twice or a job skipped."""
        index, partition = _shape(tenant_id, status)
        kwargs = self._query(tenant_id, status, oldest_first=False, narrow=narrow)
        keep = narrow if narrow is not None and narrow.narrows else None
        filtered = keep is not None or (tenant_id is not None and status is not None)
        kwargs["Limit"] = max(limit, QUERY_PAGE_ITEMS) if filtered else limit
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = _decode_cursor(cursor, index, partition)
        # the status on a tenant's partition is checked here instead, with the rest of the filter
        kwargs.pop("FilterExpression", None)
        kwargs.pop("ExpressionAttributeNames", None)
        kwargs["ExpressionAttributeValues"].pop(":status", None)
        page: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (index keys, job item)
        for _ in range(MAX_QUERIES_PER_PAGE):
            response = self.table.query(**kwargs)
            keys = response.get("Items", [])
            items = self._items(index, keys)
            for position, (key, item) in enumerate(zip(keys, items, strict=True)):
                if item is None or not _kept(item, keep, status):
                    continue
                page.append((key, item))
                if len(page) == limit:
                    more = position < len(keys) - 1 or "LastEvaluatedKey" in response
                    return self._page(page), _encode_cursor(index, key) if more else None
            if "LastEvaluatedKey" not in response:
                return self._page(page), None
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        # read enough for one request: the jobs found so far, and where to go on from
        return self._page(page), _encode_cursor(index, kwargs["ExclusiveStartKey"])

    def find_jobs(
        self, statuses: Iterable[JobStatus], *, tenant_id: str | None = None, narrow: JobFilter, limit: int
    ) -> tuple[list[Job], bool]:
        """Jobs in any of `statuses` that `narrow` keeps (its `updated_since`/`updated_until` as key conditions on
        each status' listing), most recently changed first; at most `limit`, and whether more matched."""
        found: list[dict[str, Any]] = []
        for status in statuses:
            kwargs = self._query(None, status, oldest_first=False, narrow=narrow)
            while True:
                response = self.table.query(**kwargs)
                found += [
                    plain(i)
                    for i in response.get("Items", [])
                    if narrow.keeps(i) and (tenant_id is None or i.get("tenant_id") == tenant_id)
                ]
                if "LastEvaluatedKey" not in response or len(found) > limit:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        found.sort(key=lambda i: str(i.get("updated_at", "")), reverse=True)
        return [Job.model_validate(i) for i in found[:limit]], len(found) > limit

    def _items(self, index: str, keys: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """The job items of a query's items, in their order (None: deleted meanwhile)."""
        if index not in schema.KEYS_ONLY_INDEXES:
            return [plain(k) for k in keys]
        by_pk = {i[schema.PK]: i for i in self._get_jobs([str(k[schema.PK]) for k in keys])}
        return [plain(by_pk[k[schema.PK]]) if k[schema.PK] in by_pk else None for k in keys]

    @staticmethod
    def _page(page: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[Job]:
        return [Job.model_validate(item) for _, item in page]

    def _jobs(self, index: str, items: list[dict[str, Any]]) -> list[Job]:
        if index in schema.KEYS_ONLY_INDEXES:  # read the jobs themselves
            items = self._get_jobs([str(k[schema.PK]) for k in items])
        return [Job.model_validate(plain(i)) for i in items]

    def _get_jobs(self, partitions: list[str]) -> list[dict[str, Any]]:
        """The job items of these partitions, in that order (a job deleted meanwhile is left out)."""
        by_pk: dict[str, dict[str, Any]] = {}
        for start in range(0, len(partitions), BATCH_GET_MAX):
            keys = [{schema.PK: pk, schema.SK: schema.JOB_SK} for pk in partitions[start : start + BATCH_GET_MAX]]
            request: dict[str, Any] = {self.table.name: {"Keys": keys}}
            for tries in range(BATCH_GET_TRIES):
                response = self.client.batch_get_item(RequestItems=request)  # the resource's client: plain values
                by_pk.update({i[schema.PK]: i for i in response["Responses"].get(self.table.name, [])})
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                backoff(tries)
            else:
                raise TransientError("the job listing stayed throttled; retry")
        return [by_pk[pk] for pk in partitions if pk in by_pk]
