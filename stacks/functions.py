"""The platform's Lambda defaults, in one place: runtime, architecture, tracing (and its span export grants), retained
logs, service name, and retained versions."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.bundling import ARCHITECTURE, RUNTIME

LOG_RETENTION = logs.RetentionDays.ONE_MONTH
# What a function needs to send its spans to X-Ray over OTLP.
SPAN_EXPORT_ACTIONS = ("xray:PutSpans", "xray:PutSpansForIndexing")
# What the API functions need to read a job's trace back (`GET …/trace` on AWS).
TRACE_READ_ACTIONS = ("xray:BatchGetTraces",)


def platform_function(
    scope: Construct,
    construct_id: str,
    *,
    code: lambda_.Code,
    handler: str,
    service: str,
    environment: Mapping[str, str],
    timeout_seconds: int,
    memory_mb: int,
    description: str,
    log_group: logs.ILogGroup | None = None,
) -> lambda_.Function:
    """A platform function with the house defaults. Its logs go to `log_group` when given (a workflow's functions share
    one: a log group per function would put a workflow of ten steps fifty resources towards CloudFormation's 500 per
    stack, where a platform team's own workflow must still fit; each line names its function, `function_name`), else
    to a retained group of its own."""
    function = lambda_.Function(
        scope,
        construct_id,
        code=code,
        handler=handler,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        timeout=Duration.seconds(timeout_seconds),
        memory_size=memory_mb,
        environment={**environment, "POWERTOOLS_SERVICE_NAME": service},
        tracing=lambda_.Tracing.ACTIVE,
        log_group=log_group or logs.LogGroup(scope, f"{construct_id}-logs", retention=LOG_RETENTION),
        description=description,
        # A function's `current_version` (what a state machine version invokes) is retained when a deploy publishes
        # the next: executions started on an older state machine version still invoke it. Operators prune the ones
        # no job uses (`longhaul.operations.admin prune-versions`).
        current_version_options=lambda_.VersionOptions(removal_policy=RemovalPolicy.RETAIN),
    )
    # The function's OpenTelemetry spans go to X-Ray's OTLP endpoint (longhaul/core/otlp_xray.py): these actions have
    # no resource-level permissions (active tracing adds PutTraceSegments/PutTelemetryRecords the same way).
    function.add_to_role_policy(iam.PolicyStatement(actions=list(SPAN_EXPORT_ACTIONS), resources=["*"]))
    return function
