"""cdk-nag: AwsSolutions checks run at synth. Each acknowledgment states a real reason, on the narrowest scope.

Findings about a specific resource's ARN are acknowledged by their exact finding id, so a new wildcard on
another resource still fails the synth.
"""

from __future__ import annotations

import jsii
from aws_cdk import Acknowledgment, CfnElement, CfnResource, IAspect, Stack, Validations
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
        "X-Ray (PutTraceSegments/PutTelemetryRecords, the spans' PutSpans/PutSpansForIndexing, BatchGetTraces), "
        "CloudWatch Logs delivery and CloudWatch metric reads (ListMetrics/GetMetricData, the operators' metrics "
        "route) do not support resource-level permissions.",
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
    acknowledge(
        scope,
        f"IAM5[Resource::<{logical_id(machine)}>:*]",
        "Starting or describing this one state machine's versions and aliases: jobs start through its `live` alias, "
        "a replay of an old job on the version it ran (a version or an alias authorizes on its own ARN).",
    )
    by_name = f"<{logical_id(machine)}.Name>"  # `state_machine_name`, as the map-run grants use it
    resources = [f"{arn}:{kind}:{by_name}{qualifier}/*" for kind in ("mapRun", "execution") for qualifier in ("", ":*")]
    for resource in resources:
        acknowledge(
            scope,
            f"IAM5[Resource::{resource}]",
            "Listing the child executions of this state machine's Distributed Map runs and reading their histories: "
            "a finished job's cost counts the transitions of its whole run.",
        )


# --- checkov ----------------------------------------------------------------------------------------------------
# checkov runs on the synthesized template (`tests/infrastructure/test_checkov.py`). Its findings are acknowledged in
# the template itself (`Metadata.checkov.skip`, each with its reason), by resource type here or on one resource
# (`acknowledge_checkov`); the test fails on any finding without one.

CHECKOV_BY_TYPE: dict[str, tuple[tuple[str, str], ...]] = {
    "AWS::Lambda::Function": (
        (
            "CKV_AWS_115",
            "Concurrency is bounded where it matters: admission control (jobs in flight per tenant and platform) and "
            "each Map's MaxConcurrency; a reserved limit per function would take from the account's pool.",
        ),
        (
            "CKV_AWS_116",
            "Invoked synchronously (API Gateway, Step Functions: a failure takes the step's catch to its own "
            "dead-letter queue); the asynchronous wakes of the dispatcher are repeated by its schedule.",
        ),
        (
            "CKV_AWS_117",
            "The functions call AWS public endpoints and allow-listed webhook receivers only; a VPC would need NAT "
            "or endpoints for every service and protects nothing here.",
        ),
        (
            "CKV_AWS_173",
            "The environment holds resource names and ARNs only; secrets are read from Secrets Manager.",
        ),
    ),
    "AWS::Logs::LogGroup": (
        (
            "CKV_AWS_158",
            "CloudWatch Logs encrypts at rest; every line is redacted first (no keys, tokens, secrets or document "
            "text: longhaul.core.observability.redact), so a customer managed key would guard nothing more.",
        ),
    ),
    "AWS::SQS::Queue": (
        (
            "CKV_AWS_27",
            "SQS-managed server-side encryption (SSE-SQS) encrypts every message at rest; messages hold references "
            "and sanitized errors only, and a KMS key would add a KMS request per message.",
        ),
    ),
    "AWS::DynamoDB::Table": (
        (
            "CKV_AWS_119",
            "Encrypted at rest with the AWS managed key; access is bounded by IAM per function (item actions), and a "
            "customer managed key would add cost per request without a boundary we need.",
        ),
    ),
    "AWS::ApiGateway::Stage": (
        (
            "CKV_AWS_120",
            "Responses are per tenant and change as jobs progress: a cache would serve stale status.",
        ),
    ),
    "AWS::ECS::Cluster": (
        (
            "CKV_AWS_65",
            "Container Insights is billed per metric; `longhaul:container_insights` turns it on.",
        ),
    ),
}


def acknowledge_checkov(resource: IConstruct, check: str, reason: str) -> None:
    """Acknowledge checkov's `check` on one resource (its CloudFormation metadata), with the reason."""
    cfn = resource.node.default_child if not isinstance(resource, CfnResource) else resource
    assert isinstance(cfn, CfnResource)
    metadata = cfn.get_metadata("checkov") or {"skip": []}
    metadata["skip"] = [*metadata["skip"], {"id": check, "comment": reason}]
    cfn.add_metadata("checkov", metadata)


@jsii.implements(IAspect)
class CheckovAcknowledgments:
    """Adds `CHECKOV_BY_TYPE` to every resource of those types."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource):
            for check, reason in CHECKOV_BY_TYPE.get(node.cfn_resource_type, ()):
                acknowledge_checkov(node, check, reason)
