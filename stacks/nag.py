"""cdk-nag: AwsSolutions checks run at synth. Each acknowledgment states a real reason, on the narrowest scope.

Findings about a specific resource's ARN are acknowledged by their exact finding id, so a new wildcard on
another resource still fails the synth.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from constructs import Construct, IConstruct

PACK = "AwsSolutions::AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge `rule` (e.g. `IAM5[Resource::*]`) for findings on `scope` and below."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PACK}-{rule}", reason=reason))


def arn_ref(resource: IConstruct) -> str:
    """How cdk-nag writes a resource's `Fn::GetAtt Arn` in a finding id: `<LogicalId.Arn>`."""
    return f"<{logical_id(resource)}.Arn>"


def logical_id(resource: IConstruct) -> str:
    """A resource's logical id (how cdk-nag writes its `Ref` in a finding id, inside `<>` or a rendered intrinsic)."""
    cfn = resource.node.default_child
    assert isinstance(cfn, CfnElement)
    stack = Stack.of(resource)
    return str(stack.resolve(stack.get_logical_id(cfn)))


def acknowledge_platform_findings(stack: Stack) -> None:
    """Findings that hold for every function and role of the platform."""
    acknowledge(
        stack,
        "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "Grants only logs:CreateLogGroup/CreateLogStream/PutLogEvents, which every function needs to log.",
    )
    acknowledge(
        stack,
        "IAM5[Resource::*]",
        "X-Ray (PutTraceSegments/PutTelemetryRecords) and CloudWatch Logs delivery APIs do not support "
        "resource-level permissions.",
    )


def acknowledge_data_access(
    scope: Construct, *, table: IConstruct, bucket: IConstruct, prefixes: tuple[str, ...] = ()
) -> None:
    acknowledge(
        scope,
        f"IAM5[Resource::{arn_ref(table)}/index/*]",
        "Queries the jobs table's own secondary indexes (listing a tenant's jobs by time).",
    )
    acknowledge(
        scope,
        f"IAM5[Resource::{arn_ref(bucket)}/*]",
        "CDK's Distributed Map grants: its item reader and result writer reach the artifacts bucket's objects.",
    )
    for prefix in prefixes:
        acknowledge(
            scope,
            f"IAM5[Resource::{arn_ref(bucket)}/{prefix}*]",
            f"Objects under `{prefix}` are keyed per tenant or job and step; each function gets only the prefixes "
            "its own work reads or writes (Storage.grant_objects).",
        )


def _machine_name(machine: IConstruct) -> str:
    """How cdk-nag writes the state machine name that `grant_execution` cuts from the machine's ARN (`Fn::Select`
    over `Fn::Split`), in a finding id; `state_machine_name` itself is written `<LogicalId.Name>`."""
    cfn = machine.node.default_child
    assert isinstance(cfn, CfnElement)
    stack = Stack.of(machine)
    logical_id = stack.resolve(stack.get_logical_id(cfn))
    return f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{logical_id}"}}]}}]}}'


def acknowledge_executions(scope: Construct, machine: IConstruct) -> None:
    """`grant_execution` scopes to this state machine's executions (`execution:<name>:*`); the map-run reads
    (`longhaul_stack.grant_map_run_history`) to its Distributed Maps' runs and their child executions."""
    name = _machine_name(machine)
    arn = "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
    acknowledge(
        scope,
        f"IAM5[Resource::{arn}:execution:{name}:*]",
        "Stopping or redriving any execution of this one state machine (cancellation, deadlines, operator redrive).",
    )
    by_name = f"<{logical_id(machine)}.Name>"  # `state_machine_name`, as the map-run grants use it
    for resource in (f"{arn}:mapRun:{by_name}/*", f"{arn}:execution:{by_name}/*"):
        acknowledge(
            scope,
            f"IAM5[Resource::{resource}]",
            "Listing the child executions of this state machine's Distributed Map runs and reading their histories: "
            "a finished job's cost counts the transitions of its whole run.",
        )
