"""Listing jobs: a tenant's (by creation), those in a status (by last update), or every tenant's (by creation, on
a keys-only index), newest first; whole (`list_jobs`, for the sweep) or in pages with opaque cursors (`page_jobs`)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from longhaul.core import schema
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import TransientError
from longhaul.core.records import Job
from longhaul.storage.dynamo import backoff, plain

BATCH_GET_MAX = 100
BATCH_GET_TRIES = 25


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

    def _query(self, tenant_id: str | None, status: JobStatus | None, *, oldest_first: bool) -> dict[str, Any]:
        index, partition = _shape(tenant_id, status)
        kwargs: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": f"{schema.INDEXES[index][0]} = :pk",
            "ExpressionAttributeValues": {":pk": partition},
            "ScanIndexForward": oldest_first,
        }
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
    ) -> tuple[list[Job], str | None]:
        """One page of jobs, newest first, and the cursor of the next page (None at the end). A cursor only resumes
        the listing that handed it out."""
        index, partition = _shape(tenant_id, status)
        kwargs = {**self._query(tenant_id, status, oldest_first=False), "Limit": limit}
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = _decode_cursor(cursor, index, partition)
        found: list[dict[str, Any]] = []
        while True:
            response = self.table.query(**kwargs)
            found.extend(response.get("Items", []))
            more = "LastEvaluatedKey" in response or len(found) > limit
            if len(found) >= limit or "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        page = found[:limit]
        after = _encode_cursor(index, page[-1]) if more and page else None
        return self._jobs(index, page), after

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
