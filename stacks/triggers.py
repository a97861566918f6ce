"""Triggers in: what lets schedules, an S3 inbox and EventBridge rules start jobs through the API function.

- Schedules are EventBridge Scheduler schedules the API function creates at runtime (`POST /v1/schedules`), in a
  schedule group per tenant named `<prefix>-<tenant>`; they invoke the API function as `role`, which may invoke that
  function only. The API function may pass that role (to Scheduler only) and manage schedules and groups under its
  prefix only.
- The S3 inbox: the artifacts bucket sends its events to EventBridge (the bucket's own `EventBridgeConfiguration`: a
  CloudFormation property, no custom resource), and one rule on the default bus sends `Object Created` under
  `inbox/` to the API function.
- EventBridge triggers are rules the API function puts at runtime on the stack's bus (or a named one), named
  `<prefix>-trg_…`; the function's resource policy lets EventBridge invoke it from those rules only.

Five CloudFormation resources: the role and its policy, the inbox rule and its permission, the rules' permission.
"""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from longhaul.core import schema
from longhaul.core.settings import Env
from stacks.nag import acknowledge, arn_ref

SCHEDULE_ACTIONS = ("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule")
GROUP_ACTIONS = ("scheduler:CreateScheduleGroup", "scheduler:GetScheduleGroup")
RULE_ACTIONS = (
    "events:PutRule",
    "events:PutTargets",
    "events:DeleteRule",
    "events:RemoveTargets",
    "events:DescribeRule",
)


def trigger_prefix(scope: Construct) -> str:
    """The prefix of the deployment's schedule groups and rules: the stack's name (so two deployments never share)."""
    return Stack.of(scope).stack_name[:32]


class Triggers(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, function: lambda_.Function, bucket: s3.Bucket) -> None:
        super().__init__(scope, construct_id)
        prefix = trigger_prefix(self)
        arn = f"arn:{Aws.PARTITION}"
        where = f"{Aws.REGION}:{Aws.ACCOUNT_ID}"
        self.role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description="Longhaul: EventBridge Scheduler invokes the API function with this role (schedules' fires)",
        )
        # A policy of its own (not inline): the function's environment names the role, the role's policy the function.
        iam.Policy(
            self,
            "SchedulerInvoke",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[function.function_arn, f"{function.function_arn}:*"]
                )
            ],
        )
        function.add_environment(Env.SCHEDULER_ROLE, self.role.role_arn)
        function.add_environment(Env.TRIGGER_PREFIX, prefix)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(SCHEDULE_ACTIONS), resources=[f"{arn}:scheduler:{where}:schedule/{prefix}-*/*"]
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(GROUP_ACTIONS), resources=[f"{arn}:scheduler:{where}:schedule-group/{prefix}-*"]
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )
        # Rules on the default bus (`rule/<name>`) and on a named one (`rule/<bus>/<name>`), named `<prefix>-trg_…`.
        rules = [f"{arn}:events:{where}:rule/{prefix}-trg_*", f"{arn}:events:{where}:rule/*/{prefix}-trg_*"]
        function.add_to_role_policy(iam.PolicyStatement(actions=list(RULE_ACTIONS), resources=rules))
        function.add_permission(
            "TriggerRules",
            principal=iam.ServicePrincipal("events.amazonaws.com"),
            source_account=Aws.ACCOUNT_ID,
            source_arn=f"{arn}:events:{where}:rule/*{prefix}-trg_*",
        )
        scheduler_arn = "arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>"
        events_arn = "arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>"
        for resource, reason in (
            (
                f"{scheduler_arn}:schedule/{prefix}-*/*",
                "Schedules are created at runtime, one per tenant's schedule, in "
                "the tenants' groups of this deployment (named by its prefix).",
            ),
            (
                f"{scheduler_arn}:schedule-group/{prefix}-*",
                "A schedule group per tenant, created on its first schedule, named by this deployment's prefix.",
            ),
            (
                f"{events_arn}:rule/{prefix}-trg_*",
                "EventBridge triggers' rules are created at runtime, one per "
                "trigger, named by this deployment's prefix (default bus).",
            ),
            (
                f"{events_arn}:rule/*/{prefix}-trg_*",
                "EventBridge triggers' rules are created at runtime, one per "
                "trigger, named by this deployment's prefix (the stack's bus or a named one).",
            ),
        ):
            acknowledge(function, f"IAM5[Resource::{resource}]", reason)
        acknowledge(
            self,
            f"IAM5[Resource::{arn_ref(function)}:*]",
            "Scheduler invokes the API function by the ARN it was given, which may name a version or alias of it.",
        )
        # The S3 inbox: the bucket's events on the default bus, and the rule that sends the inbox's to the function.
        cfn_bucket = bucket.node.default_child
        assert isinstance(cfn_bucket, s3.CfnBucket)
        cfn_bucket.add_property_override("NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled", True)
        self.inbox_rule = events.Rule(
            self,
            "InboxObjects",
            description="Longhaul: an object created in an S3 trigger's inbox starts its job",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={
                    "bucket": {"name": [bucket.bucket_name]},
                    "object": {"key": [{"prefix": schema.INBOX_PREFIX}]},
                },
            ),
            targets=[targets.LambdaFunction(function, retry_attempts=2)],
        )
