"""Operations: the scheduled sweep that expires jobs past their deadline and reports stuck ones."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.functions import platform_function

SWEEP_EVERY = Duration.minutes(5)


class Operations(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, code: lambda_.Code, environment: Mapping[str, str]
    ) -> None:
        super().__init__(scope, construct_id)
        self.sweeper = platform_function(
            self,
            "Sweeper",
            code=code,
            handler="handlers.ops.sweep",
            service="longhaul-sweeper",
            environment=environment,
            timeout_seconds=120,
            memory_mb=512,
            description="Longhaul: expire jobs past their deadline, report jobs with no progress",
        )
        self.schedule = events.Rule(
            self,
            "Every5Minutes",
            schedule=events.Schedule.rate(SWEEP_EVERY),
            targets=[targets.LambdaFunction(self.sweeper, retry_attempts=2)],
        )
