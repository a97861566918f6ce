"""Observability: one CloudWatch dashboard for operators (jobs, executions, step durations, dead letters)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

NAMESPACE = "Longhaul"  # longhaul.observability.NAMESPACE
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
    ) -> None:
        super().__init__(scope, construct_id)
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
