"""Admission: an intake queue per SLA class (each with its dead-letter queue and an alarm on it), and the dispatcher
that starts waiting jobs as slots free: woken asynchronously after a queued submission and a freed slot, and every
minute as the safety net.

The dispatcher's name derives from the stack's, so the functions that wake it (every function that can end a job)
name it in their environment without depending on it: the dispatcher itself depends on the state machines it
starts, whose functions would otherwise depend on it in turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from longhaul.adapters.intake import HIDE_SECONDS, MAX_RECEIVES
from longhaul.core.budgets import SLA_CLASSES
from longhaul.core.settings import Env
from stacks.functions import platform_function

DISPATCH_EVERY = Duration.minutes(1)
DISPATCHER_TIMEOUT_SECONDS = 60  # below the messages' hiding time: a round ends before what it read reappears
RETENTION = Duration.days(14)
# How long a job of each class may wait before someone should look (the oldest intake message's age).
WAIT_ALARM_SECONDS = {"interactive": 300, "standard": 1800, "batch": 6 * 3600}


def dispatcher_name(stack: Stack) -> str:
    """The dispatcher function's name: the stack's, so two deployments in one account never share one."""
    return f"{stack.stack_name}-admission"[:64]


class Admission(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, code: lambda_.Code, environment: Mapping[str, str]
    ) -> None:
        super().__init__(scope, construct_id)
        assert DISPATCHER_TIMEOUT_SECONDS < HIDE_SECONDS
        self.queues: dict[str, sqs.Queue] = {}
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        self.alarms: list[cloudwatch.Alarm] = []
        for sla_class in SLA_CLASSES:
            title = sla_class.title()
            dead = sqs.Queue(
                self,
                f"{title}DeadLetters",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=RETENTION,
            )
            self.dead_letter_queues[sla_class] = dead
            self.queues[sla_class] = sqs.Queue(
                self,
                f"{title}Intake",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=RETENTION,
                visibility_timeout=Duration.seconds(HIDE_SECONDS),
                dead_letter_queue=sqs.DeadLetterQueue(queue=dead, max_receive_count=MAX_RECEIVES),
            )
            self.alarms.append(
                cloudwatch.Alarm(
                    self,
                    f"{title}DeadLettersAlarm",
                    metric=dead.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
                    threshold=1,
                    evaluation_periods=1,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    alarm_description=f"admission: {sla_class} intake messages were dead-lettered: poison "
                    f"(not a waiting job's message) or {MAX_RECEIVES} rounds failed on it; a waiting job's is sent "
                    "again by the sweep after 10 minutes",
                )
            )
            self.alarms.append(
                cloudwatch.Alarm(
                    self,
                    f"{title}WaitAlarm",
                    metric=self.queues[sla_class].metric_approximate_age_of_oldest_message(period=Duration.minutes(5)),
                    threshold=WAIT_ALARM_SECONDS[sla_class],
                    evaluation_periods=1,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    alarm_description=f"admission: a {sla_class} job has waited over "
                    f"{WAIT_ALARM_SECONDS[sla_class]} s for a slot (raise jobs_in_flight or the platform's limit)",
                )
            )
        self.dispatcher = platform_function(
            self,
            "Dispatcher",
            code=code,
            handler="handlers.admission.dispatch",
            service="longhaul-admission",
            environment={**environment, **self.environment},
            timeout_seconds=DISPATCHER_TIMEOUT_SECONDS,
            memory_mb=512,
            description="Longhaul: start waiting jobs as slots free, weighted-fair across tenants and SLA classes",
        )
        (self.dispatcher.node.default_child).add_property_override(  # type: ignore[union-attr]
            "FunctionName", dispatcher_name(Stack.of(self))
        )
        self.schedule = events.Rule(
            self,
            "EveryMinute",
            schedule=events.Schedule.rate(DISPATCH_EVERY),
            targets=[targets.LambdaFunction(self.dispatcher, retry_attempts=0)],
        )
        for queue in self.queues.values():
            queue.grant_consume_messages(self.dispatcher)
            # It renews the messages of jobs that still wait (`SqsIntakeQueues.put_back`): a fresh copy each round.
            queue.grant_send_messages(self.dispatcher)

    @property
    def environment(self) -> dict[str, str]:
        """What the functions that queue jobs need: the queues' URLs by class (JSON)."""
        return {Env.INTAKE_QUEUES: json.dumps({c: q.queue_url for c, q in self.queues.items()})}

    def grant_enqueue(self, grantee: iam.IGrantable) -> None:
        for queue in self.queues.values():
            queue.grant_send_messages(grantee)

    def grant_wake(self, grantees: Iterable[iam.IGrantable]) -> None:
        """lambda:InvokeFunction on the dispatcher, by its name (no reference: see the module docstring)."""
        arn = f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:{dispatcher_name(Stack.of(self))}"
        for grantee in grantees:
            iam.Grant.add_to_principal(grantee=grantee, actions=["lambda:InvokeFunction"], resource_arns=[arn])
