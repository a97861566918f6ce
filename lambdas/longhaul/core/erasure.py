"""Erasure's contract: the stores a job's data lives in, in the order they are erased, the tombstone that stays, and
what the API answers (`DELETE /v1/jobs/{job_id}`, `DELETE /v1/ops/tenants/{tenant_id}/data`, 410 `job-erased`).

A job is erased store by store (`longhaul.operations.erasure`); its tombstone (the job's own item, stripped to its
usage and cost, `erased_at` and the `job_erased` event) records each store's count as it is done, so an erasure that
stops midway (a crash, a timeout) goes on from the first store not done when it is asked again or when the sweep
finds it unfinished. Each store's deletion is idempotent: deleting what is gone deletes nothing.
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from longhaul.core.model import Model

#: The stores a job's data lives in, in the order they are erased: the uploads are found from the job's input (in
#: `artifacts`), the job's own records last (its item tells the others where to look, and becomes the tombstone).
ERASURE_STORES = (
    "uploads",  # the documents the job's input named by upload id (every version of each object)
    "artifacts",  # work/<job>/ (input, intermediates, kept prompts and responses), results/<job>/, map results
    "analytics",  # the job's Parquet rows of the analytics export (its usage stays in the day files' cost rows)
    "reviews",  # the job's reviews (the draft a reviewer saw) and their task tokens
    "webhooks",  # the job's webhook bodies (the outbox), delivered, pending or dead
    "memory",  # episodes and facts the job recorded, and facts whose provenance is the job
    "streams",  # the job's live-output records
    "history",  # the job's entry in its workflow's ETA history
    "idempotency",  # the submission's Idempotency-Key record
    "queues",  # messages naming the job in the dead-letter and intake queues
    "traces",  # the job's spans (their attributes hold prompts and answers) where the platform keeps them
    "records",  # the job's partition (events, checkpoints, charges, dead letters, effects…) and calendar entry
)
ErasureStore = Literal[
    "uploads",
    "artifacts",
    "analytics",
    "reviews",
    "webhooks",
    "memory",
    "streams",
    "history",
    "idempotency",
    "queues",
    "traces",
    "records",
]
#: The event recorded on the tombstone.
JOB_ERASED_EVENT = "job_erased"
#: The fault step of a store boundary: `erase_<store>=crash-after-side-effectx1` dies after that store's deletion,
#: before its progress is recorded (`docs/how-to/faults-and-time.md`).
FAULT_STEP_PREFIX = "erase_"
FAULT_STEPS = frozenset(f"{FAULT_STEP_PREFIX}{store}" for store in ERASURE_STORES)

ErasureReason = Literal["requested", "retention", "tenant"]


class StoreReport(Model):
    """What an erasure deleted from one store (items, objects and object versions, messages, spans)."""

    store: ErasureStore
    deleted: int = Field(ge=0)


class ErasureAccepted(Model):
    """`DELETE /v1/jobs/{job_id}`: the job is being erased (or was)."""

    job_id: str
    status: Literal["erasing", "erased"] = Field(
        description="`erased`: every store is done; `erasing`: some are left (the sweep finishes them, or ask again)."
    )
    erased_at: datetime = Field(description="When the erasure began: from then the job answers 410 `job-erased`.")
    cancelled: bool = Field(description="Whether the job was still running and was cancelled first.")
    stores: list[ErasureStore] = Field(description="Every store the job's data is erased from, in order.")
    report: list[StoreReport] = Field(description="The stores done so far and what each deleted.")
    kept: str = Field(
        default="A tombstone: the job's id, tenant, workflow, creation and erasure times, its usage and cost (for "
        "billing), and the `job_erased` event. The audit trail keeps its entries (who did what to which job; no "
        "content).",
        description="What stays after the erasure.",
    )


class TenantErasureReport(Model):
    """`DELETE /v1/ops/tenants/{tenant_id}/data`: what was deleted, per store, over all the tenant's jobs and its
    own records (memory, uploads not named by a job)."""

    tenant_id: str
    jobs: int = Field(ge=0, description="The tenant's jobs erased (tombstones stay for billing).")
    status: Literal["erasing", "erased"]
    report: list[StoreReport]


class Tombstone(Model):
    """What stays of an erased job."""

    job_id: str
    tenant_id: str
    workflow: str
    created_at: datetime
    erased_at: datetime
    reason: ErasureReason
    usage_input_tokens: int = 0
    usage_output_tokens: int = 0
    cost_micro: int = 0
    complete: bool = False
