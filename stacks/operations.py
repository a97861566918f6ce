"""Operations: the scheduled sweep that expires jobs past their deadline and reports stuck ones."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.bundling import ARCHITECTURE, RUNTIME

SWEEP_EVERY = Duration.minutes(5)


class Operations(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, code: lambda_.Code, environment: Mapping[str, str]
    ) -> None:
        super().__init__(scope, construct_id)
        self.sweeper = lambda_.Function(
            self,
            "Sweeper",
            code=code,
            handler="handlers.ops.sweep",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            timeout=Duration.minutes(2),
            memory_size=512,
            environment={**environment, "POWERTOOLS_SERVICE_NAME": "longhaul-sweeper"},
            tracing=lambda_.Tracing.ACTIVE,
            log_group=logs.LogGroup(self, "SweeperLogs", retention=logs.RetentionDays.ONE_MONTH),
            description="Longhaul: expire jobs past their deadline, report jobs with no progress",
        )
        self.schedule = events.Rule(
            self,
            "Every5Minutes",
            schedule=events.Schedule.rate(SWEEP_EVERY),
            targets=[targets.LambdaFunction(self.sweeper, retry_attempts=2)],
        )
