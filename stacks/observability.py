"""Observability: one CloudWatch dashboard for operators (jobs, executions, step durations, dead letters), and
the alarm topic every alarm of the stack notifies (an e-mail subscription when one is configured).

The dashboard's custom metrics are queried with exactly the dimensions `longhaul.core.observability.emit` writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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

from longhaul.core.budgets import QUEUE_WAIT_TARGET_SECONDS
from longhaul.core.observability import (
    ALLOWANCE_REACHED_METRIC,
    ESCALATIONS_METRIC,
    MODEL_CACHE_READ_METRIC,
    MODEL_COST_METRIC,
    MODEL_LANE_COST_METRIC,
    MODEL_LANE_TOKENS_METRIC,
    MODEL_PROMPT_TOKENS_METRIC,
    MODEL_TOKENS_METRIC,
    NAMESPACE,
    PLATFORM_MISCONFIGURED,
    QUEUE_WAIT_METRIC,
    REVIEW_WAIT_METRIC,
    ROUTE_LIMITED_METRIC,
    ROUTE_WAIT_METRIC,
    STEP_RETRIES_METRIC,
    STUCK_JOBS_METRIC,
    VALIDATION_FAILURES_METRIC,
)

PERIOD = Duration.minutes(5)
# Reviews are decided by people: their median is taken over an hour.
REVIEW_WAIT_PERIOD = Duration.hours(1)


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
        model_providers: Sequence[str] = (),
        intake_queues: Mapping[str, sqs.IQueue] | None = None,
        alarm_email: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        review_workflows: Sequence[str] = (),
        stuck_after_minutes: int = 15,
        review_wait_alarm_minutes: int = 240,
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

            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title=f"{workflow}: model tokens and cost (USD)",
                    left=[_metric(MODEL_TOKENS_METRIC, workflow=workflow).with_(label="tokens")],
                    right=[_metric(MODEL_COST_METRIC, workflow=workflow).with_(label="USD")],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{workflow}: retries per step",
                    left=[
                        _metric(STEP_RETRIES_METRIC, workflow=workflow, step=step).with_(label=step)
                        for step in steps[workflow]
                    ],
                    width=8,
                ),
                cw.GraphWidget(
                    title=f"{workflow}: review waiting time (s)",
                    left=[
                        _metric(REVIEW_WAIT_METRIC, statistic, workflow=workflow).with_(label=statistic)
                        for statistic in ("p50", "p90", "Maximum")
                    ],
                    width=8,
                ),
            )
            self._cost_anomaly_alarm(workflow)
            if workflow in review_workflows:
                self._review_wait_alarm(workflow, review_wait_alarm_minutes)
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="webhooks: failed attempts and dead",
                left=[
                    cw.MathExpression(
                        expression=f"SEARCH('{{{NAMESPACE},event}} MetricName=\"{name}\"', 'Sum', 300)",
                        label=name,
                        period=PERIOD,
                    )
                    for name in ("WebhookAttemptsFailed", "WebhooksDead")
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="tenants: model cost (USD) and daily allowances reached",
                left=[
                    cw.MathExpression(
                        expression=f"SEARCH('{{{NAMESPACE},tenant}} MetricName=\"{MODEL_COST_METRIC}\"', 'Sum', 300)",
                        label="cost by tenant",
                        period=PERIOD,
                    )
                ],
                right=[_metric(ALLOWANCE_REACHED_METRIC).with_(label="allowance reached")],
                width=8,
            ),
        )
        self._validation_widgets()
        self._lane_widgets()
        self._route_limit_widgets()
        self._tenant_allowance_alarm()
        self._stuck_jobs_alarm(stuck_after_minutes)
        for provider in model_providers:
            self._breaker_alarm(provider)
        if intake_queues:
            self._admission_widgets(intake_queues)
            for sla_class in intake_queues:
                self._sla_alarm(sla_class)

    def _sla_alarm(self, sla_class: str) -> None:
        """An SLA class whose jobs wait for a slot longer than its target (p90, three 5-minute periods)."""
        target = QUEUE_WAIT_TARGET_SECONDS.get(sla_class)  # type: ignore[call-overload]
        if target is None:
            return
        cw.Alarm(
            self,
            f"QueueWait-{sla_class}",
            metric=_metric(QUEUE_WAIT_METRIC, "p90", sla_class=sla_class),
            threshold=target,
            evaluation_periods=3,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{sla_class} jobs wait longer than {target} s for a slot (p90): raise the platform's "
            "or the tenants' jobs in flight, or look for a stuck dispatcher",
        )

    def _lane_widgets(self) -> None:
        """Model tokens and dollars by lane (on demand, batch), and the share of prompt tokens read from a provider's
        cache (the gateway's `ModelCacheReadTokens` over `ModelPromptTokens`, every lane)."""
        lanes = ("on_demand", "batch")
        read = [_metric(MODEL_CACHE_READ_METRIC, lane=lane) for lane in lanes]
        prompt = [_metric(MODEL_PROMPT_TOKENS_METRIC, lane=lane) for lane in lanes]
        share = cw.MathExpression(
            expression="100 * (FILL(r0, 0) + FILL(r1, 0)) / (FILL(p0, 0) + FILL(p1, 0))",
            using_metrics={"r0": read[0], "r1": read[1], "p0": prompt[0], "p1": prompt[1]},
            label="prompt tokens read from cache %",
            period=PERIOD,
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="model: tokens by lane",
                left=[_metric(MODEL_LANE_TOKENS_METRIC, lane=lane).with_(label=lane) for lane in lanes],
                width=8,
            ),
            cw.GraphWidget(
                title="model: cost (USD) by lane",
                left=[_metric(MODEL_LANE_COST_METRIC, lane=lane).with_(label=lane) for lane in lanes],
                width=8,
            ),
            cw.GraphWidget(
                title="model: share of prompt tokens read from the prompt cache (%)",
                left=[share],
                left_y_axis=cw.YAxisProps(min=0, max=100),
                width=8,
            ),
        )

    def _route_limit_widgets(self) -> None:
        """A route's shared limits (`requests_per_minute`, `tokens_per_minute`): the calls that found no room within
        their bounded wait (their steps retried later), and how long admitted calls waited, by route."""
        searches = ((ROUTE_LIMITED_METRIC, "Sum", "calls refused"), (ROUTE_WAIT_METRIC, "Maximum", "longest wait (s)"))
        self.dashboard.add_widgets(
            *(
                cw.GraphWidget(
                    title=f"model routes: {label}, by route",
                    left=[
                        cw.MathExpression(
                            expression=f"SEARCH('{{{NAMESPACE},route}} MetricName=\"{metric}\"', '{stat}', 300)",
                            label=label,
                            period=PERIOD,
                        )
                    ],
                    width=12,
                )
                for metric, stat, label in searches
            )
        )

    def _validation_widgets(self) -> None:
        """The validation ladder (seed 003): invalid fields by model, route, prompt version and field, and the
        escalation rate by route (`ValidationEscalations` is 1 per escalated answer, 0 otherwise: its average)."""
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="model answers: validation failures by model, route, prompt version and field",
                left=[
                    cw.MathExpression(
                        expression=f"SEARCH('{{{NAMESPACE},field,model,prompt_version,route}} "
                        f"MetricName=\"{VALIDATION_FAILURES_METRIC}\"', 'Sum', 300)",
                        label="failures",
                        period=PERIOD,
                    )
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="model answers: escalation rate to the stronger route, by route (%)",
                left=[
                    cw.MathExpression(
                        expression=f"100 * SEARCH('{{{NAMESPACE},route}} "
                        f"MetricName=\"{ESCALATIONS_METRIC}\"', 'Average', 300)",
                        label="escalated %",
                        period=PERIOD,
                    )
                ],
                width=12,
            ),
        )

    def _stuck_jobs_alarm(self, stuck_after_minutes: int) -> None:
        """A job with no state change for `stuck_after_minutes`: the sweep (every 5 minutes) reports it once per
        window (`job_stuck`) and counts it in `StuckJobs`."""
        cw.Alarm(
            self,
            "StuckJobs",
            metric=_metric(STUCK_JOBS_METRIC),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=f"A job had no state change for {stuck_after_minutes} minutes (the sweep's job_stuck "
            "event names it): see the manual, operating/alarms/stuck-jobs",
        )

    def _review_wait_alarm(self, workflow: str, limit_minutes: int) -> None:
        """The median time this workflow's reviews waited for a decision, over an hour, above the limit."""
        cw.Alarm(
            self,
            f"ReviewWait-{workflow}",
            metric=cw.Metric(
                namespace=NAMESPACE,
                metric_name=REVIEW_WAIT_METRIC,
                dimensions_map={"workflow": workflow},
                statistic="p50",
                period=REVIEW_WAIT_PERIOD,
            ),
            threshold=limit_minutes * 60,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{workflow}: the median review waited over {limit_minutes} minutes for a decision "
            "(p50 over an hour): see the manual, operating/alarms/review-wait",
        )

    def _tenant_allowance_alarm(self) -> None:
        cw.Alarm(
            self,
            "TenantAllowanceReached",
            metric=_metric(ALLOWANCE_REACHED_METRIC),
            threshold=1,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description="A tenant's model spend reached its daily allowance: its model calls are refused until "
            f"tomorrow (UTC). Which tenant: {ALLOWANCE_REACHED_METRIC} by `tenant` on the dashboard",
        )

    def _breaker_alarm(self, provider: str) -> None:
        cw.Alarm(
            self,
            f"BreakerOpen-{provider}",
            metric=_metric("BreakerTransitions", provider=provider, state="open"),
            threshold=1,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=f"A circuit breaker of {provider} opened: its model calls fail fast or fail over",
        )

    def _cost_anomaly_alarm(self, workflow: str) -> None:
        """Model spend of a workflow outside its learned band (anomaly detection, two standard deviations)."""
        cw.CfnAlarm(
            self,
            f"CostAnomaly-{workflow}",
            alarm_description=f"{workflow}: model cost outside its usual band (anomaly detection)",
            comparison_operator="GreaterThanUpperThreshold",
            evaluation_periods=3,
            threshold_metric_id="band",
            treat_missing_data="notBreaching",
            alarm_actions=[self.alarm_topic.topic_arn],
            metrics=[
                cw.CfnAlarm.MetricDataQueryProperty(
                    id="cost",
                    return_data=True,
                    metric_stat=cw.CfnAlarm.MetricStatProperty(
                        metric=cw.CfnAlarm.MetricProperty(
                            namespace=NAMESPACE,
                            metric_name=MODEL_COST_METRIC,
                            dimensions=[cw.CfnAlarm.DimensionProperty(name="workflow", value=workflow)],
                        ),
                        period=int(PERIOD.to_seconds()),
                        stat="Sum",
                    ),
                ),
                cw.CfnAlarm.MetricDataQueryProperty(
                    id="band", return_data=True, expression="ANOMALY_DETECTION_BAND(cost, 2)"
                ),
            ],
        )

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
        self.alarm_topic_key = key
        topic = sns.Topic(self, "AlarmTopic", display_name="Longhaul alarms", master_key=key, enforce_ssl=True)
        if email:
            topic.add_subscription(subscriptions.EmailSubscription(email))
        return topic

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """Publish to the alarm topic (and use its key for that, no more: no wildcard of `grant_publish`)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.alarm_topic.topic_arn])
        )
        self.alarm_topic_key.grant(grantee, "kms:Decrypt", "kms:GenerateDataKey")

    def notify_on_alarms(self, scope: IConstruct) -> list[cw.Alarm]:
        """Every alarm under `scope` (the builders' too) notifies the alarm topic; returns them."""
        action = cw_actions.SnsAction(self.alarm_topic)
        alarms = [node for node in scope.node.find_all() if isinstance(node, cw.Alarm)]
        for alarm in alarms:
            alarm.add_alarm_action(action)
        return alarms
