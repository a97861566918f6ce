"""The analytics export's rows and the usage report's contracts.

Every finished job is written as Parquet under the artifacts bucket's `analytics/` prefix, one object per job and
table, Hive-partitioned by the job's creation day, tenant and workflow:

    analytics/<table>/dt=YYYY-MM-DD/tenant_id=<tenant>/workflow=<workflow>/<job_id>.parquet

`<table>` is `jobs` (one row: the job's record and cost), `steps` (one row per step and item: attempts, duration,
failure kinds) or `calls` (one row per model call: route, tokens, cost, whether its attempt's output was kept). The
partition columns are in the path, not in the files (Athena's and DuckDB's Hive partitioning read them from there).
A job's keys never change (its creation day is fixed), so exporting it again overwrites the same three objects.

The export also folds each run's rows into one compacted file per table and day, outside the Glue tables' locations
(Athena does not count a row twice), the partition columns inside it:

    analytics-daily/<table>/dt=YYYY-MM-DD.parquet

The report (`GET /v1/ops/reports`, `GET /v1/reports/usage`, `longhaul ops report`) reads the day files only.
"""

import re
from datetime import datetime
from typing import Literal

from pydantic import Field

from longhaul.core.model import Model

ANALYTICS_PREFIX = "analytics/"
#: The compacted day files (one per table and day, every tenant's rows): what the usage report reads.
DAILY_PREFIX = "analytics-daily/"
TABLES = ("jobs", "steps", "calls")
Table = Literal["jobs", "steps", "calls"]
ReportBy = Literal["workflow", "route", "step", "version"]
#: `--since 7d`, `24h`, `30m`: a window back from now.
SINCE = re.compile(r"^(?P<n>[1-9][0-9]{0,3})(?P<unit>[mhd])$")
MAX_SINCE_DAYS = 400


class JobRow(Model):
    """`jobs`: one row per finished job (dollars as micro-dollars: integers add up exactly)."""

    job_id: str
    status: str
    sla_class: str
    model_lane: str
    route: str | None
    workflow_version: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    error_kind: str | None
    failed_step: str | None
    input_tokens: int
    output_tokens: int
    cost_micro: int = Field(description="Orchestration plus model, as the job's cost view has it at export.")
    model_cost_micro: int
    orchestration_cost_micro: int
    retry_cost_micro: int = Field(description="Model calls made by attempts whose output was not kept.")
    retry_tokens: int
    cost_estimated: bool
    queue_wait_seconds: float
    review_wait_seconds: float
    total_seconds: float


class StepRow(Model):
    """`steps`: one row per step (item -1) or fan-out item of a job."""

    job_id: str
    step: str
    item: int
    attempts: int
    status: str = Field(description="`finished`, `failed`, or `started` (ended without finishing).")
    duration_seconds: float = Field(description="From the first attempt's start to the last attempt's end.")
    failure_kinds: list[str]
    workflow_version: int | None


class CallRow(Model):
    """`calls`: one row per model call (every attempt's), as the job's budget ledger settled it."""

    job_id: str
    charge_id: str
    step: str | None
    item: int
    at: datetime
    route: str | None
    provider: str | None
    model_id: str | None
    input_tokens: int
    output_tokens: int
    cost_micro: int
    kept: bool = Field(description="False when the attempt that made the call failed afterwards (a retry's cost).")
    workflow_version: int | None


class JobExport(Model):
    """What one job exports: its three tables' rows and their partition."""

    day: str
    tenant_id: str
    workflow: str
    job: JobRow
    steps: list[StepRow]
    calls: list[CallRow]


def object_key(table: Table, *, day: str, tenant_id: str, workflow: str, job_id: str) -> str:
    return f"{ANALYTICS_PREFIX}{table}/dt={day}/tenant_id={tenant_id}/workflow={workflow}/{job_id}.parquet"


def day_key(table: str, day: str) -> str:
    """The compacted file of `table`'s rows of the jobs created on `day`."""
    return f"{DAILY_PREFIX}{table}/dt={day}.parquet"


# --- the report -------------------------------------------------------------------------------------------------


class Percentiles(Model):
    p50: float
    p95: float


class SpendRow(Model):
    """Spend of one group (`by`): jobs, their statuses, tokens and dollars."""

    key: str = Field(description="The group: a workflow, a route, a step or a workflow version (`-`: none).")
    jobs: int
    completed: int
    failed: int
    input_tokens: int
    output_tokens: int
    usd: str = Field(description="US dollars (decimal string, six decimals).")
    retry_usd: str = Field(description="Of which model calls whose attempt's output was not kept.")


class StepDurations(Model):
    workflow: str
    step: str
    runs: int = Field(description="Step runs (a fan-out's items each count).")
    attempts: int
    seconds: Percentiles


class FailureKinds(Model):
    workflow: str
    step: str
    kind: str
    count: int


class UsageReport(Model):
    """Spend, step durations, failure kinds, review waits and retry cost of the jobs created in a window, from the
    analytics export (jobs appear once their export ran: a few minutes after they finish)."""

    since: datetime
    until: datetime
    tenant_id: str | None = Field(description="Only this tenant's jobs (a tenant's own report always says it).")
    by: ReportBy
    jobs: int
    total_usd: str = Field(description="The sum of the jobs' costs (orchestration and model), US dollars.")
    model_usd: str
    retry_usd: str = Field(description="Model calls made by attempts whose output was not kept.")
    retry_tokens: int
    spend: list[SpendRow]
    steps: list[StepDurations]
    failures: list[FailureKinds]
    review_wait_seconds: Percentiles | None = Field(description="Over the jobs that waited for a review; null: none.")
    review_waits: int
    queue_wait_seconds: Percentiles | None


# --- the tables' columns (the Parquet files', Glue's and DuckDB's) -----------------------------------------------

#: Glue/Athena column types of the rows' fields (Parquet physical types follow from them).
_GLUE_TYPES = {str: "string", int: "bigint", float: "double", bool: "boolean", datetime: "timestamp"}
ROW_MODELS: dict[str, type[Model]] = {"jobs": JobRow, "steps": StepRow, "calls": CallRow}
#: The partition columns, in the order of the key's path.
PARTITION_COLUMNS = (("dt", "string"), ("tenant_id", "string"), ("workflow", "string"))


def _glue_type(annotation: object) -> str:
    if annotation == list[str]:
        return "array<string>"
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    base = args[0] if args else annotation
    return _GLUE_TYPES[base]  # type: ignore[index]


def columns(table: str) -> list[tuple[str, str]]:
    """A table's columns (name, Glue type), in the files' order."""
    return [(name, _glue_type(field.annotation)) for name, field in ROW_MODELS[table].model_fields.items()]
