"""Typed records: what the stores return and the use cases read. Never `dict[str, Any]` across modules.

Stored timestamps are ISO-8601 strings in DynamoDB and `datetime` here; numbers come back from DynamoDB as
`Decimal` and are converted by `longhaul.storage.dynamo.plain` before validation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from longhaul.core.budgets import SlaClass, usd
from longhaul.core.contracts import (
    TERMINAL_STATUSES,
    BudgetView,
    CallbackStatus,
    JobError,
    JobStatus,
    JobView,
    Progress,
    ReviewSummary,
    StepUsage,
    Usage,
)
from longhaul.core.metering import PREFIX as METERED_PREFIX
from longhaul.core.metering import Metered
from longhaul.core.pricing import job_cost
from longhaul.core.step_events import WorkflowState

JOB_ID = re.compile(r"^job_[0-9a-f]{28}$")

StepStatus = Literal["running", "retrying", "succeeded", "failed"]


class Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Job(Record):
    job_id: str
    tenant_id: str
    workflow: str
    status: JobStatus
    version: int
    event_seq: int
    attempts: int = 1
    input_key: str
    payload_hash: str
    model: str
    estimated_sla_seconds: int
    progress: Progress = Field(default_factory=Progress)
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    deadline_at: datetime | None = None
    deadline_seconds: int | None = None
    idempotency_key: str | None = None
    execution_name: str
    current_step: str | None = None
    error: JobError | None = None
    result_key: str | None = None
    usage_input_tokens: int = 0
    usage_output_tokens: int = 0
    # Budget: limits, what is held (reserved worst cases plus settled actuals), the actual cost; all micro-dollars.
    budget_tokens: int | None = None
    budget_cost_micro: int | None = None
    spent_tokens: int = 0
    spent_cost_micro: int = 0
    cost_micro: int = 0
    budget_exhausted: str | None = None
    route: str | None = None
    stuck_reported_at: datetime | None = None
    review_mode: str | None = None  # as requested; None: the workflow's default
    review_deadline_seconds: int | None = None
    review: ReviewSummary | None = None
    callback_url: str | None = None
    links_base: str | None = None  # the API's base URL at submit, for the links of webhooks
    callback: CallbackStatus | None = None
    # Admission: the job's class; `slot` while it holds one of the in-flight slots, `waiting` while it waits for one.
    sla_class: SlaClass = "standard"
    slot: bool = False
    waiting: bool = False
    estimated_start_at: datetime | None = None

    # What the job's step invocations used (`metered_<counter>` attributes of the item, one ADD per invocation), and
    # the state transitions of its executions, counted once they have all ended (`longhaul.operations.costs`).
    metered: Metered = Field(default_factory=Metered)
    orchestration_transitions: int | None = None
    orchestration_history_events: int | None = None
    orchestration_counted_attempt: int = 0
    orchestration_complete: bool = True

    def estimated_start_seconds(self, now: datetime) -> int | None:
        """While it waits for a slot: the seconds until its estimated start (at least 1: it has not started)."""
        if not self.waiting or self.status != JobStatus.QUEUED or self.estimated_start_at is None:
            return None
        return max(1, int((self.estimated_start_at - now).total_seconds()))

    @model_validator(mode="before")
    @classmethod
    def _gather_metered(cls, data: Any) -> Any:
        """The item's flat `metered_<counter>` attributes (ADD needs top-level numbers) as one `Metered`."""
        if isinstance(data, Mapping) and any(str(k).startswith(METERED_PREFIX) for k in data):
            rest = {k: v for k, v in data.items() if not str(k).startswith(METERED_PREFIX)}
            return {**rest, "metered": Metered.from_item(data)}
        return data

    def initial_state(self) -> WorkflowState:
        """The state document an execution of this job starts with."""
        return WorkflowState(
            job_id=self.job_id, tenant_id=self.tenant_id, workflow=self.workflow, input_key=self.input_key
        )

    def budget_view(self, steps: list[StepUsage] | None = None) -> BudgetView | None:
        if self.budget_tokens is None or self.budget_cost_micro is None:
            return None
        return BudgetView(
            max_tokens=self.budget_tokens,
            max_cost_usd=usd(self.budget_cost_micro),
            held_tokens=self.spent_tokens,
            held_cost_usd=usd(self.spent_cost_micro),
            remaining_tokens=max(self.budget_tokens - self.spent_tokens, 0),
            remaining_cost_usd=usd(max(self.budget_cost_micro - self.spent_cost_micro, 0)),
            exhausted=self.budget_exhausted,
            steps=steps or [],
        )

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def view(self, *, now: datetime | None = None) -> JobView:
        """The API's view of the job; with `now`, the ETA of a moving job: running or retrying (a queued one, one
        waiting for review, being cancelled or finished has none: nothing says when it moves again)."""
        progress = self.progress.model_copy()
        moving = self.status in (JobStatus.RUNNING, JobStatus.RETRYING)
        if now and self.started_at and moving and 0 < progress.completed < progress.total:
            elapsed = (now - self.started_at).total_seconds()
            progress.eta_seconds = int(elapsed / progress.completed * (progress.total - progress.completed))
        return JobView(
            job_id=self.job_id,
            tenant_id=self.tenant_id,
            workflow=self.workflow,
            status=self.status,
            current_step=self.current_step,
            progress=progress,
            attempts=self.attempts,
            model=self.model,
            usage=Usage(
                input_tokens=self.usage_input_tokens,
                output_tokens=self.usage_output_tokens,
                cost_usd=usd(self.cost_micro),
            ),
            budget=self.budget_view(),
            created_at=self.created_at,
            updated_at=self.updated_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            deadline_at=self.deadline_at,
            error=self.error,
            review=self.review,
            callback=self.callback,
            sla_class=self.sla_class,
            estimated_start_seconds=self.estimated_start_seconds(now or datetime.now(UTC)),
            cost=job_cost(
                self.metered,
                transitions=self.orchestration_transitions,
                history_events=self.orchestration_history_events,
                input_tokens=self.usage_input_tokens,
                output_tokens=self.usage_output_tokens,
                model_cost_micro=self.cost_micro,
                final=self.finished and self.transitions_counted and self.orchestration_complete,
            ),
        )

    @property
    def transitions_counted(self) -> bool:
        """The transitions of every execution of this job (its latest attempt included) are counted."""
        return self.orchestration_transitions is not None and self.orchestration_counted_attempt >= self.attempts


class StepError(Record):
    kind: str
    error: str
    message: str
    step: str | None = None
    item: int | None = None
    items: list[int] | None = None
    will_retry: bool | None = None


class StepRecord(Record):
    """A step's (or fan-out item's) progress and, once it succeeded, its checkpoint."""

    step: str
    item: int | None = None
    status: StepStatus
    attempts: int = 0
    input_version: str | None = None
    checkpoint_version: int | None = None
    output: dict[str, Any] | None = None
    model_calls: list[dict[str, Any]] | None = None
    error: StepError | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


class Charge(Record):
    """One model call in the job's ledger: reserved (its worst case held), settled (actual usage) or released.

    Charges made directly (`CheckpointStore.charge`) have no status: they are settled when written."""

    charge_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    at: datetime
    status: Literal["reserved", "settled", "released"] = "settled"
    step: str | None = None
    item: int | None = None
    reserved_tokens: int = 0
    reserved_cost_micro: int = 0
    cost_micro: int = 0
    day: str | None = None
    tenant_id: str | None = None
    route: str | None = None
    provider: str | None = None
    model_id: str | None = None
    prompt_version: str | None = None
    prompt_hash: str | None = None
    stop_reason: str | None = None
    response: str | None = None


class IdempotencyRecord(Record):
    job_id: str
    payload_hash: str
    expires_at: int


ReviewStatus = Literal["pending", "decided", "expired", "cancelled"]
Decision = Literal["approve", "reject", "edit"]


class ReviewRecord(Record):
    """A human review of one job's draft. Its task token is a separate item that never leaves the stores."""

    review_id: str
    job_id: str
    tenant_id: str
    workflow: str
    step: str
    status: ReviewStatus = "pending"
    since: datetime
    deadline: datetime
    deadline_seconds: int
    assignee_group: str
    secondary_group: str
    reminders: int = 0
    rung: int = 0  # 0 waiting, 1 reminded, 2 reassigned, 3 final action taken
    reasons: list[str] = Field(default_factory=list)
    material_key: str
    decision: Decision | None = None
    comment: str | None = None
    edits_key: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    updated_at: datetime | None = None

    def summary(self) -> ReviewSummary:
        return ReviewSummary(
            review_id=self.review_id,
            status=self.status,
            since=self.since,
            deadline=self.deadline,
            assignee_group=self.assignee_group,
            reminders=self.reminders,
        )


OutboxStatus = Literal["pending", "retrying", "delivered", "dead"]


class OutboxRecord(Record):
    """One webhook to deliver, written in the same transaction as the status change it announces."""

    webhook_id: str
    job_id: str
    tenant_id: str
    event: str
    url: str
    body: str  # the exact JSON that is signed and sent, every attempt
    status: OutboxStatus = "pending"
    attempts: int = 0
    created_at: datetime
    last_attempt_at: datetime | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    redeliveries: int = 0
