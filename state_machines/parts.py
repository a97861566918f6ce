"""The house step policy's parts, which every chain of a workflow is built from: the step functions, Task timeouts,
the retry classes (exponential backoff, full jitter, a max delay; deterministic errors fail fast), and the failure
path (record the failure on the job and step → dead letter to the step's own SQS queue → fail), with the step's
DLQ and its alarm.

`WorkflowParts` owns them; the chains built on it (`maps.py`: fan-outs; `review_lane.py`: the review step;
`builder.py`: steps, containers and the whole workflow) use only these. Import order: parts ← maps, review_lane ←
builder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longhaul.core.errors import JOB_PAUSED, JOB_STOPPED
from longhaul.core.step_events import FailureEvent, SteerEvent, payload
from longhaul.engine.spec import StepKind, WorkflowSpec
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
STEER_HANDLER = "handlers.steer.handler"  # the steer lane: a paused job's wait (task token)
STEER_LANE = "steer-lane"
# A wait on a task token that ended without an answer: the state it guards is entered again.
WAIT_ENDED = ("States.Timeout", "States.HeartbeatTimeout")


@dataclass(frozen=True)
class ContainerTarget:
    """Where a container step's tasks run: provided by the workers construct (`stacks/workers.py`)."""

    cluster: ecs.ICluster
    task_definition: ecs.FargateTaskDefinition
    container_name: str
    subnet_ids: list[str]
    security_group_ids: list[str]
    assign_public_ip: bool


class WorkflowParts(Construct):
    """One workflow's functions, Tasks, dead-letter queues and alarms under the house policy (the base of
    `WorkflowBuilder`)."""

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
        code_version: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        self.code_version = code_version  # named in the description of each state machine version
        self.artifacts_bucket = artifacts  # Distributed Maps read their manifests from it and write results to it
        self._tally: lambda_.IFunction | None = None
        self._steer: lambda_.IFunction | None = None
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
        self.compensation_function: lambda_.IFunction | None = None  # the compensation lane's, if it has one
        self.batch_functions: list[lambda_.IFunction] = []  # fan-outs' functions that submit batch inference jobs
        # Named after the stack (two deployments never clash) so that its review lane can be granted task responses
        # on its ARN without referencing the machine, which references the lane: no dependency cycle.
        self.machine_name = f"{Stack.of(self).stack_name}-{spec.name}"
        self._recorder = self.function(
            RECORD_FAILURE, RECORDER_HANDLER, self.policy.lambda_timeout, self.policy.recorder_memory_mb
        )
        self.job_failed = sfn.Fail(
            self,
            self.policy.job_failed_state,
            error=self.policy.job_failed_error,
            cause="The failure is recorded on the job and in the failing step's dead-letter queue.",
        )
        self.job_stopped = sfn.Fail(
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
            self._tally = self.function(
                TALLY_ITEMS, TALLY_HANDLER, self.policy.lambda_timeout, self.policy.recorder_memory_mb
            )
        return self._tally

    @property
    def steer_function(self) -> lambda_.IFunction:
        """The workflow's steer lane (a paused job's wait: it stores the task token with the job), granted task
        responses on its own state machine like the review lane; created with the first pause wait."""
        if self._steer is None:
            self._steer = self.function(
                STEER_LANE, STEER_HANDLER, self.policy.lambda_timeout, self.policy.recorder_memory_mb
            )
            self._steer.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["states:SendTaskSuccess", "states:SendTaskFailure"],
                    resources=[self.own_machine_arn],
                )
            )
        return self._steer

    def pausable(
        self,
        task: sfn.TaskStateBase | sfn.Map | sfn.DistributedMap | sfn.CustomState,
        state: str,
        *,
        step: str,
        reenter: sfn.IChainable | None = None,
        job_path: str = "$.job_id",
    ) -> None:
        """`task` catches `JobPaused` (the runner found its job paused at this step boundary) into a pause wait, then
        enters `reenter` (default: `task` itself) again. No state is added to a path that does not pause. Call it
        after the stop's catch and before the catch-all (Catchers are tried in order)."""
        wait = self.pause_wait(state, step=step, job_path=job_path)
        again = reenter or task
        wait.next(again)
        wait.add_catch(again, errors=list(WAIT_ENDED), result_path=sfn.JsonPath.DISCARD)  # still paused: wait again
        task.add_catch(wait, errors=[JOB_PAUSED], result_path=sfn.JsonPath.DISCARD)

    def pause_wait(self, state: str, *, step: str, job_path: str = "$.job_id") -> tasks.LambdaInvoke:
        """`<state>: paused`: the steer lane's `.waitForTaskToken` Task (no compute held while it waits), bounded by
        the policy's `pause_wait_seconds`; a stopped job ends the execution."""
        wait = self.steer_wait(
            f"{state}: paused",
            "pause",
            step=step,
            job_path=job_path,
            timeout=sfn.Timeout.duration(Duration.seconds(self.policy.pause_wait_seconds)),
        )
        self.apply_transient_retry(wait)
        wait.add_catch(self.job_stopped, errors=list(STOPPED_ERRORS))
        return wait

    def steer_wait(
        self,
        state: str,
        action: str,
        *,
        step: str,
        timeout: sfn.Timeout,
        job_path: str = "$.job_id",
        execution: bool = True,
    ) -> tasks.LambdaInvoke:
        """A wait on a task token in the steer lane (a pause, a signal, a segment's timer): the lane stores the token
        with the job and returns, so nothing runs while it waits; `timeout` bounds it."""
        fields = {"action": action, "step": step, "job_id": job_path}
        if execution:
            fields["execution"] = "$$.Execution.Id"
        return tasks.LambdaInvoke(
            self,
            state,
            lambda_function=self.version_of(self.steer_function),
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            payload=sfn.TaskInput.from_object({**payload(SteerEvent, **fields), "token": sfn.JsonPath.task_token}),
            retry_on_service_exceptions=False,
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=timeout,
        )

    def visit(self, name: str, kind: StepKind) -> tuple[int, int]:
        """Record that the chain visits `name`; its (Lambda timeout, memory) from the spec."""
        spec = self.spec.step(name)
        if spec.kind != kind:
            raise ValueError(f"{self.workflow}: {name} is a {spec.kind} in the spec, chained as a {kind}")
        self.visited.append(name)
        return spec.timeout_seconds or self.policy.lambda_timeout, spec.memory_mb or self.policy.memory_mb

    def function(self, name: str, handler: str, timeout: int, memory_mb: int) -> lambda_.IFunction:
        function = self._make_function(name, handler, timeout, memory_mb)
        self.functions[name] = function
        if handler == STEP_HANDLER:
            self._grant_describe_own_executions(function)
        return function

    @property
    def own_machine_arn(self) -> str:
        """This workflow's state machine, by the ARN its name gives (the machine references its functions: referencing
        it back would be a dependency cycle), for the task responses of its lanes' and steps' waits."""
        return Stack.of(self).format_arn(
            service="states",
            resource="stateMachine",
            resource_name=self.machine_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

    def _grant_describe_own_executions(self, function: lambda_.IFunction) -> None:
        """DescribeExecution of this workflow's executions: the first step of an execution records on its job which
        state machine version it runs. By the ARN the machine's name gives (the machine references the function:
        referencing it back would be a dependency cycle)."""
        executions = Stack.of(self).format_arn(
            service="states",
            resource="execution",
            resource_name=f"{self.machine_name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        function.add_to_role_policy(iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions]))

    @staticmethod
    def version_of(function: lambda_.IFunction) -> lambda_.IVersion:
        """What a Task invokes: the version of the function this deploy publishes, so that an execution of this state
        machine version runs the code and configuration it was deployed with, whatever is deployed later."""
        if not isinstance(function, lambda_.Function):
            raise TypeError(f"{function.node.path}: a step's function must be a Function to be versioned")
        return function.current_version

    def lambda_task(
        self, state_name: str, function: lambda_.IFunction, timeout: int, *, payload: dict[str, Any], result_path: str
    ) -> tasks.LambdaInvoke:
        return tasks.LambdaInvoke(
            self,
            state_name,
            lambda_function=self.version_of(function),
            payload=sfn.TaskInput.from_object(payload),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path=result_path,
            task_timeout=sfn.Timeout.duration(Duration.seconds(self.policy.task_timeout(timeout))),
        )

    def apply_transient_retry(self, task: sfn.TaskStateBase | sfn.CustomState) -> None:
        p = self.policy
        task.add_retry(  # before the transient classes (which include it): the first matching retrier applies
            errors=list(p.rate_limited_errors),
            interval=Duration.seconds(p.rate_limited_interval),
            backoff_rate=p.retry_backoff_rate,
            max_attempts=p.rate_limited_max_attempts,
            max_delay=Duration.seconds(p.rate_limited_max_delay),
            jitter_strategy=sfn.JitterType.FULL,
        )
        task.add_retry(
            errors=list(p.transient_errors),
            interval=Duration.seconds(p.retry_interval),
            backoff_rate=p.retry_backoff_rate,
            max_attempts=p.retry_max_attempts,
            max_delay=Duration.seconds(p.retry_max_delay),
            jitter_strategy=sfn.JitterType.FULL,
        )

    def apply_retries(self, task: sfn.TaskStateBase | sfn.CustomState) -> None:
        p = self.policy
        self.apply_transient_retry(task)
        task.add_retry(
            errors=list(TIMEOUT_ERRORS),
            interval=Duration.seconds(p.retry_interval),
            backoff_rate=p.retry_backoff_rate,
            max_attempts=p.timeout_max_attempts,
            max_delay=Duration.seconds(p.retry_max_delay),
            jitter_strategy=sfn.JitterType.FULL,
        )

    def dead_letter_queue(self, step: str) -> sqs.Queue:
        """The step's (or the compensation lane's) own dead-letter queue, with its alarm."""
        return self._dead_letter_queue(step)

    def _dead_letter_queue(self, step: str) -> sqs.Queue:
        if step not in self.dead_letter_queues:
            queue = sqs.Queue(
                self,
                f"{step}-dlq",
                encryption=sqs.QueueEncryption.SQS_MANAGED,  # TLS only: one policy for them all (`deny_insecure`)
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

    def deny_insecure_transport(self) -> None:
        """One queue policy for every dead-letter queue of the workflow: requests not over TLS are denied (what
        `enforce_ssl` does with a policy per queue; one for all keeps a workflow's resources few: CloudFormation
        allows 500 per stack, and a platform team's own workflows must fit)."""
        queues = list(self.dead_letter_queues.values())
        if not queues:
            return
        sqs.CfnQueuePolicy(
            self,
            "DeadLettersTlsOnly",
            queues=[queue.queue_url for queue in queues],
            policy_document=iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        effect=iam.Effect.DENY,
                        principals=[iam.AnyPrincipal()],
                        actions=["sqs:*"],
                        resources=[queue.queue_arn for queue in queues],
                        conditions={"Bool": {"aws:SecureTransport": "false"}},
                    )
                ]
            ),
        )

    def failure_path(
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
        outcomes_path: str | None = None,
        count_path: str | None = None,
        unrecorded: sfn.IChainable | None = None,
        items_path: str | None = None,
    ) -> sfn.IChainable:
        """record failure (job and step) → dead letter to the step's own queue → `end`.

        `items_path` (a grouped fan-out's group): the recorder records each failed item of the group and returns
        their dead letters, which a Map sends one by one (no transition on the happy path).

        `timeout` (the step function's timeout, for a step's own Task) adds the policy's limits to the recorder's
        payload (`runner.StepLimits`), so that a timeout is recorded as "timed out after 75 s on each of 2 attempts".
        `outcomes_path`/`count_path` (a fan-out's summary) pass the Map's item outcomes or the item count, from which
        the summary names the failed items. `unrecorded` (a fan-out item's path): where to go when the failure could
        not be recorded or dead-lettered (its recorder timed out or failed), so that the item still yields its
        failure and the Map goes on: the summary after the Map names it all the same.
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
        if outcomes_path:
            fields["outcomes"] = outcomes_path
        if count_path:
            fields["count"] = count_path
        if items_path:
            fields["items"] = items_path
        record = tasks.LambdaInvoke(
            self,
            f"{state_prefix}: record failure",
            lambda_function=self.version_of(self._recorder),
            payload=sfn.TaskInput.from_object(payload(FailureEvent, **fields)),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.dead_letter",
            task_timeout=sfn.Timeout.duration(Duration.seconds(self.policy.task_timeout())),
        )
        self.apply_retries(record)
        if unrecorded is not None:
            record.add_catch(unrecorded, errors=["States.ALL"], result_path="$.recording_failure")
        if not dead_letter:
            return record.next(end)
        send = tasks.SqsSendMessage(
            self,
            f"{state_prefix}: dead letter",
            queue=self._dead_letter_queue(step),
            message_body=sfn.TaskInput.from_text(
                sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$" if items_path else "$.dead_letter"))
            ),
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(Duration.seconds(self.policy.send_timeout)),
        )
        self.apply_retries(send)
        sending: sfn.TaskStateBase | sfn.Map = send
        if items_path:  # one dead letter per failed item of the group
            sending = sfn.Map(
                self,
                f"{state_prefix}: dead letters",
                items_path="$.dead_letter.dead_letters",
                result_path=sfn.JsonPath.DISCARD,
            )
            sending.item_processor(send)
        if unrecorded is not None:
            sending.add_catch(unrecorded, errors=["States.ALL"], result_path="$.recording_failure")
        return record.next(sending).next(end)
