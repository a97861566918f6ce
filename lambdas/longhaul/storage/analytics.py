"""The analytics export's storage: its Parquet objects under the artifacts bucket's `analytics/` prefix, its day files
under `analytics-daily/` (written only over the version read: two runs never lose each other's rows), the jobs that
finished since the export last ran (the `by_state` index), the export's watermark, and the report's local copy of the
day files it reads.

Items: ANALYTICS/WATERMARK (`at`: the start of the last export run that finished).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.analytics import ANALYTICS_PREFIX, DAILY_PREFIX, TABLES, columns, day_key
from longhaul.core.contracts import TERMINAL_STATUSES

PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


class PartitionNotRegistered(Exception):
    """Glue refused a partition (other than one that exists)."""


WATERMARK_KEY = {schema.PK: "ANALYTICS", schema.SK: "WATERMARK"}
#: The most jobs the watermark remembers as exported within its overlap (more: the next run exports them again).
MAX_RECENT = 2_000


class Watermark(NamedTuple):
    """Where the export's runs got to, and the jobs exported within the overlap before it, with the change exported:
    a run reads from `at` less the overlap (a write committed late) but skips those, unless they changed again."""

    at: str | None
    recent: dict[str, str]


class AnalyticsStore:
    def __init__(self, table: Any, s3: Any, bucket: str, *, glue: Any = None, database: str | None = None) -> None:
        self.table = table
        self.s3 = s3
        self.bucket = bucket
        self.glue = glue
        self.database = database
        self._registered: set[tuple[str, ...]] = set()

    # --- the export -----------------------------------------------------------------------------------------

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/vnd.apache.parquet")

    def register(self, table: str, *, day: str, tenant_id: str, workflow: str) -> None:
        """Register the partition in the Glue table (once per process; one that exists is left as it is). Without a
        database (the local platform), nothing to do: DuckDB reads the partitions from the paths."""
        key = (table, day, tenant_id, workflow)
        if self.glue is None or not self.database or key in self._registered:
            return
        location = f"s3://{self.bucket}/{ANALYTICS_PREFIX}{table}/dt={day}/tenant_id={tenant_id}/workflow={workflow}/"
        answer = self.glue.batch_create_partition(
            DatabaseName=self.database,
            TableName=table,
            PartitionInputList=[
                {
                    "Values": [day, tenant_id, workflow],
                    "StorageDescriptor": {
                        "Location": location,
                        "InputFormat": PARQUET_INPUT,
                        "OutputFormat": PARQUET_OUTPUT,
                        "SerdeInfo": {"SerializationLibrary": PARQUET_SERDE},
                        "Columns": [{"Name": n, "Type": t} for n, t in columns(table)],
                    },
                }
            ],
        )
        errors = [e for e in answer.get("Errors", []) if e["ErrorDetail"]["ErrorCode"] != "AlreadyExistsException"]
        if errors:
            raise PartitionNotRegistered(f"{table} {key[1:]}: {errors[0]['ErrorDetail']}")
        self._registered.add(key)

    def finished_since(self, since: str | None) -> list[tuple[str, str]]:
        """(when its record changed, job id) of the finished jobs whose record changed after `since` (ISO time;
        None: every finished job), oldest change first."""
        found: list[tuple[str, str]] = []
        for status in sorted(s.value for s in TERMINAL_STATUSES):
            condition = Key(schema.GSI2_PK).eq(schema.status_partition(status))
            if since is not None:
                condition = condition & Key(schema.GSI2_SK).gt(since)
            kwargs: dict[str, Any] = {
                "IndexName": schema.BY_STATE,
                "KeyConditionExpression": condition,
                "ProjectionExpression": "#id, #sk",
                "ExpressionAttributeNames": {"#id": "job_id", "#sk": schema.GSI2_SK},
            }
            while True:
                page = self.table.query(**kwargs)
                found.extend((str(i[schema.GSI2_SK]), str(i["job_id"])) for i in page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(found)

    def watermark(self) -> Watermark:
        item = self.table.get_item(Key=WATERMARK_KEY, ConsistentRead=True).get("Item")
        if not item:
            return Watermark(None, {})
        return Watermark(str(item["at"]), {str(k): str(v) for k, v in item.get("recent", {}).items()})

    def set_watermark(self, at: str, recent: Mapping[str, str] | None = None) -> None:
        """Moves the watermark forward only (two runs that overlap never move it back); `recent` is what the run
        exported within the overlap before `at` ({job id: the change it exported}), which the next run skips."""
        kept = dict(recent or {}) if len(recent or {}) <= MAX_RECENT else {}
        with contextlib.suppress(self.table.meta.client.exceptions.ConditionalCheckFailedException):
            self.table.put_item(
                Item={**WATERMARK_KEY, "at": at, "recent": kept},
                ConditionExpression="attribute_not_exists(#at) OR #at < :at",
                ExpressionAttributeNames={"#at": "at"},
                ExpressionAttributeValues={":at": at},
            )

    # --- the day files -------------------------------------------------------------------------------------

    def day_file(self, table: str, day: str, into: Path) -> str | None:
        """Bring the day file of `table` into `into`; its ETag (None, and `into` absent, when there is none yet)."""
        try:
            answer = self.s3.get_object(Bucket=self.bucket, Key=day_key(table, day))
        except self.s3.exceptions.NoSuchKey:
            into.unlink(missing_ok=True)
            return None
        into.write_bytes(answer["Body"].read())
        return str(answer["ETag"])

    def put_day_file(self, table: str, day: str, source: Path, etag: str | None) -> bool:
        """Write the day file if it is still the one read (`etag`; None: still absent); False when another run
        wrote it since (read it again and fold again)."""
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            self.s3.put_object(
                Bucket=self.bucket,
                Key=day_key(table, day),
                Body=source.read_bytes(),
                ContentType="application/vnd.apache.parquet",
                **condition,
            )
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"):
                return False
            raise
        return True

    def sync_days(self, cache: Path, days: Iterable[str]) -> int:
        """Bring the day files of `days` into `cache` (`<table>/<day>.parquet`), each kept with its ETag: a file whose
        ETag has not changed is not read again; one whose object is gone is removed. The number of objects read."""
        wanted = set(days)
        read = 0
        for table in TABLES:
            listed = {
                str(o["Key"]).removeprefix(f"{DAILY_PREFIX}{table}/dt=").removesuffix(".parquet"): str(o["ETag"])
                for o in self._objects(f"{DAILY_PREFIX}{table}/")
            }
            folder = cache / table
            folder.mkdir(parents=True, exist_ok=True)
            for day in wanted:
                path, mark = folder / f"{day}.parquet", folder / f"{day}.etag"
                etag = listed.get(day)
                if etag is None:
                    path.unlink(missing_ok=True)
                    mark.unlink(missing_ok=True)
                    continue
                if path.exists() and mark.exists() and mark.read_text() == etag:
                    continue
                partial = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.part")
                answer = self.s3.get_object(Bucket=self.bucket, Key=day_key(table, day))
                partial.write_bytes(answer["Body"].read())
                partial.replace(path)
                mark.write_text(str(answer["ETag"]))
                read += 1
        return read

    def _objects(self, prefix: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        while True:
            page = self.s3.list_objects_v2(**kwargs)
            yield from page.get("Contents", [])
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]


def today(now: datetime) -> str:
    return now.astimezone(UTC).date().isoformat()
