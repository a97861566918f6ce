"""The review step's chain, built for `WorkflowBuilder.review` with the builder's house policy:

    <review> (open, through the step runner) → Choice on `$.steps.<review>.next`
      "wait" → <review>: wait (Lambda `.waitForTaskToken`, TimeoutSecondsPath = one rung: a third of the deadline)
               ├ the token is resumed (a decision) ┐
               └ States.Timeout (the rung ended)  ┴→ <review>: advance → the same Choice
      "stop" → Fail JobStopped (rejected or expired: already recorded on the job)
      else   → <review>: done → the next step

The waits are the interpreter's (time-scaled locally). Every Task retries the transient classes and catches into the
step's failure path; a stopped job's `CancelledError` ends the execution without a dead letter.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks

from longhaul.core.step_events import ReviewEvent, StepEvent, payload
from longhaul.engine.spec import StepKind
from state_machines.parts import WorkflowParts
from state_machines.policy import STOPPED_ERRORS

STEP_HANDLER = "handlers.steps.handler"  # the review step's opening runs through the step runner like any step
REVIEW_HANDLER = "handlers.review.handler"  # the review lane: wait (task token), advance (decision or next rung)
# A review rung's wait ends with one of these when nobody decided in time: the lane takes the next rung.
RUNG_ENDED = ("States.Timeout", "States.HeartbeatTimeout")


def review_chain(b: WorkflowParts, name: str) -> sfn.Chain:
    """The review lane, behind a Choice that skips it (one transition, no invocation) when the job's mode is `never`
    (or null and the workflow's default `never`) — unless an agent or a segment of the workflow may hand over to
    review."""
    lane = _lane(b, name)
    policy = b.spec.step(name).review
    assert policy is not None
    if any(s.agent is not None and s.agent.on_limit == "review" for s in b.spec.agent_steps):
        return lane
    if any(g.on_timeout == "review" for g in b.spec.segments):
        return lane
    mode = "$.review_mode"
    never = sfn.Condition.string_equals(mode, "never")
    if policy.mode == "never":
        never = sfn.Condition.or_(sfn.Condition.is_null(mode), never)
    asked = sfn.Choice(b, f"{name}: asked for?").when(sfn.Condition.not_(never), lane)
    ends = [*asked.afterwards(include_otherwise=True).end_states]
    return sfn.Chain.custom(asked, ends, lane)


def _lane(b: WorkflowParts, name: str) -> sfn.Chain:
    timeout, memory = b.visit(name, StepKind.REVIEW)
    opened = b.lambda_task(
        name,
        b.function(name, STEP_HANDLER, timeout, memory),
        timeout,
        payload=payload(StepEvent, step=name, attempt="$$.State.RetryCount", execution="$$.Execution.Id", input="$"),
        result_path=f"$.steps.{name}",
    )
    b.apply_retries(opened)
    lane = b.function(f"{name}-lane", REVIEW_HANDLER, b.policy.lambda_timeout, b.policy.recorder_memory_mb)
    b.review_lanes[name] = lane
    # Task responses on its own state machine, by the ARN its name gives: referencing the machine (which references
    # this function) would be a dependency cycle.
    lane.add_to_role_policy(
        iam.PolicyStatement(
            actions=["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"],
            resources=[
                Stack.of(b).format_arn(
                    service="states",
                    resource="stateMachine",
                    resource_name=b.machine_name,
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
    )
    wait = tasks.LambdaInvoke(
        b,
        f"{name}: wait",
        lambda_function=b.version_of(lane),
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        # The token as CDK's own JsonPath (which it checks a callback payload for), the rest by field name.
        payload=sfn.TaskInput.from_object(
            {
                **payload(ReviewEvent, action="wait", step=name, execution="$$.Execution.Id", input="$"),
                "token": sfn.JsonPath.task_token,
            }
        ),
        retry_on_service_exceptions=False,
        result_path=f"$.review_wait.{name}",
        task_timeout=sfn.Timeout.at(f"$.steps.{name}.wait_seconds"),
    )
    b.apply_transient_retry(wait)
    advance = b.lambda_task(
        f"{name}: advance",
        lane,
        b.policy.lambda_timeout,
        payload=payload(ReviewEvent, action="advance", step=name, execution="$$.Execution.Id", input="$"),
        result_path=f"$.steps.{name}",
    )
    b.apply_retries(advance)
    wait.add_catch(advance, errors=list(RUNG_ENDED), result_path=f"$.review_wait.{name}")
    for task in (opened, wait, advance):
        task.add_catch(b.job_stopped, errors=list(STOPPED_ERRORS))
    b.pausable(opened, name, step=name)  # a pause reached at the review's opening
    failure = b.failure_path(name, job_path="$.job_id", end=b.job_failed)
    for task in (opened, wait, advance):
        task.add_catch(failure, result_path="$.failure")
    done = sfn.Pass(b, f"{name}: done", result_path=sfn.JsonPath.DISCARD)
    steer = (
        sfn.Choice(b, f"{name}: decided?")
        .when(sfn.Condition.string_equals(f"$.steps.{name}.next", "wait"), wait)
        .when(sfn.Condition.string_equals(f"$.steps.{name}.next", "stop"), b.job_stopped)
        .otherwise(done)
    )
    opened.next(steer)
    wait.next(advance)
    advance.next(steer)
    return sfn.Chain.custom(opened, [done], done)
