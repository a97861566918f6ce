"""The compensation lane of a workflow whose agents make side effects with a compensation (a saga), built for
`WorkflowBuilder.state_machine` with the builder's house policy.

The lane is a branch of the workflow's own state machine, taken by the execution the dispatcher starts for a job
that failed, was cancelled or expired after such effects (`<job>-c<attempt>`, its input carrying `saga`): a
cancelled job's own execution was stopped, so its compensation cannot run there.

    Start: compensate? (Choice: `$.saga` not null → the lane; otherwise the workflow's steps)
    compensation: plan → compensation: more? ─ remaining > 0 → compensation: undo (the latest effect) → more? …
                                             └ otherwise → compensation: finish → Compensation finished
    compensation: undo ─ any error after its retries → compensation: failed (record, dead letter) → plan
    plan, finish ─ any error after their retries → compensation: lane failed → its dead letter → Compensation failed

Every Task retries the transient classes (backoff, full jitter) and a timeout once; each compensation that gives up
is recorded on its effect, shown as `compensation_failed` and sent to the lane's own dead-letter queue (alarmed),
and the lane goes on with the next one. Only references travel: operation ids and counts.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks

from longhaul.core.step_events import SagaEvent, payload
from state_machines.parts import WorkflowParts

SAGA_HANDLER = "handlers.saga.handler"
COMPENSATION = "compensation"  # the lane's function and dead-letter queue (as `engine.saga.COMPENSATION_STEP`)
SAGA_PATH = "$.saga"


def with_compensation_lane(b: WorkflowParts, steps: sfn.IChainable) -> sfn.IChainable:
    """The workflow's definition with the lane in front: `$.saga` takes it, anything else runs `steps`."""
    lane = compensation_lane(b)
    # `saga` is in every execution's state (null but in the lane's), so the Choice never misses a path.
    return sfn.Choice(b, "Start: compensate?").when(sfn.Condition.is_not_null(SAGA_PATH), lane).otherwise(steps)


def compensation_lane(b: WorkflowParts) -> sfn.IChainable:
    timeout = b.policy.lambda_timeout
    function = b.function(COMPENSATION, SAGA_HANDLER, timeout, b.policy.recorder_memory_mb)
    b.compensation_function = function

    def task(state: str, action: str, result_path: str, **fields: Any) -> tasks.LambdaInvoke:
        invoke = b.lambda_task(
            f"compensation: {state}",
            function,
            timeout,
            payload=payload(
                SagaEvent,
                action=action,
                job_id="$.job_id",
                workflow="$.workflow",
                attempt="$.saga.attempt",
                execution="$$.Execution.Id",
                **fields,
            ),
            result_path=result_path,
        )
        b.apply_retries(invoke)
        return invoke

    plan = task("plan", "plan", "$.saga.plan")
    undo = task("undo", "undo", "$.saga.plan", operation_id="$.saga.plan.next")
    finish = task("finish", "finish", "$.saga.result")
    failed = task(
        "failed",
        "failed",
        "$.dead_letter",
        operation_id="$.saga.plan.next",
        error="$.saga.failure.Error",
        cause="$.saga.failure.Cause",
    )
    lane_failed = task(
        "lane failed", "failed", "$.dead_letter", error="$.saga.failure.Error", cause="$.saga.failure.Cause"
    )
    queue = b.dead_letter_queue(COMPENSATION)
    more = (
        sfn.Choice(b, "compensation: more?")
        .when(sfn.Condition.number_greater_than(f"{SAGA_PATH}.plan.remaining", 0), undo)
        .otherwise(finish)
    )
    undo.add_catch(failed, errors=["States.ALL"], result_path=f"{SAGA_PATH}.failure")
    for lane_task in (plan, finish):
        lane_task.add_catch(lane_failed, errors=["States.ALL"], result_path=f"{SAGA_PATH}.failure")
    plan.next(more)
    undo.next(more)
    failed.next(_dead_letter(b, "compensation: dead letter", queue)).next(plan)
    lane_failed.next(_dead_letter(b, "compensation: lane dead letter", queue)).next(
        sfn.Fail(b, "Compensation failed", error="CompensationFailed", cause="Recorded in the lane's dead letter.")
    )
    finish.next(sfn.Succeed(b, "Compensation finished"))
    return plan


def _dead_letter(b: WorkflowParts, state: str, queue: sqs.IQueue) -> tasks.SqsSendMessage:
    send = tasks.SqsSendMessage(
        b,
        state,
        queue=queue,
        message_body=sfn.TaskInput.from_text(sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.dead_letter"))),
        result_path=sfn.JsonPath.DISCARD,
        task_timeout=sfn.Timeout.duration(Duration.seconds(b.policy.send_timeout)),
    )
    b.apply_retries(send)
    return send
