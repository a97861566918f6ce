"""Workflows: one Standard state machine per registered workflow, its step functions (one shared code asset), its
dead-letter queues and alarms. A workflow's chain derives from its spec (`state_machines.builder.define`), unless it
has a module `state_machines/<name with underscores>.py` for what the spec cannot say."""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable, Mapping

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longhaul.core.limits import MAX_DEADLINE_SECONDS
from longhaul.core.settings import Env
from longhaul.engine.spec import EMAIL
from longhaul.workflows import REGISTRY, WorkflowSpec
from stacks.email import Email
from stacks.functions import LOG_RETENTION, platform_function
from stacks.nag import acknowledge, arn_ref, logical_id
from state_machines.builder import LIVE_ALIAS, WorkflowBuilder
from state_machines.builder import define as define_from_spec
from state_machines.parts import ContainerTarget, FunctionFactory
from state_machines.policy import DEFAULT_POLICY, StepPolicy

# Per-job deadlines are enforced by the steps and the sweep; this bounds any execution.
EXECUTION_TIMEOUT = Duration.seconds(MAX_DEADLINE_SECONDS)


def state_machine_module(spec: WorkflowSpec) -> Callable[..., sfn.StateMachine]:
    """The workflow's own `define` (`state_machines/<name>.py`) if it has one; else the chain its spec says."""
    module = f"state_machines.{spec.name.replace('-', '_')}"
    if importlib.util.find_spec(module) is None:
        return define_from_spec
    define: Callable[..., sfn.StateMachine] = importlib.import_module(module).define
    return define


class Workflows(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        environment: Mapping[str, str],
        policy: StepPolicy = DEFAULT_POLICY,
        containers: Mapping[str, ContainerTarget] | None = None,
        artifacts: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._code = code
        self._environment = dict(environment)
        self.state_machines: dict[str, sfn.StateMachine] = {}
        self.aliases: dict[str, sfn.CfnStateMachineAlias] = {}  # by workflow: the `live` alias jobs start through
        self.builders: dict[str, WorkflowBuilder] = {}
        for spec in REGISTRY.values():
            scope_id = spec.name.title().replace("-", "")
            builder = WorkflowBuilder(
                self,
                scope_id,
                spec=spec,
                make_function=self._function_factory(scope_id),
                policy=policy,
                containers=containers,
                artifacts=artifacts,
                code_version=self._environment.get(Env.CODE_VERSION, ""),
            )
            self.builders[spec.name] = builder
            machine = state_machine_module(spec)(builder, timeout=EXECUTION_TIMEOUT)
            self.state_machines[spec.name] = machine
            self.aliases[spec.name] = builder.alias
            for function in builder.functions.values():
                acknowledge(
                    machine,
                    f"IAM5[Resource::{arn_ref(function)}:*]",
                    "Invoking any version or alias of this workflow's own step function.",
                )
            for function in builder.functions.values():
                acknowledge(
                    function,
                    "IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:"
                    f"{builder.machine_name}:*]",
                    "A step describes an execution of its own workflow's state machine: its job records the version "
                    "it runs.",
                )
            if builder.distributed_maps:
                _acknowledge_distributed_maps(machine, builder)
            for queue in builder.dead_letter_queues.values():
                acknowledge(
                    queue,
                    "SQS3",
                    "This queue is the step's dead-letter queue; a dead-letter queue of its own would add nothing.",
                )
        # The operator path (replay, the dead-letter listings) reads and deletes dead letters; no step does.
        self.dead_letter_queues_env = json.dumps(
            {w: {step: q.queue_url for step, q in b.dead_letter_queues.items()} for w, b in self.builders.items()}
        )

    def grant_dead_letters(self, grantee: iam.IGrantable) -> None:
        """Receive and delete the messages of every step's dead-letter queue (the operators' function)."""
        for builder in self.builders.values():
            for queue in builder.dead_letter_queues.values():
                queue.grant_consume_messages(grantee)

    def result_reading_functions(self) -> list[lambda_.IFunction]:
        """The functions of the steps that read other jobs' published results (their specs say so)."""
        return [b.functions[s.name] for b in self.builders.values() for s in b.spec.steps if s.reads_results]

    def publishing_functions(self) -> list[lambda_.IFunction]:
        """The functions of each workflow's result step (`WorkflowSpec.result_step`), which writes the published
        result (a child step or a skippable step may follow it)."""
        return [b.functions[b.spec.result_step] for b in self.builders.values()]

    def submitting_functions(self) -> list[lambda_.IFunction]:
        """The functions that submit jobs for a tenant (`longhaul.api.children`): a child step's (its child) and each
        workflow's last step's (a completing job submits the job its request's `then` chains)."""
        found: dict[str, lambda_.IFunction] = {}
        for b in self.builders.values():
            for name in (*(s.name for s in b.spec.child_steps), b.spec.last_step):
                found[b.functions[name].node.path] = b.functions[name]
        return list(found.values())

    def live_aliases_env(self) -> str:
        """`LONGHAUL_WORKFLOWS` for the step functions that submit jobs: each workflow's `live` alias by the ARN its
        machine's name gives (referencing the aliases would make the machines depend on their own functions)."""
        return json.dumps({name: f"{b.own_machine_arn}:{LIVE_ALIAS}" for name, b in self.builders.items()})

    def grant_submissions(self, grantees: list[lambda_.IFunction]) -> None:
        """StartExecution through every workflow's `live` alias (by name, as `live_aliases_env`), nothing else."""
        arns = [arn for b in self.builders.values() for arn in (b.own_machine_arn, f"{b.own_machine_arn}:*")]
        for function in grantees:
            function.add_to_role_policy(iam.PolicyStatement(actions=["states:StartExecution"], resources=arns))
            assert isinstance(function, lambda_.Function)
            function.add_environment(Env.WORKFLOWS, self.live_aliases_env())
            for b in self.builders.values():
                acknowledge(
                    function,
                    f"IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:stateMachine:"
                    f"{b.machine_name}:*]",
                    "Starts a job (a child step's, a chained one) through the workflow's alias: `<machine>:live`.",
                )

    def grant_child_ends(self) -> None:
        """A child workflow's functions (whatever ends its job) resume the waits of the workflows whose child steps
        start it: task responses on those machines only (by name)."""
        for parent in self.builders.values():
            for s in parent.spec.child_steps:
                assert s.child is not None
                for function in self.builders[s.child.workflow].functions.values():
                    function.add_to_role_policy(
                        iam.PolicyStatement(
                            actions=["states:SendTaskSuccess", "states:SendTaskFailure"],
                            resources=[parent.own_machine_arn],
                        )
                    )

    @property
    def functions(self) -> list[lambda_.IFunction]:
        return [f for b in self.builders.values() for f in b.functions.values()]

    def batch_functions(self) -> list[lambda_.IFunction]:
        """The functions of the fan-outs that call a model: they submit the batch lane's batch inference jobs."""
        return [f for b in self.builders.values() for f in b.batch_functions]

    def model_functions(self) -> list[lambda_.IFunction]:
        """The functions of the steps that call a model (their specs say so)."""
        return [b.functions[name] for b in self.builders.values() for name in b.spec.model_steps]

    def tool_functions(self) -> list[lambda_.IFunction]:
        """The functions that run tools: agent turns and compensation lanes (their calls assume the tool role)."""
        agents = [b.functions[s.name] for b in self.builders.values() for s in b.spec.agent_steps]
        lanes = [b.compensation_function for b in self.builders.values() if b.compensation_function is not None]
        return [*agents, *lanes]

    def tools_use(self, capability: str) -> bool:
        """Whether a tool an agent step may call, or a compensation, uses a capability (the tool role then needs it)."""
        return any(
            b.spec.steps_using(capability) or b.spec.compensations_use(capability) for b in self.builders.values()
        )

    def functions_using(self, capability: str) -> list[lambda_.IFunction]:
        """The functions whose tools use a capability: agent steps (their tools say so) and compensation lanes whose
        compensations do."""
        found = [b.functions[name] for b in self.builders.values() for name in b.spec.steps_using(capability)]
        found += [
            b.compensation_function
            for b in self.builders.values()
            if b.compensation_function is not None and b.spec.compensations_use(capability)
        ]
        return found

    def email_functions(self) -> list[lambda_.IFunction]:
        """The functions whose tools send e-mail: agent steps (their tools say so) and compensation lanes whose
        compensations do."""
        return self.functions_using(EMAIL)

    def grant_email(self, email: Email) -> None:
        """The sender's address to the functions whose tools send e-mail only; `ses:SendEmail` from it is the tool
        role's (`stacks/tools.py`): a tool sends with its job's credentials, never its function's."""
        for function in self.email_functions():
            assert isinstance(function, lambda_.Function)
            function.add_environment(Env.EMAIL_SENDER, email.sender)

    def _function_factory(self, prefix: str) -> FunctionFactory:
        shared_logs = logs.LogGroup(self, f"{prefix}-logs", retention=LOG_RETENTION)  # the workflow's functions' one

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
                log_group=shared_logs,
            )

        return make


def _acknowledge_distributed_maps(machine: sfn.StateMachine, builder: WorkflowBuilder) -> None:
    """The grants CDK's DistributedMap adds: its child executions (of this machine only) and the artifacts bucket's
    objects (the manifests under `work/`, the results under the map's prefix)."""
    assert builder.artifacts_bucket is not None
    bucket = logical_id(builder.artifacts_bucket)
    for resource in (f"arn:<AWS::Partition>:s3:::<{bucket}>/*", f"<{bucket}.Arn>/*"):
        acknowledge(
            machine,
            f"IAM5[Resource::{resource}]",
            "A Distributed Map reads its item manifest and writes its results in the artifacts bucket.",
        )
    own = '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"' + logical_id(machine) + '"}]}]}'
    acknowledge(
        machine,
        f"IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{own}/*:*]",
        "A Distributed Map describes and stops the child executions of this very state machine.",
    )
