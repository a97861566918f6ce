"""The saga of a job attempt, written in the transaction of the job's terminal status: a job that fails, is
cancelled or expires after side effects with a compensation gets one saga item per attempt (the dispatcher starts
the compensation lane's execution for it, see `longhaul.operations.compensation`) and a `compensation` view."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from longhaul.core import schema
from longhaul.core.contracts import CompensationView, JobStatus
from longhaul.core.records import Job, SagaRecord

SAGA_STATUSES = frozenset({JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})


def saga_writes(
    table_name: str, job: Job, to: JobStatus, at: str
) -> tuple[list[dict[str, Any]], dict[str, Any], SagaRecord | None]:
    """For a transition of `job` to `to` at `at`: the saga item to add to its transaction, the job's fields (its
    `compensation`), and the saga; nothing unless the job ends with effects to compensate and its attempt has no
    saga yet."""
    if to not in SAGA_STATUSES or job.compensable_effects <= 0:
        return [], {}, None
    if job.compensation is not None and job.compensation.attempt >= job.attempts:
        return [], {}, None
    record = SagaRecord(
        job_id=job.job_id,
        tenant_id=job.tenant_id,
        workflow=job.workflow,
        attempt=job.attempts,
        created_at=datetime.fromisoformat(at.replace("Z", "+00:00")),
    )
    item = {
        **schema.saga_key(job.job_id, job.attempts),
        **record.model_dump(mode="json"),
        schema.GSI2_PK: schema.saga_partition("pending"),
        schema.GSI2_SK: at,
    }
    put = {"Put": {"TableName": table_name, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
    view = CompensationView(status="pending", attempt=job.attempts)
    return [put], {"compensation": view.model_dump(mode="json")}, record
