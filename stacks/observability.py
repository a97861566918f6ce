"""Observability: one CloudWatch dashboard for operators (jobs, executions, step durations, dead letters), and
the alarm topic every alarm of the stack notifies (an e-mail subscription when one is configured).

The dashboard's custom metrics are queried with exactly the dimensions `longhaul.core.observability.emit` writes.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct, IConstruct

from longhaul.core.observability import NAMESPACE, PLATFORM_MISCONFIGURED, QUEUE_WAIT_METRIC

PERIOD = Duration.minutes(5)


def _metric(name: str, statistic: str = "Sum", **dimensions: str) -> cw.Metric:
    return cw.Metric(
        namespace=NAMESPACE, metric_name=name, dimensions_map=dimensions, statistic=statistic, period=PERIOD
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machines: Mapping[str, sfn.StateMachine],
        steps: Mapping[str, tuple[str, ...]],
        dead_letter_queues: Mapping[str, Mapping[str, sqs.IQueue]],
        model_provider: str,
        intake_queues: Mapping[str, sqs.IQueue] | None = None,
        alarm_email: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarm_topic = self._alarm_topic(alarm_email, removal_policy)
        self.platform_alarm: cw.Alarm | None = None
        if model_provider == "bedrock":
            # Emitted by the Bedrock adapter when model access, a profile's region or a subscription is missing.
            self.platform_alarm = cw.Alarm(
                self,
                "ModelNotConfigured",
                metric=_metric(PLATFORM_MISCONFIGURED, provider="bedrock"),
                threshold=1,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description="Bedrock refused the configured model: enable model access, use an inference "
                "profile of this region, or subscribe in AWS Marketplace (see the job's error message)",
            )
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(6))
        for workflow, machine in state_machines.items():
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title=f"{workflow}: jobs",
                    left=[_metric(n, workflow=workflow) for n in ("JobsSubmitted", "JobsCompleted")]
                    + [_metric("StuckJobs"), _metric("ExpiredJobs")],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{workflow}: executions",
                    left=[
                        machine.metric_started(period=PERIOD),
                        machine.metric_succeeded(period=PERIOD),
                        machine.metric_failed(period=PERIOD),
                        machine.metric_aborted(period=PERIOD),
                        machine.metric_timed_out(period=PERIOD),
                    ],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{workflow}: dead letters waiting",
                    left=[
                        queue.metric_approximate_number_of_messages_visible(period=PERIOD, label=step)
                        for step, queue in dead_letter_queues.get(workflow, {}).items()
                    ],
                    width=8,
                ),
            )
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title=f"{workflow}: step duration p90 (ms)",
                    left=[
                        _metric("StepDuration", "p90", workflow=workflow, step=step).with_(label=step)
                        for step in steps[workflow]
                    ],
                    width=24,
                )
            )

        if intake_queues:
            self._admission_widgets(intake_queues)

    def _admission_widgets(self, intake_queues: Mapping[str, sqs.IQueue]) -> None:
        """Per SLA class: how long jobs waited for a slot (`QueueWaitSeconds`, 0 when they started at once), and how
        many wait now."""
        self.dashboard.add_widgets(
            *(
                cw.GraphWidget(
                    title=f"{sla_class}: queue wait (s)",
                    left=[
                        _metric(QUEUE_WAIT_METRIC, statistic, sla_class=sla_class).with_(label=statistic)
                        for statistic in ("p50", "p90", "Maximum")
                    ],
                    right=[queue.metric_approximate_number_of_messages_visible(period=PERIOD, label="waiting")],
                    width=8,
                )
                for sla_class, queue in intake_queues.items()
            )
        )

    def _alarm_topic(self, email: str | None, removal_policy: RemovalPolicy) -> sns.Topic:
        # A customer managed key: CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Longhaul alarm topic encryption",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        topic = sns.Topic(self, "AlarmTopic", display_name="Longhaul alarms", master_key=key, enforce_ssl=True)
        if email:
            topic.add_subscription(subscriptions.EmailSubscription(email))
        return topic

    def notify_on_alarms(self, scope: IConstruct) -> list[cw.Alarm]:
        """Every alarm under `scope` (the builders' too) notifies the alarm topic; returns them."""
        action = cw_actions.SnsAction(self.alarm_topic)
        alarms = [node for node in scope.node.find_all() if isinstance(node, cw.Alarm)]
        for alarm in alarms:
            alarm.add_alarm_action(action)
        return alarms
