"""An agent step's chain, built for `WorkflowBuilder.agent` with the builder's house policy: a loop the console shows
turn by turn.

    <agent>: start (Pass: turn 0) → <agent> (Lambda Task: one turn, its number as the event's item)
        → <agent>: another turn? (Choice on `$.steps.<agent>.next`: "turn" → <agent> again; otherwise the next step)

The Task retries the transient classes (a crashed turn reruns from the last checkpointed one), catches a stopped
job's `CancelledError` into `Job stopped`, and anything else (an `AgentLimitError` included) into the step's failure
path: record it, its own dead-letter queue, `Job failed`. Only references travel: the turn's output (the next turn
number, the session's or the output's S3 key, counts) replaces `$.steps.<agent>`.
"""

from __future__ import annotations

from aws_cdk import aws_stepfunctions as sfn

from longhaul.core.step_events import StepEvent, payload
from longhaul.engine.spec import StepKind
from state_machines.parts import STEP_HANDLER, WorkflowParts
from state_machines.policy import STOPPED_ERRORS


def agent_chain(b: WorkflowParts, name: str) -> sfn.Chain:
    timeout, memory = b.visit(name, StepKind.AGENT)
    start = sfn.Pass(
        b, f"{name}: start", result=sfn.Result.from_object({"turn": 0, "next": "turn"}), result_path=f"$.steps.{name}"
    )
    task = b.lambda_task(
        name,
        b.function(name, STEP_HANDLER, timeout, memory),
        timeout,
        payload=payload(
            StepEvent,
            step=name,
            item=f"$.steps.{name}.turn",
            attempt="$$.State.RetryCount",
            execution="$$.Execution.Id",
            input="$",
        ),
        result_path=f"$.steps.{name}",
    )
    b.apply_retries(task)
    task.add_catch(b.job_stopped, errors=list(STOPPED_ERRORS))
    b.pausable(task, name, step=name)  # a pause reached at a turn: the same turn again after the resume
    task.add_catch(
        b.failure_path(name, job_path="$.job_id", end=b.job_failed, timeout=timeout), result_path="$.failure"
    )
    done = sfn.Pass(b, f"{name}: done", result_path=sfn.JsonPath.DISCARD)
    again = (
        sfn.Choice(b, f"{name}: another turn?")
        .when(sfn.Condition.string_equals(f"$.steps.{name}.next", "turn"), task)
        .otherwise(done)
    )
    start.next(task)
    task.next(again)
    return sfn.Chain.custom(start, [done], done)
