"""Workflows: the step functions (one shared code asset) and one Standard state machine per workflow type."""

from __future__ import annotations

import json
from collections.abc import Mapping

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longhaul.settings import Env
from stacks.functions import platform_function
from state_machines import document_analysis
from state_machines.builder import WorkflowBuilder
from state_machines.policy import DEFAULT_POLICY, StepPolicy

WORKFLOW_MODULES = {document_analysis.WORKFLOW: document_analysis}


class Workflows(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        environment: Mapping[str, str],
        policy: StepPolicy = DEFAULT_POLICY,
    ) -> None:
        super().__init__(scope, construct_id)
        self._code = code
        self._environment = dict(environment)
        self.state_machines: dict[str, sfn.StateMachine] = {}
        self.builders: dict[str, WorkflowBuilder] = {}
        for workflow, module in WORKFLOW_MODULES.items():
            scope_id = workflow.title().replace("-", "")
            builder = WorkflowBuilder(
                self,
                scope_id,
                workflow=workflow,
                make_function=self._function_factory(scope_id),
                policy=policy,
            )
            self.builders[workflow] = builder
            self.state_machines[workflow] = module.define(builder)
        # Each step knows every dead-letter queue of its workflow (a completed replay removes the job's letters).
        self.dead_letter_queues_env = json.dumps(
            {w: {step: q.queue_url for step, q in b.dead_letter_queues.items()} for w, b in self.builders.items()}
        )
        for builder in self.builders.values():
            for function in builder.functions.values():
                assert isinstance(function, lambda_.Function)
                function.add_environment(Env.DEAD_LETTER_QUEUES, self.dead_letter_queues_env)
                for queue in builder.dead_letter_queues.values():
                    queue.grant_consume_messages(function)

    @property
    def functions(self) -> list[lambda_.IFunction]:
        return [f for b in self.builders.values() for f in b.functions.values()]

    def _function_factory(self, prefix: str):
        def make(name: str, handler: str, timeout: int, memory_mb: int) -> lambda_.IFunction:
            return platform_function(
                self,
                f"{prefix}-{name}",
                code=self._code,
                handler=handler,
                service=f"longhaul-{name}",
                environment=self._environment,
                timeout_seconds=timeout,
                memory_mb=memory_mb,
                description=f"Longhaul step {name} ({prefix})",
            )

        return make
