"""The contract between the state machines and the step functions: the payloads a Task passes.

The state machine builder builds every Task's payload from these models' field names (`payload`), the runner
validates them, and the local runtime's fault middleware recognises a step invocation by them: one definition.
"""

from typing import Any

from pydantic import BaseModel, Field

from longhaul.core.model import Model


class WorkflowState(Model):
    """The state document that travels between states: references only."""

    job_id: str
    tenant_id: str
    workflow: str
    input_key: str
    correlation_id: str | None = None  # the job's (`longhaul.core.correlation`): bound to every step's log lines
    steps: dict[str, Any] = Field(default_factory=dict)
    # Set only in an execution of a workflow's compensation lane ({"attempt": n}): the state machine's first Choice
    # takes the lane when it is not null. Always present (null otherwise), so that Choice never looks for a path
    # that is not there.
    saga: dict[str, Any] | None = None
    # The review mode the job asked for (null: its workflow's default): the state machine skips a review step that is
    # not asked for without invoking anything. Always present, like `saga`.
    review_mode: str | None = None
    # `batch` when the job's model fan-outs try Bedrock's batch lane (`Job.batch_lane`), else `on_demand`: a Choice
    # before such a fan-out skips the lane without invoking anything. Always present, like `saga`.
    model_lane: str = "on_demand"


class Item(Model):
    """One item of a fan-out: its index in the list (the item number everywhere) and a small reference (an S3 key or
    a small typed record, never text)."""

    index: int
    ref: Any


class StepEvent(Model):
    """What a Task passes to a step function (the builder builds the payload from these field names).

    A fan-out item's Task passes its `item` and `ref`; a grouped fan-out's Task passes a group of them (`items`),
    which one invocation runs one after the other, each as its own item (`longhaul.engine.runner.run_group`)."""

    step: str
    attempt: int = 0
    execution: str | None = None
    item: int | None = None
    ref: Any = None
    items: list[Item] | None = None
    input: WorkflowState
    # The batch lane's Task before a fan-out that calls a model (`longhaul.engine.batch_lane`), and a child step's
    # wait (`longhaul.api.children`): its task token.
    token: str | None = None
    # A step with `when=` whose predicate did not hold: the runner records it skipped without running its work.
    skipped: bool = False


class StepLimits(Model):
    """What the house policy gave the failed Task, passed by the state machine so a failure can be told plainly.

    The execution reports a timeout as a bare `States.Timeout`, and a step that timed out never got to count its
    attempt (locally a `hang` never even starts the handler): only the policy knows how many attempts it was.
    """

    task_timeout_seconds: int
    function_timeout_seconds: int
    timeout_attempts: int = Field(description="Attempts a step gets when every one of them times out.")


class FailureEvent(Model):
    """What the failure path's recorder Task passes (`limits` for a step's own Task, see `StepLimits`).

    The summary of a fan-out whose items failed (`ItemsFailed`) names them from what the state machine saw, never
    from what their own recorders may or may not have written yet: `outcomes`, the inline Map's result (an item's
    `true` is a failure; a committed item's is its output, or `false`), or `count`, the item list's length (a
    Distributed Map's results stay in S3: the items that did not commit)."""

    job_id: str
    step: str
    workflow: str
    error: str
    cause: str | None = None
    execution: str | None = None
    item: int | None = None
    ref: Any = None  # a fan-out item's reference: a document's names it in the failure and its dead letter
    # A grouped fan-out's group whose invocation failed: each of its items that did not commit is told apart (see
    # `longhaul.engine.failures.record_failure`).
    items: list[Item] | None = None
    limits: StepLimits | None = None
    outcomes: list[bool | dict[str, Any]] | None = None
    count: int | None = None


class TallyEvent(Model):
    """What a Distributed Map's tally Task passes: the fan-out step and how many items its list has."""

    job_id: str
    step: str
    workflow: str
    count: int


class ItemTally(Model):
    """The tally's answer: whether any item of the fan-out did not commit."""

    any_failed: bool
    committed: int
    count: int


# A container task's ECS group names its job, so a cancellation finds (ListTasks + DescribeTasks) and stops it.
TASK_GROUP_PREFIX = "longhaul:"


def task_group(job_id: str) -> str:
    return f"{TASK_GROUP_PREFIX}{job_id}"


def payload(model: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """A Task payload for `model`: `name=value` for constants, `name="$.path"` values become `name.$` JSONPaths, and
    so do intrinsic functions (`name="States.ArrayGetItem($.list, 0)"`).

    Unknown field names fail at synthesis, so a renamed field cannot silently drop out of the payload.
    """
    unknown = set(fields) - set(model.model_fields)
    if unknown:
        raise ValueError(f"{model.__name__} has no field(s) {sorted(unknown)}")
    return {
        (f"{name}.$" if isinstance(value, str) and value.startswith(("$", "States.")) else name): value
        for name, value in fields.items()
    }


class ReviewEvent(Model):
    """What the review lane's Tasks pass to its function: `wait` (with the task token) or `advance`."""

    action: str
    step: str
    execution: str | None = None
    token: str | None = None
    input: WorkflowState


class SteerEvent(Model):
    """What a workflow's steer lane's wait Tasks pass to its function: `pause` (a paused job's wait, with the task
    token), `signal` (a signal step's wait) or `segment` (a segment's timer)."""

    action: str
    step: str
    job_id: str
    execution: str | None = None
    token: str | None = None
    seconds: int | None = None  # a signal's wait or a segment's bound, for its timeout's event


class SagaEvent(Model):
    """What the compensation lane's Tasks pass to its function: `plan` (what is left to undo, latest first),
    `undo` (compensate `operation_id`), `failed` (its compensation gave up: record it, dead letter), `finish` (the
    job's record of what was undone and what could not be)."""

    action: str
    job_id: str
    workflow: str
    attempt: int
    execution: str | None = None
    operation_id: str | None = None
    error: str | None = None
    cause: str | None = None
