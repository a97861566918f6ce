"""Typed records: what the stores return and the use cases read. Never `dict[str, Any]` across modules.

Stored timestamps are ISO-8601 strings in DynamoDB and `datetime` here; numbers come back from DynamoDB as
`Decimal` and are converted by `longhaul.storage.dynamo.plain` before validation.
"""

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from longhaul.core.budgets import DEFAULT_LANE, Lane, ModelLane, SlaClass, usd
from longhaul.core.contracts import (
    TERMINAL_STATUSES,
    AgentLimitsView,
    BudgetView,
    CallbackStatus,
    CompensationView,
    Escalation,
    FactSource,
    InputVersion,
    JobCancellation,
    JobError,
    JobStatus,
    JobTrigger,
    JobView,
    MemoryView,
    PauseState,
    Progress,
    ProvisionalMark,
    ReviewSummary,
    StepUsage,
    Usage,
    WaitState,
)
from longhaul.core.eta import EtaSnapshot, estimate
from longhaul.core.metering import PREFIX as METERED_PREFIX
from longhaul.core.metering import Metered
from longhaul.core.model import Model
from longhaul.core.pricing import LaneTally, job_cost
from longhaul.core.schema import ITEMS_DONE_PREFIX
from longhaul.core.step_events import WorkflowState

JOB_ID = re.compile(r"^job_[0-9a-f]{28}$")

# `waiting`: a review step that opened its review and waits for the decision (not a checkpoint: a replay asks again).
StepStatus = Literal["running", "retrying", "waiting", "succeeded", "failed", "skipped"]


class Record(Model):
    model_config = ConfigDict(extra="ignore", frozen=True)


# A job's model usage by service tier: flat `tier_<tier>__<field>` attributes of its item (ADD needs top-level numbers),
# added to with each settled call (`BudgetStore.settle`), gathered into `Job.tier_usage`.
TIER_PREFIX, TIER_SEPARATOR = "tier_", "__"
TIER_FIELDS = {"i": "input_tokens", "o": "output_tokens", "c": "cost_micro"}


def tier_attribute(tier: str, field: str) -> str:
    return f"{TIER_PREFIX}{tier}{TIER_SEPARATOR}{field}"


class TierUsage(Record):
    """The tokens a job's calls were paid at one service tier, and what they cost (micro-dollars)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_micro: int = 0


class FanOut(Record):
    """The fan-out whose items run now: its step, its item count and what one item is ("document")."""

    step: str
    total: int
    unit: str


# The stored progress's unit while a fan-out's items run: the count is the job's set of committed items.
FAN_OUT_UNIT = "items"


# The statuses whose jobs have an ETA: they will still move.
ETA_STATUSES = frozenset({JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.RETRYING, JobStatus.WAITING_FOR_REVIEW})

#: How a stopped job's progress says it stopped.
STOPPED_VERBS = {JobStatus.CANCELLED: "cancelled", JobStatus.FAILED: "failed", JobStatus.EXPIRED: "expired"}


def plural(unit: str, count: int = 2) -> str:
    """ "document" → "documents", "passage group" → "passage groups", "page batch" → "page batches"."""
    if count == 1:
        return unit
    return f"{unit}es" if unit.endswith(("s", "sh", "ch", "x")) else f"{unit}s"


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
    # When its retention ends (its tenant's `retention_days` after submission): the sweep erases it then.
    retain_until: datetime | None = None
    idempotency_key: str | None = None
    execution_name: str
    # The state machine version (ARN) its execution runs: recorded by the execution's first step; a replay runs it
    # again unless the operator chose the current one (then it is recorded anew).
    state_machine_version: str | None = None
    current_step: str | None = None
    error: JobError | None = None
    result_key: str | None = None
    usage_input_tokens: int = 0
    usage_output_tokens: int = 0
    usage_cache_read_tokens: int = 0
    usage_cache_write_tokens: int = 0
    model_list_cost_micro: int = 0  # what the settled tokens cost on demand, uncached
    # The batch lane's share of the settled usage (the on-demand lane's is the totals less it).
    lane_batch_input_tokens: int = 0
    lane_batch_output_tokens: int = 0
    lane_batch_cache_read_tokens: int = 0
    lane_batch_cache_write_tokens: int = 0
    lane_batch_cost_micro: int = 0
    lane_batch_list_cost_micro: int = 0
    # Budget: limits, what is held (reservations in flight plus settled actuals), the actual cost; all micro-dollars.
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
    correlation_id: str | None = None  # `longhaul.core.correlation`: the client's trace or request id, or a new one
    callback: CallbackStatus | None = None
    bus_count: int = 0  # the events for the EventBridge bus written so far (`storage.bus`)
    # Admission: the job's class; `slot` while it holds one of the in-flight slots, `waiting` while it waits for one.
    sla_class: SlaClass = "standard"
    model_lane: ModelLane = "auto"  # as requested (`longhaul.guardrails.batch` decides per step)
    slot: bool = False
    waiting: bool = False
    estimated_start_at: datetime | None = None
    # Agent steps: the job's own limits (within its tenant's ceilings; None: the step's own), the side effects with a
    # compensation its tools made (counted in the transaction that records each one's intent), and the saga that
    # undoes them if the job fails, is cancelled or expires.
    agent_max_turns: int | None = None
    agent_max_tool_calls: int | None = None
    # Instructions an update gave (added to the prompts of the model calls of steps that start after it), and the
    # jobs this one replaced and was replaced by (`supersedes` in a submission).
    instructions: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    compensable_effects: int = 0
    compensation: CompensationView | None = None
    # A pause asked for (the next step boundary stops the job) or in force (`paused`).
    pause: PauseState | None = None
    # Repair (`longhaul.operations.repair`): an operator's flag for engineering (the listing's `escalated` filter reads
    # this attribute), the input's current version and the fixes that made it, and the steps a fix invalidated that
    # no replay has rerun yet (the next replay drops their checkpoints and by default starts at the first).
    escalation: Escalation | None = None
    input_version: int = 1
    input_versions: list[InputVersion] = Field(default_factory=list)
    invalidated_steps: list[str] | None = None
    # An operator's termination as `cancelled` (`longhaul.api.terminate`); as `failed`, it is the job's `error`.
    cancellation: JobCancellation | None = None
    # Child jobs (`longhaul.api.children`): the job whose child step started this one and that step; the jobs this
    # one's child steps started, by step (`{"job_id", "workflow"}`); the request's `then` and the job it submitted.
    parent_job_id: str | None = None
    parent_step: str | None = None
    children: dict[str, dict[str, str]] = Field(default_factory=dict)
    then: str | None = None  # JSON of `ThenRequest`
    then_job_id: str | None = None
    # What started the job when no caller submitted it (a schedule's fire, an S3 inbox's object, a matching event).
    trigger: JobTrigger | None = None

    # What the job's step invocations used (`metered_<counter>` attributes of the item, one ADD per invocation), and
    # the state transitions of its executions, counted once they have all ended (`longhaul.operations.costs`).
    metered: Metered = Field(default_factory=Metered)
    # A fan-out's progress: the step running its items, how many and what one is (set as an item starts), and each
    # fan-out's committed items (`ITEMSDONE#<step>` number sets of the item: one idempotent ADD per item).
    fan_out: FanOut | None = None
    items_done: dict[str, int] = Field(default_factory=dict)
    orchestration_transitions: int | None = None
    orchestration_history_events: int | None = None
    orchestration_counted_attempt: int = 0
    orchestration_complete: bool = True
    # What the job waits on now (the API's `waiting`; not the admission's `waiting` above, a wait for a slot): set
    # and cleared by `JobStore.set_waiting`/`clear_waiting`, cleared by the next step's start and by a final status.
    wait_state: WaitState | None = None
    # The ETA's basis, kept at submission from the workflow's history (`longhaul.core.eta`), and when the current
    # step started (a fan-out: its first item).
    eta: EtaSnapshot | None = None
    step_started_at: datetime | None = None
    # The provisional result: the output of the last `provisional` step that completed (`StepSpec.provisional`).
    provisional_key: str | None = None
    provisional_step: str | None = None
    provisional_at: datetime | None = None
    # The model usage by the service tier it was paid at (`TIER_PREFIX`).
    tier_usage: dict[str, TierUsage] = Field(default_factory=dict)

    def estimated_start_seconds(self, now: datetime) -> int | None:
        """While it waits for a slot: the seconds until its estimated start (at least 1: it has not started)."""
        if not self.waiting or self.status != JobStatus.QUEUED or self.estimated_start_at is None:
            return None
        return max(1, int((self.estimated_start_at - now).total_seconds()))

    @model_validator(mode="before")
    @classmethod
    def _gather_metered(cls, data: Any) -> Any:
        """The item's flat `metered_<counter>` attributes (ADD needs top-level numbers) as one `Metered`, and its
        `ITEMSDONE#<step>` sets as counts."""
        if isinstance(data, Mapping) and any(str(k).startswith(METERED_PREFIX) for k in data):
            rest = {k: v for k, v in data.items() if not str(k).startswith(METERED_PREFIX)}
            data = {**rest, "metered": Metered.from_item(data)}
        if isinstance(data, Mapping) and any(str(k).startswith(ITEMS_DONE_PREFIX) for k in data):
            done = {
                str(k).removeprefix(ITEMS_DONE_PREFIX): len(v)
                for k, v in data.items()
                if str(k).startswith(ITEMS_DONE_PREFIX)
            }
            rest = {k: v for k, v in data.items() if not str(k).startswith(ITEMS_DONE_PREFIX)}
            data = {**rest, "items_done": done}
        if isinstance(data, Mapping) and any(_tier_counter(k) for k in data):
            tiers: dict[str, dict[str, Any]] = {}
            for key, value in data.items():
                if (found := _tier_counter(key)) is not None:
                    tiers.setdefault(found[0], {})[found[1]] = value
            rest = {k: v for k, v in data.items() if _tier_counter(k) is None}
            data = {**rest, "tier_usage": tiers}
        return data

    def shown_progress(self) -> Progress:
        """The progress as stored, or, while a fan-out's items run, its count of committed items of its total."""
        fan_out = self.fan_out
        if fan_out is None or fan_out.step != self.current_step or self.progress.unit != FAN_OUT_UNIT:
            return self.progress.model_copy()
        done = self.items_done.get(fan_out.step, 0)
        return Progress(
            completed=done,
            total=fan_out.total,
            unit=plural(fan_out.unit),
            message=f"{fan_out.step}: {done:,} of {fan_out.total:,} {plural(fan_out.unit, fan_out.total)}",
        )

    def stopped_progress(self, status: JobStatus) -> Progress:
        """The progress of this job as it stops now (cancelled, failed, expired): what it had done and that it
        stopped, where. Never "running" or "waiting for a reviewer": nothing of it runs or waits any more."""
        verb = STOPPED_VERBS[status]
        shown = self.shown_progress()  # in a fan-out: its count of committed items
        where = f" (at {self.current_step})" if self.current_step else ""
        if shown.total == 0:
            message = f"{verb} before any step ran"
        else:
            message = f"{verb}: {shown.completed:,} of {shown.total:,} {shown.unit} done{where}"
        return Progress(completed=shown.completed, total=shown.total, unit=shown.unit, message=message)

    def initial_state(self) -> WorkflowState:
        """The state document an execution of this job starts with."""
        return WorkflowState(
            job_id=self.job_id,
            tenant_id=self.tenant_id,
            workflow=self.workflow,
            input_key=self.input_key,
            correlation_id=self.correlation_id,
            review_mode=self.review_mode,
            model_lane="batch" if self.batch_lane else "on_demand",
        )

    @property
    def batch_lane(self) -> bool:
        """Whether the job's model fan-outs try Bedrock's batch lane: asked for, or `auto` in the `batch` class."""
        return self.model_lane == "batch" or (self.model_lane == "auto" and self.sla_class == "batch")

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
        progress = self.shown_progress()
        if now is not None:
            self._estimate(progress, now)
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
                cache_read_tokens=self.usage_cache_read_tokens,
                cache_write_tokens=self.usage_cache_write_tokens,
                cost_usd=usd(self.cost_micro),
            ),
            budget=self.budget_view(),
            created_at=self.created_at,
            updated_at=self.updated_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            deadline_at=self.deadline_at,
            expires_at=self.retain_until,
            error=self.error,
            review=self.review,
            callback=self.callback,
            correlation_id=self.correlation_id,
            sla_class=self.sla_class,
            model_lane=self.model_lane,
            workflow_version=version_number(self.state_machine_version),
            estimated_start_seconds=self.estimated_start_seconds(now or datetime.now(UTC)),
            compensation=self.compensation,
            cancellation=self.cancellation,
            parent=self.parent_job_id,
            then_job_id=self.then_job_id,
            pause=self.pause,
            waiting=None if self.finished else self.wait_state,
            provisional=ProvisionalMark(as_of_step=self.provisional_step, at=self.provisional_at)
            if self.provisional_key and self.provisional_step and not self.finished
            else None,
            agent=(
                AgentLimitsView(max_turns=self.agent_max_turns, max_tool_calls=self.agent_max_tool_calls)
                if self.agent_max_turns or self.agent_max_tool_calls
                else None
            ),
            instructions=self.instructions,
            supersedes=self.supersedes,
            superseded_by=self.superseded_by,
            escalation=self.escalation,
            input_version=self.input_version,
            trigger=self.trigger,
            cost=job_cost(
                self.metered,
                transitions=self.orchestration_transitions,
                history_events=self.orchestration_history_events,
                input_tokens=self.usage_input_tokens,
                output_tokens=self.usage_output_tokens,
                model_cost_micro=self.cost_micro,
                estimate_reason=self.cost_estimate_reason(),
                tiers={tier: (u.input_tokens, u.output_tokens, u.cost_micro) for tier, u in self.tier_usage.items()},
                lanes=self.model_lanes(),
            ),
        )

    def _estimate(self, progress: Progress, now: datetime) -> None:
        """The ETA of a job that will still move (`longhaul.core.eta`): queued (after its estimated start), running,
        retrying or waiting for review; none for one stopped, finished or being cancelled (nothing of it moves)."""
        if self.eta is None or self.status not in ETA_STATUSES:
            return
        fan_out = self.fan_out if self.fan_out and self.fan_out.step == self.current_step else None
        found = estimate(
            self.eta,
            now=now,
            current_step=None if self.status == JobStatus.QUEUED else self.current_step,
            started_at=self.started_at,
            step_started_at=self.step_started_at,
            items_done=self.items_done.get(fan_out.step, 0) if fan_out else None,
            items_total=fan_out.total if fan_out else None,
        )
        if found is None:
            return
        seconds, basis = found
        seconds += self.estimated_start_seconds(now) or 0
        progress.eta_seconds = round(seconds)
        progress.estimated_finish_at = now + timedelta(seconds=seconds)
        progress.eta_basis = basis

    def model_lanes(self) -> dict[Lane, LaneTally]:
        """The settled model usage by lane: the batch lane's counters, and the on-demand lane's (the rest)."""
        listed = self.model_list_cost_micro or self.cost_micro  # (a job settled before list prices were kept)
        total = LaneTally(
            self.usage_input_tokens,
            self.usage_output_tokens,
            self.usage_cache_read_tokens,
            self.usage_cache_write_tokens,
            self.cost_micro,
            listed,
        )
        batch = LaneTally(
            self.lane_batch_input_tokens,
            self.lane_batch_output_tokens,
            self.lane_batch_cache_read_tokens,
            self.lane_batch_cache_write_tokens,
            self.lane_batch_cost_micro,
            self.lane_batch_list_cost_micro,
        )
        return {"on_demand": total.minus(batch), "batch": batch}

    def cost_estimate_reason(self) -> str | None:
        """Why this job's cost is not final (None: it is)."""
        if not self.finished:
            return "the job has not finished: its figures still grow"
        if not self.transitions_counted:
            return (
                "its state transitions are counted on the first read after every execution of the job has ended "
                "(its last states may still run just after it finished); that read settles the cost"
            )
        if not self.orchestration_complete:
            return (
                "the child executions of a Distributed Map could not be read (no permission, or an engine that keeps "
                "none, as the local one): their transitions are estimated from below, one per step invocation, and "
                "this figure stays an estimate"
            )
        return None

    @property
    def transitions_counted(self) -> bool:
        """The transitions of every execution of this job (its latest attempt included) are counted."""
        return self.orchestration_transitions is not None and self.orchestration_counted_attempt >= self.attempts


class Provenance(Record):
    """What produces a step's output: the code (the asset's hash, or the build's version) and the workflow version
    (of its state machine; None where the engine has no versions). On every checkpoint and model call."""

    code_version: str
    workflow_version: int | None = None


def version_number(version_arn: str | None) -> int | None:
    """`…:stateMachine:<name>:<n>` → n (None for no version, or an ARN that names none)."""
    qualifier = (version_arn or "").rsplit(":", 1)[-1]
    return int(qualifier) if qualifier.isdigit() else None


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
    # What produced the output: the code version (the asset's hash) and the workflow version (of its state machine).
    code_version: str | None = None
    workflow_version: int | None = None
    error: StepError | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def succeeded(self) -> bool:
        """A checkpoint: the step's work is done. A review is done when it is decided, never when it only opened
        (records written before reviews waited as `waiting` said `succeeded` with the lane's `next: wait`)."""
        return self.status in ("succeeded", "skipped") and (self.output or {}).get("next") != "wait"


class Charge(Record):
    """One model call in the job's ledger: reserved (what it can use held), settled (actual usage) or released.

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
    reserved_output_tokens: int | None = None  # the output cap the reservation held for (None: the call's own)
    capped_by: Literal["job", "tenant"] | None = None  # whose room lowered that cap below the call's own
    cost_micro: int = 0
    day: str | None = None
    tenant_id: str | None = None
    route: str | None = None
    provider: str | None = None
    model_id: str | None = None
    prompt_version: str | None = None
    prompt_hash: str | None = None
    response_hash: str | None = None
    code_version: str | None = None
    workflow_version: int | None = None
    stop_reason: str | None = None
    response: str | None = None
    # Prompt caching: of the prompt, the tokens read from / written to the provider's cache (`input_tokens`: the rest).
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    list_cost_micro: int | None = None  # what the call's tokens cost on demand, uncached (None: as `cost_micro`)
    service_tier: str | None = None  # the Bedrock service tier the call was paid at (None: before tiers)
    lane: Lane = DEFAULT_LANE  # how the call was sent: on demand, or as a record of a batch inference job


class IdempotencyRecord(Record):
    job_id: str
    payload_hash: str
    expires_at: int


ReviewStatus = Literal["pending", "decided", "expired", "cancelled"]
Decision = Literal["approve", "reject", "edit", "complete"]
# What a review asks of its reviewer: `draft`, to decide on a running job's draft (approve, reject, edit); `complete`,
# to write the result of a failed job by hand (an operator's manual completion).
ReviewKind = Literal["draft", "complete"]


class ReviewRecord(Record):
    """A human review of one job's draft. Its task token is a separate item that never leaves the stores."""

    review_id: str
    job_id: str
    tenant_id: str
    workflow: str
    step: str
    kind: ReviewKind = "draft"
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
    decided_group: str | None = None  # the group through which the reviewer decided (`reviewer_groups`)
    decided_at: datetime | None = None
    updated_at: datetime | None = None
    # The group the review was first assigned to, kept when the escalation ladder reassigns it (rung 2).
    first_group: str | None = None
    # A review of kind `complete`: the operator who handed the job to a person, and their note.
    requested_by: str | None = None
    note: str | None = None

    @property
    def reviewer_groups(self) -> list[str]:
        """The groups whose reviewers may see and decide it: the group it is assigned to and, once the escalation
        ladder reassigned it to the next group, the group it was first assigned to as well (current one first)."""
        return [
            self.assignee_group,
            *([self.first_group] if self.first_group not in (None, self.assignee_group) else []),
        ]

    def summary(self) -> ReviewSummary:
        return ReviewSummary(
            review_id=self.review_id,
            status=self.status,
            since=self.since,
            deadline=self.deadline,
            assignee_group=self.assignee_group,
            reminders=self.reminders,
            kind=self.kind,
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
    correlation_id: str | None = None  # the job's, sent as a header on every attempt


SideEffect = Literal["reversible", "irreversible"]
# `pending`: the intent is written and the effect may be under way; `done`: its outcome is recorded; `failed`: it
# did not happen (the tool refused or failed before acting); `unknown`: an earlier attempt died between the intent
# and the outcome, so whether it happened cannot be told (an irreversible effect is then never repeated).
EffectStatus = Literal["pending", "done", "failed", "unknown"]
CompensationStatus = Literal["pending", "done", "failed"]


class EffectRecord(Record):
    """One side effect of a tool, in the job's outbox: its intent (written before the effect), then its outcome.

    The operation id derives from (job, step, turn, call), so a retried turn finds the record and answers from it
    instead of acting again; a compensation is recorded on the same item."""

    operation_id: str
    job_id: str
    tenant_id: str
    step: str
    turn: int
    call: int
    seq: int = Field(description="The job's event sequence number of the intent: the order effects happened in.")
    tool: str
    side_effect: SideEffect
    input: dict[str, Any]
    input_hash: str
    owner: str = Field(description="`<job attempt>.<retry>` of the invocation that wrote the intent.")
    status: EffectStatus = "pending"
    output: dict[str, Any] | None = None
    acted: bool = True  # False: the tool found nothing to do (e.g. the notice was already sent by another call)
    error: str | None = None
    intended_at: datetime
    done_at: datetime | None = None
    compensation: str | None = None  # the tool that undoes it
    compensation_status: CompensationStatus | None = None
    compensation_owner: str | None = None
    compensation_output: dict[str, Any] | None = None
    compensation_error: str | None = None
    compensated_at: datetime | None = None

    @property
    def to_compensate(self) -> bool:
        """An effect that may have happened and has a compensation not yet done or given up."""
        return (
            self.compensation is not None
            and self.acted
            and self.status in ("done", "pending", "unknown")
            and self.compensation_status not in ("done", "failed")
        )


SagaStatus = Literal["pending", "started", "finished"]


class SagaRecord(Record):
    """A job attempt whose side effects are to be compensated; written in the transaction of its terminal status."""

    job_id: str
    tenant_id: str
    workflow: str
    attempt: int
    status: SagaStatus = "pending"
    created_at: datetime

    @property
    def execution_name(self) -> str:
        return compensation_execution(self.job_id, self.attempt)


def compensation_execution(job_id: str, attempt: int) -> str:
    """The execution of the workflow's compensation lane for one attempt of a job."""
    return f"{job_id}-c{attempt}"


MemoryKind = Literal["episode", "fact"]


class MemoryRecord(Record):
    """A tenant's memory: an episode (a past job's outcome about a subject) or a long-term fact with provenance.

    Stored under the tenant's own partition: nothing reads it without naming the tenant, which the platform takes
    from the job, never from a model's input."""

    memory_id: str
    tenant_id: str
    kind: MemoryKind
    subject: str
    subject_key: str
    text: str
    job_id: str
    recorded_at: datetime
    details: dict[str, Any] = Field(default_factory=dict)
    operation_id: str | None = None  # the tool call that recorded it (its compensation deletes it)
    key: str | None = None
    value: str | None = None
    provenance: FactSource | None = None
    source: dict[str, Any] | None = None  # where the fact's document is stored (re-verification reads it)
    valid_until: datetime | None = None
    verified_at: datetime | None = None
    status: Literal["active", "retired"] = "active"
    retired_reason: str | None = None

    def view(self) -> MemoryView:
        return MemoryView.model_validate(
            self.model_dump(exclude={"tenant_id", "subject_key", "source", "operation_id"})
        )


def _tier_counter(key: object) -> tuple[str, str] | None:
    """(tier, field) of a `tier_<tier>__<field>` attribute, else None."""
    name = str(key)
    if not name.startswith(TIER_PREFIX) or TIER_SEPARATOR not in name:
        return None
    tier, _, field = name.removeprefix(TIER_PREFIX).partition(TIER_SEPARATOR)
    return (tier, field) if tier and field in TIER_FIELDS.values() else None
