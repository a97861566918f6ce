"""The Longhaul stack: composes the components, does the cross-component grants, tags, and runs cdk-nag."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Aws, RemovalPolicy, Stack, Tags
from aws_cdk import aws_iam as iam
from constructs import Construct

from longhaul.settings import Env
from longhaul.workflows import REGISTRY
from stacks.api import Api
from stacks.bundling import code_asset
from stacks.nag import acknowledge, acknowledge_data_access, acknowledge_executions, acknowledge_platform_findings
from stacks.observability import Observability
from stacks.operations import Operations
from stacks.storage import Storage
from stacks.workflows import Workflows


class LonghaulStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        bundle: bool,
        model_provider: str,
        model_id: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal = RemovalPolicy.DESTROY if stage in ("dev", "local", "test") else RemovalPolicy.RETAIN
        code = code_asset(bundle=bundle)

        storage = Storage(self, "Storage", removal_policy=removal)
        base_env = {
            Env.TABLE: storage.table.table_name,
            Env.BUCKET: storage.artifacts.bucket_name,
            Env.MODEL_PROVIDER: model_provider,
            Env.MODEL_ID: model_id,
            Env.STAGE: stage,
        }
        workflows = Workflows(self, "Workflows", code=code, environment=base_env)
        control_env = {
            **base_env,
            Env.WORKFLOWS: json.dumps(
                {name: machine.state_machine_arn for name, machine in workflows.state_machines.items()}
            ),
            Env.DEAD_LETTER_QUEUES: workflows.dead_letter_queues_env,
        }
        api = Api(self, "Api", code=code, stage_name=stage, environment=control_env)
        operations = Operations(self, "Operations", code=code, environment=control_env)

        # Cross-component grants.
        for function in (api.function, operations.sweeper, *workflows.functions):
            storage.grant_data_access(function)
        for machine in workflows.state_machines.values():
            machine.grant_start_execution(api.function)
            machine.grant_execution(
                api.function, "states:DescribeExecution", "states:StopExecution", "states:RedriveExecution"
            )
            machine.grant_execution(operations.sweeper, "states:DescribeExecution", "states:StopExecution")
            acknowledge_executions(self, machine)
        Observability(
            self,
            "Observability",
            state_machines=workflows.state_machines,
            steps={name: spec.step_names for name, spec in REGISTRY.items()},
            dead_letter_queues={w: b.dead_letter_queues for w, b in workflows.builders.items()},
        )
        if model_provider == "bedrock":
            self._grant_model(workflows, model_id)

        self.storage, self.api, self.workflows = storage, api, workflows
        Tags.of(self).add("project", "longhaul")
        Tags.of(self).add("stage", stage)
        acknowledge_platform_findings(self)
        acknowledge_data_access(self, table=storage.table, bucket=storage.artifacts)

    def _grant_model(self, workflows: Workflows, model_id: str) -> None:
        """bedrock:InvokeModel on the configured model only, for the steps that call it.

        A cross-region inference profile (`us.…`, `eu.…`) routes to the base model in several regions, so the
        foundation-model ARN has a region wildcard; nothing else is wildcarded.
        """
        profile = model_id.split(".", 1)[0] in ("us", "eu", "apac", "global", "us-gov", "ca", "jp", "au")
        base_model = model_id.split(".", 1)[1] if profile else model_id
        foundation = f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{base_model}"
        resources = [foundation]
        if profile:
            resources.append(f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{model_id}")
        statement = iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=resources)
        for function in workflows.model_functions():
            function.add_to_role_policy(statement)
        acknowledge(
            self,
            f"IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{base_model}]",
            "Cross-region inference profiles invoke the configured model in whichever region they route to.",
        )
