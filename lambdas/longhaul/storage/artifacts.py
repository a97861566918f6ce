"""Artifact store (S3). Keys are deterministic per (job, step, item), so a retried step overwrites, never adds.

uploads/<tenant>/<upload id>            client uploads (presigned PUT), expire
work/<job>/input.json                   the accepted request
work/<job>/<step>/<name>                intermediate artifacts, expire (a grouped fan-out's may be one per group)
work/<job>/calls/prompt-<sha256>.json   each model call's exact request, under its hash (the ledger's prompt hash)
work/<job>/calls/response-<sha256>.json each model call's raw response, under the hash of its text; expire
results/<job>/result.json|result.md     published results, kept
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from botocore.exceptions import ClientError
from pydantic import BaseModel

from longhaul.core.schema import RESULTS_PREFIX, UPLOADS_PREFIX, WORK_PREFIX

# Objects a step reads at once with `get_json_many` (within the S3 client's connection pool, `adapters/aws.py`).
READS_AT_ONCE = 16
T = TypeVar("T")


def _each_at_once(read: Callable[[str], T], keys: Sequence[str], at_once: int) -> list[T]:
    """`read` of each key, in their order, `at_once` at a time. Each read runs in a copy of the caller's context (a
    function's environment and its request meter are context variables); the first failure is raised."""
    if len(keys) < 2:
        return [read(key) for key in keys]
    with ThreadPoolExecutor(max_workers=min(at_once, len(keys))) as pool:
        reads = [pool.submit(contextvars.copy_context().run, read, key) for key in keys]
        return [done.result() for done in reads]


def input_key(job_id: str, version: int = 1) -> str:
    """The job's input document; a fixed input (`longhaul.operations.repair`) is a new version beside the first."""
    return f"{WORK_PREFIX}{job_id}/input.json" if version == 1 else f"{WORK_PREFIX}{job_id}/input.v{version}.json"


def submitted_input_key(job_id: str, version: int) -> str:
    """A fixed input as the operator made it: the workflow's input model, what the next fix patches."""
    return f"{WORK_PREFIX}{job_id}/input.v{version}.submitted.json"


def work_key(job_id: str, step: str, name: str) -> str:
    return f"{WORK_PREFIX}{job_id}/{step}/{name}"


def prompt_key(job_id: str, prompt_hash: str) -> str:
    return f"{WORK_PREFIX}{job_id}/calls/prompt-{prompt_hash}.json"


def response_key(job_id: str, response_hash: str) -> str:
    return f"{WORK_PREFIX}{job_id}/calls/response-{response_hash}.json"


def result_key(job_id: str, extension: str = "json") -> str:
    return f"{RESULTS_PREFIX}{job_id}/result.{extension}"


def upload_key(tenant_id: str, upload_id: str) -> str:
    return f"{UPLOADS_PREFIX}{tenant_id}/{upload_id}"


class ArtifactStore:
    def __init__(self, s3: Any, bucket: str, *, presign_client: Any | None = None) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.presign_client = presign_client or s3

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        return key

    def copy(self, source: str, key: str, content_type: str) -> str:
        """A copy of the object at `source` at `key` (server side: no bytes pass through the function)."""
        self.s3.copy_object(
            Bucket=self.bucket,
            Key=key,
            CopySource={"Bucket": self.bucket, "Key": source},
            ContentType=content_type,
            MetadataDirective="REPLACE",
        )
        return key

    def put_json(self, key: str, value: BaseModel | dict[str, Any] | list[Any]) -> str:
        body = value.model_dump_json() if isinstance(value, BaseModel) else json.dumps(value, ensure_ascii=False)
        return self.put_bytes(key, body.encode(), "application/json")

    def get_bytes(self, key: str) -> bytes:
        data: bytes = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes `start` to `end` (inclusive, as HTTP ranges count) of an object: one ranged GET, so a reader of a
        large object (an archive's directory, one of its members) fetches only what it needs."""
        if start < 0 or end < start:
            raise ValueError(f"invalid byte range {start}-{end}")
        data: bytes = self.s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end}")["Body"].read()
        return data

    def size(self, key: str) -> int | None:
        """The object's length in bytes, or None when there is no such object."""
        head = self.head(key)
        return None if head is None else int(head.get("ContentLength", 0))

    def get_json(self, key: str) -> Any:
        return json.loads(self.get_bytes(key))

    def get_json_many(self, keys: Sequence[str], *, at_once: int = READS_AT_ONCE) -> list[Any]:
        """The JSON objects at `keys`, in their order, read `at_once` at a time: a step that reads one object per
        document (5,000 in the largest job) waits for about `len(keys) / at_once` round trips, not `len(keys)`."""
        return _each_at_once(self.get_json, keys, at_once)

    def head_many(self, keys: Sequence[str], *, at_once: int = READS_AT_ONCE) -> list[dict[str, Any] | None]:
        """`head` of each of `keys`, in their order, `at_once` at a time."""
        return _each_at_once(self.head, keys, at_once)

    def head(self, key: str) -> dict[str, Any] | None:
        try:
            head: dict[str, Any] = self.s3.head_object(Bucket=self.bucket, Key=key)
            return head
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def presigned_put(self, key: str, content_type: str, expires_in: int) -> str:
        return str(
            self.presign_client.generate_presigned_url(
                "put_object",
                Params={"Bucket": self.bucket, "Key": key, "ContentType": content_type},
                ExpiresIn=expires_in,
            )
        )

    def presigned_get(self, key: str, expires_in: int) -> str:
        return str(
            self.presign_client.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_in
            )
        )
