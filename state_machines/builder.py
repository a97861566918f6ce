"""A small builder over `aws_stepfunctions` that owns the house step policy and derives a workflow's chain from its
spec.

`WorkflowBuilder.chain()` walks the spec (`longhaul.engine.spec.WorkflowSpec`): each step as its kind says — `step`
(a Lambda Task over the whole state), `fan_out` (a Map over an earlier step's item list), `container` (ECS tasks
resumed by task token), `review` (the review lane), `agent` (a loop of turns: Task → Choice) — then `Job completed`;
a workflow whose agents make compensable side effects gets a compensation lane in front (the saga). A straight
workflow needs nothing more (`define`); a workflow whose chain the spec cannot say (a branch, a parallel block) has a
module `state_machines/<name>.py` with its own `define(builder, timeout=...)` that chains the same named parts, and the
builder checks at synthesis that it visits the spec's steps in order. Every Task gets a timeout, the retry classes
of the policy and a catch-all that records the failure on the job and step, sends a dead letter to that step's own
SQS queue and fails the execution (`parts.py`). Only references travel between states: each step receives the
(small) state document and returns references, stored under `$.steps.<name>`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable

import jsii
from aws_cdk import Duration, IResolveContext, IStringProducer, Lazy, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks

from longhaul.core.errors import JOB_PAUSED, JOB_STOPPED, SegmentTimedOut
from longhaul.core.settings import Env
from longhaul.core.step_events import TASK_GROUP_PREFIX, SteerEvent, StepEvent, WorkflowState, payload
from longhaul.engine.spec import Predicate, StepKind
from state_machines.agent_loop import agent_chain
from state_machines.compensation_lane import with_compensation_lane
from state_machines.maps import group_map, item_map
from state_machines.parts import (
    RUN_TASK_WAIT,
    STEP_HANDLER,
    WAIT_ENDED,
    ContainerTarget,
    WorkflowParts,
)
from state_machines.policy import STOPPED_ERRORS
from state_machines.review_lane import review_chain

# The alias jobs start through; it routes to the version the latest deploy published.
LIVE_ALIAS = "live"
# How long a fan-out waits for its batch inference job: Bedrock's 24-hour window and an hour for the completion to
# arrive; then its items call on demand (the scheduled check stops a batch earlier, at its job's deadline reserve).
BATCH_WAIT_SECONDS = 25 * 3600
# What a state machine version freezes, besides its definition: a change of any publishes a new version.
VERSIONED_PROPERTIES = (
    "definition_string",
    "role_arn",
    "logging_configuration",
    "tracing_configuration",
    "state_machine_type",
)


@jsii.implements(IStringProducer)
class _VersionLogicalId:
    """The logical id of a state machine's version: its own id and a digest of what the version freezes, as CDK names
    a Lambda function's `current_version`. A deploy that changes the machine adds a new version resource, which
    CloudFormation creates after updating the machine; the previous one leaves the template and, retained, stays
    in the account for the executions that started on it."""

    def __init__(self, prefix: str, machine: sfn.CfnStateMachine) -> None:
        self._prefix = prefix
        self._machine = machine

    def produce(self, context: IResolveContext) -> str:
        frozen = Stack.of(self._machine).resolve({name: getattr(self._machine, name) for name in VERSIONED_PROPERTIES})
        digest = hashlib.sha256(json.dumps(frozen, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return f"{self._prefix}{digest}"


class WorkflowBuilder(WorkflowParts):
    """Builds one workflow's Tasks, dead-letter queues, alarms and the Standard state machine."""

    # ------------------------------------------------------------------ steps

    def step(self, name: str) -> sfn.TaskStateBase:
        """The spec's step `name` as a Lambda Task over the whole state; its output lands in `$.steps.<name>`."""
        timeout, memory = self.visit(name, StepKind.STEP)
        function = self.function(name, STEP_HANDLER, timeout, memory)
        task = self._step_task(name, function, timeout, step=name, input="$", result_path=f"$.steps.{name}")
        self.apply_retries(task)
        task.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        self.pausable(task, name, step=name)
        task.add_catch(
            self.failure_path(name, job_path="$.job_id", end=self.job_failed, timeout=timeout),
            result_path="$.failure",
        )
        return task

    def fan_out(self, name: str, *, max_concurrency: int | None = None) -> sfn.Chain:
        """The spec's fan-out `name`: a Map over the item list its spec names (`over`, an earlier step's `ItemList`);
        each item runs the step with `{item, ref, input}` (see `state_machines.maps`: inline or distributed).

        Every item runs even when some fail: a failing item records its failure and sends its own dead letter,
        and yields `true` (a success yields `false`). After the Map, if any item failed, the job fails once with
        a summary of the failed items and no further dead letter; a replay then reruns only those items.
        """
        timeout, memory = self.visit(name, StepKind.FAN_OUT)
        function = self.function(name, STEP_HANDLER, timeout, memory)
        if self.spec.step(name).grouped:
            return self._grouped_fan_out(name, function, timeout, max_concurrency=max_concurrency)

        def processor(prefix: str) -> sfn.IChainable:
            # the item's outcome is the step's output (references only): one transition per item
            item_task = self._step_task(
                f"{prefix} item",
                function,
                timeout,
                step=name,
                input="$.input",
                result_path="$",
                item="$.item",
                ref="$.ref",
            )
            self.apply_retries(item_task)
            return self._item_outcomes(name, prefix, item_task, timeout, done_state=False)

        over = f"$.steps.{self.spec.step(name).over}"

        def single(state: str, summary: sfn.IChainable) -> sfn.TaskStateBase:
            """The list's only item, as its Task in the Map would run it, outside any Map."""
            # (`items[0].ref` would do on AWS; moto's interpreter answers a path through an index with a list)
            item, ref = (f"States.ArrayGetItem({over}.items[*].{field}, 0)" for field in ("index", "ref"))
            task = self._step_task(
                state, function, timeout, step=name, input="$", result_path=sfn.JsonPath.DISCARD, item=item, ref=ref
            )
            return self._caught(
                task,
                state,
                stopped=self.job_stopped,
                failed=summary,
                timeout=timeout,
                step=name,
                job_path="$.job_id",
                item_path=item,
                ref_path=ref,
            )

        items = item_map(self, name, processor, max_concurrency=max_concurrency, single=single)
        return self._batch_lane(name, function, items) if self.spec.step(name).calls_model else items

    def _token_wait(self, state: str, name: str, function: lambda_.IFunction, seconds: int) -> tasks.LambdaInvoke:
        """`state`: the step's own function invoked with its step event and the task token, the execution waiting
        (no compute held) until something sends the token back, at most `seconds`; what it returns is discarded."""
        return tasks.LambdaInvoke(
            self,
            state,
            lambda_function=self.version_of(function),
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            payload=sfn.TaskInput.from_object(
                {
                    **payload(
                        StepEvent, step=name, attempt="$$.State.RetryCount", execution="$$.Execution.Id", input="$"
                    ),
                    "token": sfn.JsonPath.task_token,
                }
            ),
            retry_on_service_exceptions=False,
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(Duration.seconds(seconds)),
        )

    def _batch_lane(self, name: str, function: lambda_.IFunction, items: sfn.Chain) -> sfn.Chain:
        """A fan-out that calls a model, for a job in the batch lane (`$.model_lane` is `batch`): before its items,
        the step's own function (`longhaul.engine.batch_lane`) submits their calls as one Bedrock batch inference
        job, or resumes at once when the step calls on demand; the execution waits on the task token with no compute
        held, resumed by the batch's completion (`longhaul.guardrails.batch`). A job on demand passes one Choice. A
        wait that times out (the batch's 24 hours, and more) goes on to the items, which call on demand."""
        wait = self._token_wait(f"{name}: model batch", name, function, BATCH_WAIT_SECONDS)
        self.apply_transient_retry(wait)
        wait.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        wait.add_catch(items, errors=list(WAIT_ENDED), result_path=sfn.JsonPath.DISCARD)
        wait.add_catch(
            self.failure_path(f"{name} model batch", job_path="$.job_id", end=self.job_failed, step=name),
            result_path="$.failure",
        )
        wait.next(items)
        function.add_to_role_policy(  # an on-demand step resumes its own wait at once
            iam.PolicyStatement(
                actions=["states:SendTaskSuccess"],
                resources=[self.own_machine_arn],
            )
        )
        self.batch_functions.append(function)
        choice = sfn.Choice(self, f"{name}: batch lane?").when(
            sfn.Condition.string_equals("$.model_lane", "batch"), wait
        )
        choice.otherwise(items)
        return sfn.Chain.custom(choice, items.end_states, items)

    def _grouped_fan_out(
        self, name: str, function: lambda_.IFunction, timeout: int, *, max_concurrency: int | None
    ) -> sfn.Chain:
        """A grouped fan-out (`state_machines.maps.group_map`): one Task per group of items, which runs each of them
        as its own item. A group that fails (one of its items failed, or it timed out, or its process died) records
        its failed items and sends their dead letters, then yields `true`, as a failed item would."""

        def group(
            state: str,
            items: str,
            state_input: str,
            result_path: str,
            failed: sfn.IChainable,
            stopped: sfn.IChainable,
            paused: sfn.IChainable | None,
        ) -> sfn.TaskStateBase:
            task = self._step_task(
                state, function, timeout, step=name, input=state_input, result_path=result_path, items=items
            )
            return self._caught(
                task,
                state,
                stopped=stopped,
                paused=paused,
                failed=failed,
                timeout=timeout,
                step=name,
                job_path=f"{state_input}.job_id",
                items_path=items,
            )

        return group_map(self, name, group, max_concurrency=max_concurrency)

    def _step_task(
        self,
        state: str,
        function: lambda_.IFunction,
        timeout: int,
        *,
        step: str,
        input: str,
        result_path: str,
        **target: str | bool,
    ) -> sfn.TaskStateBase:
        """A Task invoking a step function with its `StepEvent`: the step, what it runs on (`target`: an item and its
        reference, or a group's items; nothing for a whole step), its attempt, its execution and its input."""
        return self.lambda_task(
            state,
            function,
            timeout,
            payload=payload(
                StepEvent,
                step=step,
                **target,
                attempt="$$.State.RetryCount",
                execution="$$.Execution.Id",
                input=input,
            ),
            result_path=result_path,
        )

    def _caught(
        self,
        task: sfn.TaskStateBase,
        state: str,
        *,
        stopped: sfn.IChainable,
        failed: sfn.IChainable,
        timeout: int,
        step: str,
        job_path: str,
        paused: sfn.IChainable | None = None,
        item_path: str | None = None,
        ref_path: str | None = None,
        items_path: str | None = None,
    ) -> sfn.TaskStateBase:
        """A fan-out Task outside a Map's item processor (a list's only item, a group) with its retries, its stop
        and its failure path: the failure recorded for the item (`item_path`, `ref_path`) or for the group's items
        (`items_path`), then on to `failed` (also where an unrecorded failure goes), as a failed item in a Map. A
        paused job: on to `paused` (a group in a Map: it fails the Map), or else the Task's own pause wait."""
        self.apply_retries(task)
        task.add_catch(stopped, errors=list(STOPPED_ERRORS))
        if paused is None:
            self.pausable(task, state, step=step, job_path=job_path)
        else:
            task.add_catch(paused, errors=[JOB_PAUSED])
        recorded = self.failure_path(
            state,
            job_path=job_path,
            item_path=item_path,
            ref_path=ref_path,
            items_path=items_path,
            end=failed,
            timeout=timeout,
            step=step,
            unrecorded=failed,
        )
        task.add_catch(recorded, result_path="$.failure")
        return task

    def _item_outcomes(
        self,
        name: str,
        prefix: str,
        task: sfn.TaskStateBase | sfn.CustomState,
        timeout: int,
        *,
        done_state: bool = True,
    ) -> sfn.IChainable:
        """An item's Task → its output (with `done_state`, a Pass: `false`); a stopped job → the item fails
        `JobStopped` (a paused one `JobPaused`); any other failure → record it, dead letter → `true` (also when
        recording it failed: an item's failure never fails the Map). `prefix` keeps the state names of each copy of
        the processor unique."""
        item_failed = sfn.Pass(self, f"{prefix} item failed", result=sfn.Result.from_boolean(True))
        item_stopped = sfn.Fail(self, f"{prefix} item stopped", error=JOB_STOPPED, cause="The job stopped.")
        task.add_catch(item_stopped, errors=list(STOPPED_ERRORS))
        # A paused job: the item fails the Map with `JobPaused`, whose catch waits for the resume and enters the Map
        # again (the items that committed meanwhile are skipped by their checkpoints).
        item_paused = sfn.Fail(self, f"{prefix} item paused", error=JOB_PAUSED, cause="The job paused.")
        task.add_catch(item_paused, errors=[JOB_PAUSED])
        task.add_catch(
            self.failure_path(
                prefix,
                job_path="$.input.job_id",
                item_path="$.item",
                end=item_failed,
                timeout=timeout,
                step=name,
                ref_path="$.ref",
                unrecorded=item_failed,
            ),
            result_path="$.failure",
        )
        if not done_state:
            return task
        return task.next(sfn.Pass(self, f"{prefix} item done", result=sfn.Result.from_boolean(False)))

    def container(self, name: str) -> sfn.Chain:
        """The spec's container step `name`: one ECS Fargate task per item of its `over` list, each resumed by its
        task token (`ecs:runTask.waitForTaskToken`), under the house policy: a task timeout, a heartbeat bound, the
        retry classes, catch → the step's own DLQ. Skipped when the list is empty.

        Each task gets the step's event (references only) and its token in its environment; the worker reports
        `SendTaskSuccess`/`SendTaskFailure` (a typed error's class name, which Retry/Catch match).
        """
        spec = self.spec.step(name)
        timeout, _ = self.visit(name, StepKind.CONTAINER)
        assert spec.container is not None and spec.over is not None
        target = self._containers.get(spec.container)
        if target is None:
            raise ValueError(f"{self.workflow}: {name} runs container {spec.container!r}, which is not deployed")
        self.container_targets[name] = target
        heartbeat = spec.heartbeat_seconds or self.policy.container_heartbeat

        def processor(prefix: str) -> sfn.IChainable:
            event = sfn.Pass(
                self,
                f"{prefix} item event",
                parameters=payload(
                    StepEvent,
                    step=name,
                    item="$.item",
                    ref="$.ref",
                    execution="$$.Execution.Id",
                    input={f"{f}.$": f"$.input.{f}" for f in WorkflowState.model_fields if f != "steps"},
                ),
                result_path="$.event",
            )
            task = self._run_task(f"{prefix} item", target, timeout, heartbeat)
            self.apply_retries(task)
            return event.next(self._item_outcomes(name, prefix, task, timeout))

        return item_map(self, name, processor, skip_empty=True)

    def _run_task(self, state: str, target: ContainerTarget, timeout: int, heartbeat: int) -> sfn.CustomState:
        environment = [
            {"Name": Env.TASK_TOKEN, "Value.$": "$$.Task.Token"},
            {"Name": Env.STEP_EVENT, "Value.$": "States.JsonToString($.event)"},
            {"Name": Env.STEP_ATTEMPT, "Value.$": "States.Format('{}', $$.State.RetryCount)"},
            # The worker beats four times per bound: one lost or slow heartbeat call does not time the task out.
            {"Name": Env.HEARTBEAT_SECONDS, "Value": str(max(1, heartbeat // 4))},
        ]
        return sfn.CustomState(
            self,
            state,
            state_json={
                "Type": "Task",
                "Resource": RUN_TASK_WAIT,
                "Parameters": {
                    "Cluster": target.cluster.cluster_arn,
                    "TaskDefinition": target.task_definition.task_definition_arn,
                    "LaunchType": "FARGATE",
                    "Group.$": f"States.Format('{TASK_GROUP_PREFIX}{{}}', $.input.job_id)",
                    "NetworkConfiguration": {
                        "AwsvpcConfiguration": {
                            "Subnets": target.subnet_ids,
                            "SecurityGroups": target.security_group_ids,
                            "AssignPublicIp": "ENABLED" if target.assign_public_ip else "DISABLED",
                        }
                    },
                    "Overrides": {"ContainerOverrides": [{"Name": target.container_name, "Environment": environment}]},
                },
                "TimeoutSeconds": self.policy.task_timeout(timeout),
                "HeartbeatSeconds": heartbeat,
                # The worker's answer (the step output: references only) replaces the item's state; the item's
                # Pass then yields its boolean. (A null ResultPath does not survive CustomState's JSON.)
                "ResultPath": "$",
            },
        )

    def review(self, name: str) -> sfn.Chain:
        """The spec's review step: open it, then wait on a task token one rung of the escalation ladder at a time and
        let the lane apply the decision or take the next rung (see `state_machines.review_lane`)."""
        return review_chain(self, name)

    def agent(self, name: str) -> sfn.Chain:
        """The spec's agent step: a loop of turns, a Lambda Task each, then a Choice whether to take another (see
        `state_machines.agent_loop`)."""
        return agent_chain(self, name)

    def state_machine(
        self, definition: sfn.IChainable, *, timeout: Duration, name: str | None = None
    ) -> sfn.StateMachine:
        """The Standard state machine, with full logging and X-Ray tracing; its chain must visit the spec's steps
        in the spec's order. A workflow whose agents make side effects with a compensation gets its compensation
        lane in front (`state_machines.compensation_lane`)."""
        if tuple(self.visited) != self.spec.step_names:
            raise ValueError(
                f"{self.workflow}: the definition visits {self.visited}, the spec lists {list(self.spec.step_names)}"
            )
        if self.spec.compensated:
            definition = with_compensation_lane(self, definition)
        log_group = logs.LogGroup(self, "ExecutionLogs", retention=self.policy.log_retention)
        machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_name=name or self.machine_name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=timeout,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
            comment=f"Longhaul workflow {self.workflow}",
        )
        for target in self.container_targets.values():
            self._grant_run_task(machine, target)
        # Every version of its step functions, not only this deploy's: an execution that started on an older
        # version of this machine invokes that version's functions until it ends.
        machine.add_to_role_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[f"{function.function_arn}:*" for function in self.functions.values()],
            )
        )
        self.version, self.alias = self._publish(machine)
        self.deny_insecure_transport()  # every dead-letter queue exists by now (the compensation lane's too)
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                "ExecutionsFailed",
                metric=machine.metric_failed(period=Duration.minutes(self.policy.alarm_period_minutes)),
                threshold=1,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{self.workflow}: executions failed",
            )
        )
        return machine

    def _publish(self, machine: sfn.StateMachine) -> tuple[sfn.CfnStateMachineVersion, sfn.CfnStateMachineAlias]:
        """This deploy's version of the machine (retained: older executions keep running on theirs) and the `live`
        alias routing every new job to it."""
        cfn_machine = machine.node.default_child
        assert isinstance(cfn_machine, sfn.CfnStateMachine)
        version = sfn.CfnStateMachineVersion(
            self,
            "Version",
            state_machine_arn=machine.state_machine_arn,
            description=f"Longhaul workflow {self.workflow}"
            + (f", code {self.code_version}" if self.code_version else ""),
        )
        version.apply_removal_policy(RemovalPolicy.RETAIN)
        prefix = str(Stack.of(self).resolve(version.logical_id))
        version.override_logical_id(Lazy.uncached_string(_VersionLogicalId(prefix, cfn_machine)))
        alias = sfn.CfnStateMachineAlias(
            self,
            "LiveAlias",
            name=LIVE_ALIAS,
            description=f"Where new {self.workflow} jobs start: the latest deploy's version",
            routing_configuration=[
                sfn.CfnStateMachineAlias.RoutingConfigurationVersionProperty(
                    state_machine_version_arn=version.attr_arn, weight=100
                )
            ],
        )
        return version, alias

    @staticmethod
    def _grant_run_task(machine: sfn.StateMachine, target: ContainerTarget) -> None:
        """RunTask of this task definition in this cluster, and passing its two roles to ECS; nothing else (a
        `.waitForTaskToken` task needs no polling or event rule)."""
        machine.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ecs:RunTask"],
                resources=[target.task_definition.task_definition_arn],
                conditions={"ArnEquals": {"ecs:cluster": target.cluster.cluster_arn}},
            )
        )
        roles = [target.task_definition.task_role.role_arn]
        if target.task_definition.execution_role is not None:
            roles.append(target.task_definition.execution_role.role_arn)
        machine.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=roles,
                conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            )
        )

    # ------------------------------------------------------------------ the whole workflow

    def chain(self) -> sfn.IChainable:
        """The spec's steps in its order, each built as its kind says (a segment's steps inside its Parallel, see
        `segment`), then `Job completed`."""
        chain: sfn.Chain | None = None
        to_review: list[sfn.INextable] = []  # segments' timeouts that hand over to the review step
        steps = list(self.spec.steps)
        while steps:
            spec = steps.pop(0)
            group = self.spec.segment_of(spec.name)
            state: sfn.IChainable
            if group is not None:
                steps = steps[len(group.steps) - 1 :]
                state, handed = self.segment(group.name)
                if handed is not None:
                    to_review.append(handed)
            else:
                state = self.build_step(spec.name)
                if spec.kind == StepKind.REVIEW:
                    for handed_over in to_review:
                        handed_over.next(state)
                    to_review.clear()
            chain = sfn.Chain.start(state) if chain is None else chain.next(state)
        if chain is None:
            raise ValueError(f"{self.workflow}: a workflow has at least one step")
        return chain.next(sfn.Succeed(self, "Job completed"))

    def build_step(self, name: str) -> sfn.IChainable:
        """The spec's step `name` as its kind says."""
        build: dict[StepKind, Callable[[str], sfn.IChainable]] = {
            StepKind.STEP: self.step,
            StepKind.FAN_OUT: self.fan_out,
            StepKind.CONTAINER: self.container,
            StepKind.REVIEW: self.review,
            StepKind.AGENT: self.agent,
            StepKind.SIGNAL: self.signal,
            StepKind.CHILD: self.child,
        }
        state = build[self.spec.step(name).kind](name)
        when = self.spec.step(name).when
        return state if when is None else self.branch(name, when, state)

    # ------------------------------------------------------------------ branches and child jobs

    def branch(self, name: str, when: Predicate, state: sfn.IChainable) -> sfn.Chain:
        """A step with `when=`: a Choice (`<step>: when?`) runs it when the predicate holds over the earlier outputs,
        else `<step>: skipped`, the step's function recording it skipped (its output `{"skipped": true}`; the last
        step completes the job there). One transition more than the step alone; two when it is skipped."""
        function = self.functions[name]
        timeout = self.spec.step(name).timeout_seconds or self.policy.lambda_timeout
        skip = self._step_task(
            f"{name}: skipped", function, timeout, step=name, input="$", result_path=f"$.steps.{name}", skipped=True
        )
        self.apply_retries(skip)
        skip.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        skip.add_catch(
            self.failure_path(f"{name} skipped", job_path="$.job_id", end=self.job_failed, step=name),
            result_path="$.failure",
        )
        choice = sfn.Choice(self, f"{name}: when?", comment=json.dumps(when.as_json(), sort_keys=True))
        choice.when(condition(when), state)
        choice.otherwise(skip)
        ends = list(state.end_states) if isinstance(state, sfn.Chain) else [state]
        return sfn.Chain.custom(choice, [*ends, skip], choice)

    def child(self, name: str) -> sfn.Chain:
        """The spec's child step `name` (see `longhaul.api.children`): `<step>: wait for child`, a `.waitForTaskToken`
        Task of the step's function that starts the child job (idempotent per job and step) and keeps the token, which
        the child's end resumes; then the step's Task (the child's outcome: its output, or `ChildFailed` into the
        step's failure path). Two transitions besides the child's own."""
        timeout, memory = self.visit(name, StepKind.CHILD)
        function = self.function(name, STEP_HANDLER, timeout, memory)
        policy = self.spec.step(name).child
        assert policy is not None
        task = self._step_task(name, function, timeout, step=name, input="$", result_path=f"$.steps.{name}")
        self.apply_retries(task)
        task.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        self.pausable(task, name, step=name)
        failure = self.failure_path(name, job_path="$.job_id", end=self.job_failed, timeout=timeout)
        task.add_catch(failure, result_path="$.failure")
        wait = self._token_wait(f"{name}: wait for child", name, function, policy.timeout_seconds)
        self.apply_transient_retry(wait)
        wait.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        wait.add_catch(task, errors=list(WAIT_ENDED), result_path=sfn.JsonPath.DISCARD)  # the step says it is late
        wait.add_catch(failure, result_path="$.failure")
        return sfn.Chain.start(wait).next(task)

    # ------------------------------------------------------------------ signals and segments

    def signal(self, name: str) -> sfn.Chain:
        """The spec's signal step `name` (see `longhaul.engine.signals`): its Task (the runner: consume the signal,
        or open the wait) → Choice; "wait" → the steer lane's `.waitForTaskToken` Task, bounded by the job's wait
        (`TimeoutSecondsPath`) → the step's Task again (the signal came: it consumes it); the wait's timeout → `<step>:
        signal timed out` (event `signal_timed_out`; `on_timeout="fail"` raises `SignalTimedOut` into the step's
        failure path) → the step's Task again (it says no signal came). A job that does not wait: two transitions."""
        timeout, memory = self.visit(name, StepKind.SIGNAL)
        function = self.function(name, STEP_HANDLER, timeout, memory)
        task = self._step_task(name, function, timeout, step=name, input="$", result_path=f"$.steps.{name}")
        self.apply_retries(task)
        task.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        self.pausable(task, name, step=name)
        failure = self.failure_path(name, job_path="$.job_id", end=self.job_failed, timeout=timeout)
        task.add_catch(failure, result_path="$.failure")
        seconds = f"$.steps.{name}.wait_seconds"
        wait = self.steer_wait(f"{name}: wait for signal", "signal", step=name, timeout=sfn.Timeout.at(seconds))
        self.apply_transient_retry(wait)
        timed_out = self.lambda_task(
            f"{name}: signal timed out",
            self.steer_function,
            self.policy.lambda_timeout,
            payload=payload(
                SteerEvent,
                action="signal_timeout",
                step=name,
                job_id="$.job_id",
                execution="$$.Execution.Id",
                seconds=seconds,
            ),
            result_path=sfn.JsonPath.DISCARD,
        )
        self.apply_retries(timed_out)
        for state in (wait, timed_out):
            state.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        wait.add_catch(timed_out, errors=list(WAIT_ENDED), result_path=sfn.JsonPath.DISCARD)
        for state in (wait, timed_out):
            state.add_catch(failure, result_path="$.failure")
        wait.next(task)
        timed_out.next(task)
        came = sfn.Choice(self, f"{name}: wait for signal?").when(
            sfn.Condition.string_equals(f"$.steps.{name}.next", "wait"), wait
        )
        task.next(came)
        return sfn.Chain.custom(task, came.afterwards(include_otherwise=True).end_states, came)

    def segment(self, name: str) -> tuple[sfn.Parallel, sfn.INextable | None]:
        """A segment: a Parallel whose first branch runs its steps, then `<segment>: end` (which resumes the timer),
        and whose second is its timer, the steer lane's `.waitForTaskToken` Task bounded by the segment's seconds.
        The timer's timeout fails its branch `SegmentTimedOut`, which stops the steps' branch; the Parallel's catch
        records it (`<segment>: timed out`) and fails the job, or (`on_timeout="review"`) hands over to the review
        step: returned, for the chain to connect. The branches end in their own Fail states (a state belongs to one
        graph), whose errors the Parallel's catches take to the workflow's own. Three transitions when it holds."""
        group = next(g for g in self.spec.segments if g.name == name)
        seconds = group.bound(os.environ)
        outer_failed, outer_stopped = self.job_failed, self.job_stopped
        self.job_failed = sfn.Fail(
            self, f"{name}: job failed", error=self.policy.job_failed_error, cause="A step of the segment failed."
        )
        self.job_stopped = sfn.Fail(self, f"{name}: job stopped", error=JOB_STOPPED, cause="The job stopped.")
        try:
            steps: sfn.Chain | None = None
            for step in group.steps:
                state = self.build_step(step)
                steps = sfn.Chain.start(state) if steps is None else steps.next(state)
            assert steps is not None
            end = self.lambda_task(
                f"{name}: end",
                self.steer_function,
                self.policy.lambda_timeout,
                payload=payload(SteerEvent, action="segment_end", step=name, job_id="$.job_id"),
                result_path=sfn.JsonPath.DISCARD,
            )
            self.apply_retries(end)
            timer = self.steer_wait(
                f"{name}: timer",
                "segment",
                step=name,
                timeout=sfn.Timeout.duration(Duration.seconds(seconds)),
                execution=False,
            )
            self.apply_transient_retry(timer)
            ran_out = sfn.Fail(
                self, f"{name}: ran out", error=SegmentTimedOut.__name__, cause=f"The segment's {seconds} s passed."
            )
            timer.add_catch(ran_out, errors=list(WAIT_ENDED))
            timer_branch: sfn.IChainable = timer
            steps_branch: sfn.IChainable = steps.next(end)
        finally:
            self.job_failed, self.job_stopped = outer_failed, outer_stopped
        parallel = sfn.Parallel(
            self,
            f"segment {name}",
            output_path="$[0]",  # the steps' branch's state; the timer's adds nothing
            comment=f"Segment {name}: {', '.join(group.steps)} within {seconds} s",
        )
        parallel.branch(steps_branch)
        parallel.branch(timer_branch)
        timed_out = self.lambda_task(
            f"{name}: timed out",
            self.steer_function,
            self.policy.lambda_timeout,
            payload=payload(
                SteerEvent,
                action="segment_timeout",
                step=name,
                job_id="$.job_id",
                execution="$$.Execution.Id",
                seconds=seconds,
            ),
            result_path=f"$.steps.{name}",
        )
        self.apply_retries(timed_out)
        timed_out.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        failure = self.failure_path(f"{name} segment", job_path="$.job_id", end=self.job_failed, step=name)
        timed_out.add_catch(failure, result_path="$.failure")
        parallel.add_catch(self.job_stopped, errors=[JOB_STOPPED])
        parallel.add_catch(self.job_failed, errors=[self.policy.job_failed_error])
        parallel.add_catch(timed_out, errors=[SegmentTimedOut.__name__], result_path="$.segment_failure")
        parallel.add_catch(failure, result_path="$.failure")
        if group.on_timeout == "fail":
            timed_out.next(self.job_failed)
            return parallel, None
        return parallel, timed_out


def condition(when: Predicate) -> sfn.Condition:
    """A predicate as a Choice rule over `$.steps`: each leaf guarded by `IsPresent` (and its type), so a missing or
    mistyped value makes it false, as `Predicate.holds` says, never a runtime error."""
    if when.op == "all":
        return sfn.Condition.and_(*(condition(o) for o in when.operands))
    if when.op == "any":
        return sfn.Condition.or_(*(condition(o) for o in when.operands))
    if when.op == "not":
        return sfn.Condition.not_(condition(when.operands[0]))
    path, value, test = f"$.steps.{when.path}", when.value, when.test
    present = sfn.Condition.is_present(path)
    if test == "present":
        return present
    if test in ("is_true", "is_false"):
        return sfn.Condition.and_(
            present, sfn.Condition.is_boolean(path), sfn.Condition.boolean_equals(path, test == "is_true")
        )
    if test in ("eq", "ne"):
        if isinstance(value, bool):
            equal = sfn.Condition.and_(sfn.Condition.is_boolean(path), sfn.Condition.boolean_equals(path, value))
        elif isinstance(value, int | float):
            equal = sfn.Condition.and_(sfn.Condition.is_numeric(path), sfn.Condition.number_equals(path, value))
        else:
            equal = sfn.Condition.and_(sfn.Condition.is_string(path), sfn.Condition.string_equals(path, str(value)))
        return sfn.Condition.and_(present, equal if test == "eq" else sfn.Condition.not_(equal))
    assert isinstance(value, int | float) and not isinstance(value, bool), f"{test} compares numbers"
    compare = {
        "gt": sfn.Condition.number_greater_than,
        "ge": sfn.Condition.number_greater_than_equals,
        "lt": sfn.Condition.number_less_than,
        "le": sfn.Condition.number_less_than_equals,
    }[str(test)]
    return sfn.Condition.and_(present, sfn.Condition.is_numeric(path), compare(path, value))


def define(b: WorkflowBuilder, *, timeout: Duration) -> sfn.StateMachine:
    """A straight workflow's state machine: the chain its spec says (`WorkflowBuilder.chain`)."""
    return b.state_machine(b.chain(), timeout=timeout)
