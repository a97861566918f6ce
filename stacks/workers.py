"""Workers: the ECS cluster and one Fargate task definition per container worker that a workflow's container step
runs (OCR), with its image built from `lambdas/workers/<name>/Dockerfile` as a CDK asset (synthesis stays offline
and Docker-free; `cdk deploy` builds and pushes it), its log group and a least-privilege task role.

Networking: a VPC of public subnets only, no NAT gateway. A task gets a public IP and a security group with no
inbound rule and outbound HTTPS only, which is all it needs (S3, DynamoDB, Step Functions, ECR, CloudWatch Logs
over their public endpoints). A NAT gateway would cost about 32 USD a month per AZ plus data processing, idle or
not; a public IPv4 address costs 0.005 USD an hour only while a task runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnElement, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from longhaul.core.schema import UPLOADS_PREFIX, WORK_PREFIX
from longhaul.core.settings import Env
from longhaul.workflows import REGISTRY
from stacks.bundling import LAMBDAS_DIR
from stacks.functions import LOG_RETENTION
from stacks.nag import acknowledge, arn_ref
from stacks.storage import Storage
from state_machines.parts import ContainerTarget
from state_machines.policy import DEFAULT_POLICY, StepPolicy

# What the image build context leaves out (it is `lambdas/`, so the image has the domain package and the worker).
IMAGE_EXCLUDE = ["**/__pycache__", "**/*.pyc", "tests", ".mypy_cache"]


class Workers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: Storage,
        environment: Mapping[str, str],
        removal_policy: RemovalPolicy,
        container_insights: bool = False,
        policy: StepPolicy = DEFAULT_POLICY,
    ) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)],
            # The restriction is a Lambda-backed custom resource; the tasks use their own security group anyway.
            restrict_default_security_group=False,
        )
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=LOG_RETENTION, removal_policy=removal_policy)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        self.security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="Longhaul container workers: no inbound; outbound HTTPS to AWS APIs",
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "AWS API endpoints")
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.vpc,
            container_insights_v2=(
                ecs.ContainerInsights.ENABLED if container_insights else ecs.ContainerInsights.DISABLED
            ),
        )
        if not container_insights:
            acknowledge(
                self.cluster,
                "ECS4",
                "Container Insights is optional (context longhaul:container_insights): tasks are short batch jobs "
                "whose logs and step metrics already cover them, and Insights bills per metric.",
            )
        self.targets: dict[str, ContainerTarget] = {}
        for name in sorted(REGISTRY.containers):
            self.targets[name] = self._worker(name, storage, environment, removal_policy, policy)

    def _worker(
        self,
        name: str,
        storage: Storage,
        environment: Mapping[str, str],
        removal_policy: RemovalPolicy,
        policy: StepPolicy,
    ) -> ContainerTarget:
        task_definition = ecs.FargateTaskDefinition(
            self,
            f"{name}-task",
            cpu=policy.container_cpu,
            memory_limit_mib=policy.container_memory_mb,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        # Each deploy that changes the task registers a new revision; the one an older state machine version names
        # stays registered (and usable) for the executions that started on it (task definitions cost nothing).
        task_definition.apply_removal_policy(RemovalPolicy.RETAIN)
        log_group = logs.LogGroup(self, f"{name}-logs", retention=LOG_RETENTION, removal_policy=removal_policy)
        task_definition.add_container(
            name,
            image=ecs.ContainerImage.from_asset(
                str(LAMBDAS_DIR),
                file=f"workers/{name}/Dockerfile",
                platform=ecr_assets.Platform.LINUX_ARM64,
                exclude=IMAGE_EXCLUDE,
            ),
            # the task's size, so the worker can say what its time costs
            environment={
                **environment,
                Env.TASK_CPU: str(policy.container_cpu),
                Env.TASK_MEMORY_MB: str(policy.container_memory_mb),
            },
            logging=ecs.LogDrivers.aws_logs(stream_prefix=name, log_group=log_group),
            memory_limit_mib=policy.container_memory_mb,
            readonly_root_filesystem=False,  # the OCR engine caches its optimized models on local disk
        )
        acknowledge(
            task_definition,
            "ECS2",
            "The environment holds resource names (table, bucket, stage), no secret; the task token and the step's "
            "references come per task as container overrides.",
        )
        self._grant_data(task_definition.task_role, storage)
        bucket = arn_ref(storage.artifacts)
        for prefix in (WORK_PREFIX, UPLOADS_PREFIX):
            acknowledge(
                task_definition,
                f"IAM5[Resource::{bucket}/{prefix}*]",
                "Objects are keyed per job under these prefixes of the artifacts bucket; the task reads a job's "
                "documents and writes its intermediate artifacts there only (no results, no deletes).",
            )
        return ContainerTarget(
            cluster=self.cluster,
            task_definition=task_definition,
            container_name=name,
            subnet_ids=[s.subnet_id for s in self.vpc.public_subnets],
            security_group_ids=[self.security_group.security_group_id],
            assign_public_ip=True,
        )

    @staticmethod
    def _grant_data(role: iam.IRole, storage: Storage) -> None:
        """Read the job's documents and intermediate artifacts, write its intermediate artifacts (never results,
        never deletes); read and write the job's items (the runner's live-job check, step record, checkpoint and
        events, as every step does: the job and its record in one BatchGetItem, the start and the commit each one
        transaction of puts, updates and condition checks). The task-token calls are granted by the stack on the
        state machines."""
        bucket = storage.artifacts
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(f"{WORK_PREFIX}*"), bucket.arn_for_objects(f"{UPLOADS_PREFIX}*")],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{WORK_PREFIX}*")])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:BatchGetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:Query",
                    "dynamodb:ConditionCheckItem",
                ],
                resources=[storage.table.table_arn],
            )
        )

    def grant_stop_tasks(self, grantee: iam.IGrantable) -> None:
        """List, describe and stop the cluster's tasks (a cancellation stops its job's running tasks)."""
        cluster = {"ArnEquals": {"ecs:cluster": self.cluster.cluster_arn}}
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:ListTasks"], resources=["*"], conditions=cluster)
        )
        acknowledge(
            grantee.grant_principal if isinstance(grantee.grant_principal, Construct) else self,
            f"IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/{self._cluster_ref()}/*]",
            "A cancellation stops tasks of its job, whose ids it learns from ListTasks: any task of this cluster.",
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:DescribeTasks", "ecs:StopTask"],
                resources=[self.cluster.arn_for_tasks("*")],
                conditions=cluster,
            )
        )

    def _cluster_ref(self) -> str:
        """How cdk-nag writes the cluster's `Ref` in a finding id."""
        cfn = self.cluster.node.default_child
        assert isinstance(cfn, CfnElement)
        stack = Stack.of(self)
        return f"<{stack.resolve(stack.get_logical_id(cfn))}>"
