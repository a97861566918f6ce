"""Webhooks: the delivery state machine (one execution per webhook, named by its id), its functions and its own
dead-letter queue.

    Deliver (Retry WebhookDeliveryFailed: exponential backoff, full jitter, over hours)
      └ catch-all → Record dead webhook → Dead letter (SQS) → Given up

A delivery is its own execution, not a state of the job's: it may outlive the job by hours, and whatever happens to
it never changes the job's status. Locally the interpreter's time scale shortens the backoff like any other wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from stacks.functions import platform_function
from state_machines.policy import DEFAULT_POLICY, TIMEOUT_ERRORS, StepPolicy

DELIVERY_FAILED = "WebhookDeliveryFailed"
COMMENT = "Longhaul webhook delivery"


@dataclass(frozen=True)
class DeliveryRetry:
    """The retry ladder of one webhook: caps of 30 s, 1, 2, 4, 8, 16, 32 min, then 1 h, 1 h (about 3 h in all,
    each gap drawn from [0, cap] by full jitter)."""

    interval_seconds: int = 30
    backoff_rate: float = 2.0
    max_attempts: int = 9  # retries after the first attempt: 10 attempts, then the dead-letter queue
    max_delay_seconds: int = 3600
    attempt_timeout_seconds: int = 30  # the deliver function's timeout (the HTTP call is bounded at 10 s)


class Webhooks(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        environment: Mapping[str, str],
        secrets_prefix: str,
        retry: DeliveryRetry = DeliveryRetry(),
        policy: StepPolicy = DEFAULT_POLICY,
    ) -> None:
        super().__init__(scope, construct_id)
        self.deliverer = platform_function(
            self,
            "DeliverFunction",
            code=code,
            handler="handlers.webhooks.deliver",
            service="longhaul-webhooks",
            environment=environment,
            timeout_seconds=retry.attempt_timeout_seconds,
            memory_mb=256,
            description="Longhaul: deliver one signed webhook attempt",
        )
        self.recorder = platform_function(
            self,
            "RecordDeadFunction",
            code=code,
            handler="handlers.webhooks.dead_letter",
            service="longhaul-webhooks",
            environment=environment,
            timeout_seconds=policy.lambda_timeout,
            memory_mb=256,
            description="Longhaul: record a webhook whose delivery gave up",
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(policy.dlq_retention_days),
        )
        self.alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(policy.dead_letter_alarm_period_minutes)
            ),
            threshold=1,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="webhooks: deliveries gave up, waiting for an operator",
        )
        transient = list(policy.transient_errors)
        deliver = tasks.LambdaInvoke(
            self,
            "Deliver",
            lambda_function=self.deliverer,
            payload=sfn.TaskInput.from_object({"webhook_id.$": "$.webhook_id", "job_id.$": "$.job_id"}),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.delivery",
            task_timeout=sfn.Timeout.duration(Duration.seconds(policy.task_timeout(retry.attempt_timeout_seconds))),
        )
        deliver.add_retry(
            errors=[DELIVERY_FAILED, *transient, "States.Timeout", "Sandbox.Timedout"],
            interval=Duration.seconds(retry.interval_seconds),
            backoff_rate=retry.backoff_rate,
            max_attempts=retry.max_attempts,
            max_delay=Duration.seconds(retry.max_delay_seconds),
            jitter_strategy=sfn.JitterType.FULL,
        )
        record = tasks.LambdaInvoke(
            self,
            "Record dead webhook",
            lambda_function=self.recorder,
            payload=sfn.TaskInput.from_object(
                {
                    "webhook_id.$": "$.webhook_id",
                    "job_id.$": "$.job_id",
                    "error.$": "$.failure.Error",
                    "cause.$": "$.failure.Cause",
                }
            ),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.dead_letter",
            task_timeout=sfn.Timeout.duration(Duration.seconds(policy.task_timeout())),
        )
        send = tasks.SqsSendMessage(
            self,
            "Dead letter",
            queue=self.dead_letter_queue,
            message_body=sfn.TaskInput.from_text(sfn.JsonPath.json_to_string(sfn.JsonPath.object_at("$.dead_letter"))),
            result_path=sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(Duration.seconds(policy.send_timeout)),
        )
        # Recording is idempotent (the outbox row is marked dead again): a timed-out attempt is retried, like a step's,
        # rather than failing the execution before its dead letter is sent.
        record.add_retry(
            errors=list(TIMEOUT_ERRORS),
            interval=Duration.seconds(policy.retry_interval),
            backoff_rate=policy.retry_backoff_rate,
            max_attempts=policy.timeout_max_attempts,
            max_delay=Duration.seconds(policy.retry_max_delay),
            jitter_strategy=sfn.JitterType.FULL,
        )
        for task in (record, send):
            task.add_retry(
                errors=transient,
                interval=Duration.seconds(policy.retry_interval),
                backoff_rate=policy.retry_backoff_rate,
                max_attempts=policy.retry_max_attempts,
                max_delay=Duration.seconds(policy.retry_max_delay),
                jitter_strategy=sfn.JitterType.FULL,
            )
        deliver.add_catch(record, errors=["States.ALL"], result_path="$.failure")
        record.next(send).next(sfn.Succeed(self, "Given up"))
        definition = deliver.next(sfn.Succeed(self, "Delivered"))
        self.state_machine = sfn.StateMachine(
            self,
            "Delivery",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=Duration.hours(24),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=logs.LogGroup(self, "DeliveryLogs", retention=policy.log_retention),
                level=sfn.LogLevel.ALL,
                include_execution_data=False,
            ),
            comment=COMMENT,
        )
        # Each tenant's signing secrets, and nothing else in Secrets Manager.
        self.deliverer.add_to_role_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"],
                resources=[
                    f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{secrets_prefix}*"
                ],
            )
        )

    @property
    def functions(self) -> list[lambda_.IFunction]:
        return [self.deliverer, self.recorder]
