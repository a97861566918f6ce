"""A small builder over `aws_stepfunctions` that owns the house step policy.

It builds one workflow from its spec (`longhaul.workflows.WorkflowSpec`): the workflow's module chains the spec's
steps by name (`step`, `fan_out`) and the builder takes each step's timeout, memory and fan-out source from the spec,
and checks at synthesis that the chain visits the spec's steps in order. Every Task gets a timeout, the retry classes
of the policy (exponential backoff, full jitter, a max delay; deterministic errors fail fast) and a catch-all
that records the failure on the job and step, sends a dead letter to that step's own SQS queue and fails the
execution. Only references travel between states: each step receives the (small) state document and returns
references, stored under `$.steps.<name>`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longhaul.core.errors import JOB_STOPPED
from longhaul.core.settings import Env
from longhaul.core.step_events import TASK_GROUP_PREFIX, FailureEvent, StepEvent, WorkflowState, payload
from longhaul.workflows import StepKind, WorkflowSpec
from state_machines.maps import item_map
from state_machines.policy import DEFAULT_POLICY, STOPPED_ERRORS, TIMEOUT_ERRORS, StepPolicy

# (construct id, handler, timeout seconds, memory MB) -> function. Provided by the workflow construct, which
# knows the code asset, the environment and the tracing/logging defaults of the platform's functions.
FunctionFactory = Callable[[str, str, int, int], lambda_.IFunction]

STEP_HANDLER = "handlers.steps.handler"  # dispatches on the event's (workflow, step)
RECORDER_HANDLER = "handlers.steps.record_failure"
RECORD_FAILURE = "record_failure"
TALLY_HANDLER = "handlers.steps.tally_items"
TALLY_ITEMS = "tally_items"
RUN_TASK_WAIT = "arn:aws:states:::ecs:runTask.waitForTaskToken"


@dataclass(frozen=True)
class ContainerTarget:
    """Where a container step's tasks run: provided by the workers construct (`stacks/workers.py`)."""

    cluster: ecs.ICluster
    task_definition: ecs.FargateTaskDefinition
    container_name: str
    subnet_ids: list[str]
    security_group_ids: list[str]
    assign_public_ip: bool


class WorkflowBuilder(Construct):
    """Builds one workflow's Tasks, dead-letter queues, alarms and the Standard state machine."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: WorkflowSpec,
        make_function: FunctionFactory,
        policy: StepPolicy = DEFAULT_POLICY,
        containers: Mapping[str, ContainerTarget] | None = None,
        artifacts: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.artifacts_bucket = artifacts  # Distributed Maps read their manifests from it and write results to it
        self._tally: lambda_.IFunction | None = None
        self.distributed_maps = 0
        self._containers = dict(containers or {})
        self.container_targets: dict[str, ContainerTarget] = {}  # by step, for the grants
        self.spec = spec
        self.workflow = spec.name
        self.policy = policy
        self._make_function = make_function
        self.functions: dict[str, lambda_.IFunction] = {}
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        self.alarms: list[cloudwatch.Alarm] = []
        self.visited: list[str] = []  # the spec's steps in the order the definition chains them
        self.review_lanes: dict[str, lambda_.IFunction] = {}  # review step -> its lane's function
        # Named after the stack (two deployments never clash) so that its review lane can be granted task responses
        # on its ARN without referencing the machine, which references the lane: no dependency cycle.
        self.machine_name = f"{Stack.of(self).stack_name}-{spec.name}"
        self._recorder = self._function(
            RECORD_FAILURE, RECORDER_HANDLER, self.policy.lambda_timeout, self.policy.recorder_memory_mb
        )
        self._job_failed = sfn.Fail(
            self,
            self.policy.job_failed_state,
            error=self.policy.job_failed_error,
            cause="The failure is recorded on the job and in the failing step's dead-letter queue.",
        )
        self._job_stopped = sfn.Fail(
            self,
            self.policy.job_stopped_state,
            error=JOB_STOPPED,
            cause="The job was cancelled or passed its deadline; see its events.",
        )

    @property
    def tally_function(self) -> lambda_.IFunction:
        """The platform function counting a Distributed Map's committed items (the recorder's code, another
        handler); created with the first Distributed Map."""
        if self._tally is None:
            self._tally = self._function(
                TALLY_ITEMS, TALLY_HANDLER, self.policy.lambda_timeout, self.policy.recorder_memory_mb
            )
        return self._tally

    # ------------------------------------------------------------------ steps

    def _visit(self, name: str, kind: StepKind) -> tuple[int, int]:
        """Record that the chain visits `name`; its (Lambda timeout, memory) from the spec."""
        spec = self.spec.step(name)
        if spec.kind != kind:
            raise ValueError(f"{self.workflow}: {name} is a {spec.kind} in the spec, chained as a {kind}")
        self.visited.append(name)
        return spec.timeout_seconds or self.policy.lambda_timeout, spec.memory_mb or self.policy.memory_mb

    def step(self, name: str) -> sfn.TaskStateBase:
        """The spec's step `name` as a Lambda Task over the whole state; its output lands in `$.steps.<name>`."""
        timeout, memory = self._visit(name, StepKind.STEP)
        function = self._function(name, STEP_HANDLER, timeout, memory)
        task = self._lambda_task(
            name,
            function,
            timeout,
            payload=payload(
                StepEvent, step=name, attempt="$$.State.RetryCount", execution="$$.Execution.Id", input="$"
            ),
            result_path=f"$.steps.{name}",
        )
        self._apply_retries(task)
        task.add_catch(self._job_stopped, errors=list(STOPPED_ERRORS))
        task.add_catch(
            self._failure_path(name, job_path="$.job_id", end=self._job_failed, timeout=timeout),
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
        timeout, memory = self._visit(name, StepKind.FAN_OUT)
        function = self._function(name, STEP_HANDLER, timeout, memory)

        def processor(prefix: str) -> sfn.IChainable:
            item_task = self._lambda_task(
                f"{prefix} item",
                function,
                timeout,
                payload=payload(
                    StepEvent,
                    step=name,
                    item="$.item",
                    ref="$.ref",
                    attempt="$$.State.RetryCount",
                    execution="$$.Execution.Id",
                    input="$.input",
                ),
                result_path=sfn.JsonPath.DISCARD,
            )
            self._apply_retries(item_task)
            return self._item_outcomes(name, prefix, item_task, timeout)

        return item_map(self, name, processor, max_concurrency=max_concurrency)

    def _item_outcomes(
        self, name: str, prefix: str, task: sfn.TaskStateBase | sfn.CustomState, timeout: int
    ) -> sfn.IChainable:
        """An item's Task → `false`; a stopped job → the item fails `JobStopped`; any other failure → record it, dead
        letter → `true`. `prefix` keeps the state names of each copy of the processor unique."""
        item_done = sfn.Pass(self, f"{prefix} item done", result=sfn.Result.from_boolean(False))
        item_failed = sfn.Pass(self, f"{prefix} item failed", result=sfn.Result.from_boolean(True))
        item_stopped = sfn.Fail(self, f"{prefix} item stopped", error=JOB_STOPPED, cause="The job stopped.")
        task.add_catch(item_stopped, errors=list(STOPPED_ERRORS))
        task.add_catch(
            self._failure_path(
                prefix,
                job_path="$.input.job_id",
                item_path="$.item",
                end=item_failed,
                timeout=timeout,
                step=name,
                ref_path="$.ref",
            ),
            result_path="$.failure",
        )
        return task.next(item_done)

    def container(self, name: str) -> sfn.Chain:
        """The spec's container step `name`: one ECS Fargate task per item of its `over` list, each resumed by its
        task token (`ecs:runTask.waitForTaskToken`), under the house policy: a task timeout, a heartbeat bound, the
        retry classes, catch → the step's own DLQ. Skipped when the list is empty.

        Each task gets the step's event (references only) and its token in its environment; the worker reports
        `SendTaskSuccess`/`SendTaskFailure` (a typed error's class name, which Retry/Catch match).
        """
        spec = self.spec.step(name)
        timeout, _ = self._visit(name, StepKind.CONTAINER)
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
            self._apply_retries(task)
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
        from state_machines.review_lane import review_chain

        return review_chain(self, name)

    def state_machine(
        self, definition: sfn.IChainable, *, timeout: Duration, name: str | None = None
    ) -> sfn.StateMachine:
        """The Standard state machine, with full logging and X-Ray tracing; its chain must visit the spec's steps
        in the spec's order."""
        if tuple(self.visited) != self.spec.step_names:
            raise ValueError(
                f"{self.workflow}: the definition visits {self.visited}, the spec lists {list(self.spec.step_names)}"
            )
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

    # ------------------------------------------------------------------ policy

    def _function(self, name: str, handler: str, timeout: int, memory_mb: int) -> lambda_.IFunction:
        function = self._make_function(name, handler, timeout, memory_mb)
        self.functions[name] = function
        return function

    def _lambda_task(
        self, state_name: str, function: lambda_.IFunction, timeout: int, *, payload: dict[str, Any], result_path: str
    ) -> tasks.LambdaInvoke:
        return tasks.LambdaInvoke(
            self,
            state_name,
            lambda_function=function,
            payload=sfn.TaskInput.from_object(payload),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path=result_path,
            task_timeout=sfn.Timeout.duration(Duration.seconds(self.policy.task_timeout(timeout))),
        )

    def _apply_transient_retry(self, task: sfn.TaskStateBase | sfn.CustomState) -> None:
        p = self.policy
        task.add_retry(
            errors=list(p.transient_errors),
            interval=Duration.seconds(p.retry_interval),
            backoff_rate=p.retry_backoff_rate,
            max_attempts=p.retry_max_attempts,
            max_delay=Duration.seconds(p.retry_max_delay),
            jitter_strategy=sfn.JitterType.FULL,
        )

    def _apply_retries(self, task: sfn.TaskStateBase | sfn.CustomState) -> None:
        p = self.policy
        self._apply_transient_retry(task)
        task.add_retry(
            errors=list(TIMEOUT_ERRORS),
            interval=Duration.seconds(p.retry_interval),
            backoff_rate=p.retry_backoff_rate,
            max_attempts=p.timeout_max_attempts,
            max_delay=Duration.seconds(p.retry_max_delay),
            jitter_strategy=sfn.JitterType.FULL,
        )

    def _dead_letter_queue(self, step: str) -> sqs.Queue:
        if step not in self.dead_letter_queues:
            queue = sqs.Queue(
                self,
                f"{step}-dlq",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=Duration.days(self.policy.dlq_retention_days),
            )
            self.dead_letter_queues[step] = queue
            self.alarms.append(
                cloudwatch.Alarm(
                    self,
                    f"{step}-dlq-alarm",
                    metric=queue.metric_approximate_number_of_messages_visible(
                        period=Duration.minutes(self.policy.dead_letter_alarm_period_minutes)
                    ),
                    threshold=1,
                    evaluation_periods=1,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    alarm_description=f"{self.workflow}/{step}: dead letters waiting for an operator",
                )
            )
        return self.dead_letter_queues[step]

    def _failure_path(
        self,
        state_prefix: str,
        *,
        job_path: str,
        end: sfn.IChainable,
        item_path: str | None = None,
        step: str | None = None,
        error: str | None = None,
        dead_letter: bool = True,
        timeout: int | None = None,
        ref_path: str | None = None,
    ) -> sfn.IChainable:
        """record failure (job and step) → dead letter to the step's own queue → `end`.

        `timeout` (the step function's timeout, for a step's own Task) adds the policy's limits to the recorder's
        payload (`runner.StepLimits`), so that a timeout is recorded as "timed out after 75 s on each of 2 attempts".
        """
        step = step or state_prefix
        fields: dict[str, Any] = {
            "step": step,
            "workflow": self.workflow,
            "job_id": job_path,
            "execution": "$$.Execution.Id",
        }
        if timeout is not None:
            fields["limits"] = {
                "task_timeout_seconds": self.policy.task_timeout(timeout),
                "function_timeout_seconds": timeout,
                "timeout_attempts": self.policy.timeout_max_attempts + 1,
            }
        fields.update({"error": error} if error else {"error": "$.failure.Error", "cause": "$.failure.Cause"})
        if item_path:
            fields["item"] = item_path
        if ref_path:  # the item's reference, so that its failure and dead letter can name the document
            fields["ref"] = ref_path
        record = tasks.LambdaInvoke(
            self,
            f"{state_prefix}: record failure",
            lambda_function=self._recorder,
            payload=sfn.TaskInput.from_object(payload(FailureEvent, **fields)),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.dead_letter",
            task_timeout=sfn.Timeout.duration(Duration.seconds(self.policy.task_timeout())),
        )
        self._apply_retries(record)
        if not dead_letter:
            return record.next(end)
        send = tasks.SqsSendMessage(
            self,
            f"{state_prefix}: dead letter",
            queue=self._dead_letter_queue(step),
            message_body=sfn.TaskInput.from_text(sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.dead_letter"))),
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(Duration.seconds(self.policy.send_timeout)),
        )
        self._apply_retries(send)
        return record.next(send).next(end)
