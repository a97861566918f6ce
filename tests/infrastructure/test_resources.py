"""Properties of the storage, API and functions that a deployment relies on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from longhaul.core import limits
from longhaul.workflows import REGISTRY
from stacks.api import OPS_PREFIX, OPS_PROXY, PROXIES, ROUTES, STREAM_ROUTES, gateway_routes
from tests.infrastructure.conftest import AUTO_DELETE_PROVIDER, resources


def test_jobs_table_is_on_demand_with_pitr_ttl_and_its_indexes(template):
    (table,) = resources(template, "AWS::DynamoDB::Table").values()
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    indexes = {
        (i["IndexName"], *(k["AttributeName"] for k in i["KeySchema"]), i["Projection"]["ProjectionType"])
        for i in props["GlobalSecondaryIndexes"]
    }
    # the unit tests' table is built from this construct, so the listings they test query these very indexes
    assert indexes == {
        ("by_tenant", "gsi1pk", "gsi1sk", "ALL"),
        ("by_state", "gsi2pk", "gsi2sk", "ALL"),
        ("by_created", "gsi3pk", "gsi3sk", "KEYS_ONLY"),  # keys only: job updates must not rewrite that index
    }


def test_buckets_are_encrypted_private_and_tls_only(template):
    buckets = resources(template, "AWS::S3::Bucket")
    policies = resources(template, "AWS::S3::BucketPolicy")
    for logical_id, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"], logical_id
        assert all(props["PublicAccessBlockConfiguration"].values()), logical_id
        tls = [
            s
            for p in policies.values()
            if p["Properties"]["Bucket"] == {"Ref": logical_id}
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
        ]
        assert tls and tls[0]["Effect"] == "Deny", f"{logical_id} does not enforce TLS"


def test_artifacts_bucket_expires_intermediate_artifacts_and_results_after_the_longest_retention(template):
    artifacts = [b for k, b in resources(template, "AWS::S3::Bucket").items() if k.startswith("StorageArtifacts")]
    rules = artifacts[0]["Properties"]["LifecycleConfiguration"]["Rules"]
    expiring = {r["Prefix"]: r["ExpirationInDays"] for r in rules if "ExpirationInDays" in r}
    # A Distributed Map's results are intermediate too, and so are Athena's query results (the analytics workgroup's);
    # the analytics export (`analytics/`) is kept; an S3 trigger's inbox object expires as uploads do (each was copied
    # to uploads). Results expire after the longest retention a tenant may have (the backstop of the retention sweep,
    # which erases each job when its own tenant's retention ends).
    assert set(expiring) == {"work/", "uploads/", "map-results/", "athena-results/", "results/", "inbox/"}
    assert expiring["results/"] > limits.RETENTION_DAYS_MAX


def test_every_api_route_is_a_lambda_proxy_to_the_api_function(template):
    methods = resources(template, "AWS::ApiGateway::Method")
    assert len(methods) == len(gateway_routes())
    for method in methods.values():
        integration = method["Properties"]["Integration"]
        assert integration["Type"] == "AWS_PROXY"
    assert {m["Properties"]["HttpMethod"] for m in methods.values()} == {verb for verb, _ in gateway_routes()}


def test_the_operator_routes_reach_the_gateway_as_one_greedy_resource_but_the_streamed_ones(template):
    """No operator route has a gateway method of its own but a streamed one; the greedy resource's method has the key
    authorizer, as every method but the public ones."""
    gateway = set(gateway_routes())
    assert ("ANY", OPS_PROXY) in gateway
    ops = [(verb, path) for verb, path in ROUTES if path.startswith(OPS_PREFIX)]
    assert ops and all(((verb, path) in gateway) == (path in STREAM_ROUTES) for verb, path in ops)
    methods = resources(template, "AWS::ApiGateway::Method").values()
    greedy = [m for m in methods if m["Properties"]["HttpMethod"] == "ANY"]
    assert len(greedy) == len(PROXIES)
    assert all(m["Properties"]["AuthorizationType"] == "CUSTOM" and m["Properties"]["AuthorizerId"] for m in greedy)


def test_what_hangs_below_a_job_a_schedule_or_a_trigger_reaches_the_gateway_as_one_greedy_resource_each():
    """A job's actions and views (but its stream), a schedule's and a trigger's own routes: one `ANY …/{proxy+}` each,
    to the API function; the collections and a job itself keep their methods."""
    gateway = set(gateway_routes())
    for prefix, proxy in PROXIES[1:]:
        below = [(verb, path) for verb, path in ROUTES if path.startswith(prefix) and path not in STREAM_ROUTES]
        assert below and not set(below) & gateway and ("ANY", proxy) in gateway, prefix
    assert {("POST", "/v1/jobs"), ("GET", "/v1/jobs/{job_id}"), ("GET", "/v1/jobs/{job_id}/stream")} <= gateway
    assert {("POST", "/v1/schedules"), ("GET", "/v1/triggers")} <= gateway


def test_the_routes_without_a_key_are_the_functions_public_paths():
    from handlers.api import PUBLIC_PATHS

    assert {("GET", path) for path in PUBLIC_PATHS} <= set(ROUTES)


def test_api_function_routes_match_the_gateway_routes():
    """Every gateway route reaches a resolver route, and the resolver serves nothing the gateway lacks (Swagger UI
    included)."""
    from handlers.api import app

    served = [(route.method.upper(), route.rule) for route in app._static_routes + app._dynamic_routes]
    assert len(served) == len(ROUTES)
    for verb, path in ROUTES:
        sample = path.replace("{job_id}", "job_0123")
        assert any(m == verb and rule.fullmatch(sample) for m, rule in served), (verb, path)


def test_the_sweeper_runs_on_a_schedule(template):
    rules = resources(template, "AWS::Events::Rule")
    sweepers = [
        k
        for k, f in resources(template, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == "handlers.ops.sweep"
    ]
    assert len(sweepers) == 1
    targeting = [
        r for r in rules.values() if r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [sweepers[0], "Arn"]}
    ]
    (rule,) = [r for r in targeting if "ScheduleExpression" in r["Properties"]]
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    # It also finishes the batch lane's batch inference jobs, on Bedrock's state-change events.
    (events,) = [r for r in targeting if "EventPattern" in r["Properties"]]
    assert events["Properties"]["EventPattern"] == {
        "source": ["aws.bedrock"],
        "detail-type": ["Batch Inference Job State Change"],
    }


def test_the_batch_lane_role_trusts_bedrock_for_this_account_and_is_passed_only_to_bedrock(template):
    roles = {
        k: r
        for k, r in resources(template, "AWS::IAM::Role").items()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
        == "bedrock.amazonaws.com"
    }
    (role_id,) = roles
    trust = roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    passes = [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == "iam:PassRole" and statement["Resource"] == {"Fn::GetAtt": [role_id, "Arn"]}
    ]
    assert passes and all(
        s["Condition"] == {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}} for s in passes
    )


def test_functions_are_traced_and_log_to_retained_groups(template):
    for logical_id, function in resources(template, "AWS::Lambda::Function").items():
        if logical_id.startswith(AUTO_DELETE_PROVIDER):  # CDK's own, for dev stages: it empties the buckets
            continue
        props = function["Properties"]
        assert props["TracingConfig"]["Mode"] == "Active", logical_id
        assert "LoggingConfig" in props, logical_id
        assert props["Environment"]["Variables"]["LONGHAUL_TABLE"], logical_id
    for group in resources(template, "AWS::Logs::LogGroup").values():
        assert group["Properties"].get("RetentionInDays"), group


def test_cdk_nag_reports_no_unacknowledged_finding(assembly: Path):
    report = json.loads((assembly / "validation-report.json").read_text())
    for plugin in report["pluginReports"]:
        assert plugin["conclusion"] == "success", [v["ruleName"] for v in plugin["violations"]]


def test_cfn_lint_finds_no_error(assembly: Path):
    template_file = next(assembly.glob("Longhaul-*.template.json"))
    result = subprocess.run(
        [sys.executable, "-m", "cfnlint", "--format", "parseable", "--", str(template_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings: list[Any] = [line for line in result.stdout.splitlines() if line.strip()]
    errors = [
        line for line in findings if ":E" in line or (line.split(":")[-2:-1] and line.split(":")[3].startswith("E"))
    ]
    assert not errors, "\n".join(errors)


def test_the_aws_configuration_passes_cdk_nag_and_grants_the_model_to_the_model_steps_only(bedrock_assembly: Path):
    report = json.loads((bedrock_assembly / "validation-report.json").read_text())
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])
    template = json.loads(next(bedrock_assembly.glob("Longhaul-prod.template.json")).read_text())
    granted = {
        logical_id
        for logical_id, policy in resources(template, "AWS::IAM::Policy").items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
    }
    # one grant per model step of each workflow, on that step function's role (its logical id names both)
    model_roles = {
        f"Workflows{spec.name.title().replace('-', '')}{step.replace('_', '')}ServiceRole"
        for spec in REGISTRY.values()
        for step in spec.model_steps
    }
    assert model_roles, "no workflow step calls a model"
    assert sorted(next((r for r in model_roles if g.startswith(r)), g) for g in granted) == sorted(model_roles)
    for function in resources(template, "AWS::Lambda::Function").values():
        assert function["Properties"]["Environment"]["Variables"]["LONGHAUL_MODEL_PROVIDER"] == "bedrock"


def test_operators_get_a_dashboard_of_jobs_executions_dead_letters_and_step_durations(template):
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for needle in ("JobsSubmitted", "ExecutionsFailed", "ApproximateNumberOfMessagesVisible", "StepDuration"):
        assert needle in body, needle


def test_every_step_functions_call_of_the_control_plane_is_granted(template):
    """The API functions (the tenants' and the operators') and the sweeper describe and stop executions (cancel,
    replay, redrive, sweep)."""
    needed = {
        "handlers.api.handler": {"states:StartExecution", "states:DescribeExecution", "states:StopExecution"},
        "handlers.ops.sweep": {"states:DescribeExecution", "states:StopExecution"},
    }
    functions = resources(template, "AWS::Lambda::Function")
    for handler, actions in needed.items():
        serving = [f for f in functions.values() if f["Properties"]["Handler"] == handler]
        assert len(serving) == (2 if handler == "handlers.api.handler" else 1), handler
        for function in serving:
            _assert_granted(template, handler, function, actions)


def _assert_granted(template: Any, handler: str, function: Any, actions: set[str]) -> None:
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    granted = {
        action
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")  # CDK's overflow goes to managed policies
        for policy in resources(template, kind).values()
        if {"Ref": role} in policy["Properties"].get("Roles", [])
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert actions <= granted, (handler, actions - granted)


def test_a_jobs_live_output_streams_through_api_gateway(template):
    """`GET …/stream` (tenant and operator): the integration streams (`responseTransferMode: STREAM`), so the function
    is invoked with InvokeWithResponseStream; every other route is buffered."""
    from stacks.api import STREAM_ROUTES

    resources_by_id = resources(template, "AWS::ApiGateway::Resource")
    streamed = {}
    for method in resources(template, "AWS::ApiGateway::Method").values():
        integration = method["Properties"]["Integration"]
        resource = resources_by_id.get(method["Properties"]["ResourceId"].get("Ref", ""), {})
        streamed[resource.get("Properties", {}).get("PathPart")] = integration
        uri = json.dumps(integration["Uri"])
        if integration.get("ResponseTransferMode") == "STREAM":
            assert "/2021-11-15/functions/" in uri and "/response-streaming-invocations" in uri
        else:
            assert "response-streaming-invocations" not in uri
    modes = [
        m["Properties"]["Integration"].get("ResponseTransferMode")
        for m in resources(template, "AWS::ApiGateway::Method").values()
    ]
    assert modes.count("STREAM") == len(STREAM_ROUTES) == 2
    assert streamed["stream"]["ResponseTransferMode"] == "STREAM"


# CloudFormation's bound on a stack's resources, and what a platform team's own workflow of about eight steps adds to
# it (a function, its role, policy and version, a dead-letter queue and its alarm per step; the tutorial's adds one).
STACK_RESOURCE_LIMIT = 500
ROOM_FOR_A_WORKFLOW = 50


def test_the_stack_leaves_room_for_a_workflow_of_the_platform_teams_own(template):
    count = len(template["Resources"])
    assert count <= STACK_RESOURCE_LIMIT - ROOM_FOR_A_WORKFLOW, (
        f"{count} resources: a workflow of eight steps would not fit in CloudFormation's {STACK_RESOURCE_LIMIT}"
    )
