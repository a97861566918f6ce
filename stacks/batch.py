"""The batch lane's AWS parts: the service role Bedrock's batch inference jobs run with, the grants of the functions
that submit and finish them, and the EventBridge rule on Bedrock's job state changes (`longhaul.guardrails.batch`).

Few resources on purpose (the stack stays well under CloudFormation's 500): one role and its policy, one rule and its
invoke permission. The rule's target is the sweeper, whose five-minute schedule is also the lane's safety net.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from longhaul.core import schema
from longhaul.guardrails.batch import EVENT_DETAIL_TYPE, EVENT_SOURCE
from stacks.nag import acknowledge

INVOCATION_JOBS = "model-invocation-job/*"
# How cdk-nag names the wildcard of those jobs' ARNs.
JOBS_FINDING = f"IAM5[Resource::arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:{INVOCATION_JOBS}]"


class BatchLane(Construct):
    """The service role (trusting Bedrock, for this account's jobs only) with read and write on the artifacts'
    `work/` prefix, where a step writes its records and Bedrock its outputs. The bucket is S3-managed encrypted: no
    key to grant."""

    def __init__(self, scope: Construct, construct_id: str, *, bucket: s3.IBucket) -> None:
        super().__init__(scope, construct_id)
        account = Stack.of(self).account
        self.role = iam.Role(
            self,
            "ServiceRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": self.jobs_arn},
                },
            ),
            description="Longhaul: Bedrock batch inference jobs read their records and write their outputs",
        )
        work = bucket.arn_for_objects(f"{schema.WORK_PREFIX}*")
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[work]))
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{schema.WORK_PREFIX}*"]}},
            )
        )
        acknowledge(
            self,
            "IAM5",
            "Bedrock reads a job's records and writes its outputs under the work/ prefix, whose keys name the job "
            "and step; batch inference jobs are named per job and step, so their ARNs are not known at deploy time.",
        )

    @property
    def jobs_arn(self) -> str:
        return f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:{INVOCATION_JOBS}"

    def grant_submit(self, functions: Sequence[lambda_.IFunction], model_arns: Sequence[str]) -> None:
        """CreateModelInvocationJob (on the configured models) and passing the service role to Bedrock."""
        for function in functions:
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["bedrock:CreateModelInvocationJob"], resources=[self.jobs_arn, *model_arns]
                )
            )
            function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[self.role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
                )
            )
            acknowledge(
                function, JOBS_FINDING, "Batch inference jobs are named per job and step (not known at deploy)."
            )

    def on_state_change(self, scope: Construct, target: lambda_.IFunction) -> events.Rule:
        """Bedrock's batch job state changes go to `target` (which also reads and stops jobs: the check)."""
        target.add_to_role_policy(
            iam.PolicyStatement(
                actions=["bedrock:GetModelInvocationJob", "bedrock:StopModelInvocationJob"], resources=[self.jobs_arn]
            )
        )
        acknowledge(target, JOBS_FINDING, "Batch inference jobs are named per job and step (not known at deploy).")
        return events.Rule(
            scope,
            "BatchJobStateChange",
            event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=[EVENT_DETAIL_TYPE]),
            targets=[targets.LambdaFunction(target, retry_attempts=2)],
        )
