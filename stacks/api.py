"""API: REST API Gateway → one API function (Powertools REST resolver, validated by the pydantic contracts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.functions import LOG_RETENTION, platform_function
from stacks.nag import acknowledge

# Every route the API function serves; a test checks this list against the function's resolver.
ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs/{job_id}"),
    ("GET", "/v1/jobs/{job_id}/events"),
    ("GET", "/v1/jobs/{job_id}/result"),
    ("GET", "/v1/jobs/{job_id}/graph"),
    ("GET", "/v1/jobs/{job_id}/pages"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/jobs/{job_id}/cancel"),
    ("POST", "/v1/uploads"),
    ("GET", "/v1/ops/dead-letters"),
    ("GET", "/v1/ops/jobs"),
    ("GET", "/v1/ops/jobs/{job_id}"),
    ("GET", "/v1/ops/jobs/{job_id}/events"),
    ("GET", "/v1/ops/jobs/{job_id}/graph"),
    ("GET", "/v1/ops/jobs/{job_id}/calls"),
    ("GET", "/v1/ops/jobs/{job_id}/prompts/{prompt_hash}"),
    ("GET", "/v1/ops/jobs/{job_id}/responses/{response_hash}"),
    ("POST", "/v1/ops/jobs/{job_id}/cancel"),
    ("POST", "/v1/ops/jobs/{job_id}/replay"),
    ("GET", "/v1/ops/tenants/{tenant_id}/policy"),
    ("PUT", "/v1/ops/tenants/{tenant_id}/policy"),
    ("GET", "/v1/ops/tenants/{tenant_id}/memory"),
    ("DELETE", "/v1/ops/tenants/{tenant_id}/memory"),
    ("DELETE", "/v1/ops/tenants/{tenant_id}/memory/{memory_id}"),
    ("PATCH", "/v1/ops/tenants/{tenant_id}/policy"),
    ("GET", "/v1/ops/webhooks/dead-letters"),
    ("POST", "/v1/ops/webhooks/{webhook_id}/redeliver"),
    ("GET", "/v1/reviews"),
    ("GET", "/v1/reviews/{review_id}"),
    ("POST", "/v1/reviews/{review_id}/decision"),
    ("GET", "/v1/me"),
    # Without an API key (the function serves them before its key check).
    ("GET", "/v1/health"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/docs"),
    # The web console: its page and assets (the function serves them before its key check).
    ("GET", "/console"),
    ("GET", "/console/{proxy+}"),
)


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        environment: Mapping[str, str],
        stage_name: str,
        routes: Sequence[tuple[str, str]] = ROUTES,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = platform_function(
            self,
            "Handler",
            code=code,
            handler="handlers.api.handler",
            service="longhaul-api",
            environment=environment,
            timeout_seconds=29,
            memory_mb=1024,
            description="Longhaul HTTPS API v1",
        )
        access_logs = logs.LogGroup(self, "AccessLogs", retention=LOG_RETENTION)
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            description="Longhaul API",
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                tracing_enabled=True,
                logging_level=apigw.MethodLoggingLevel.INFO,
                metrics_enabled=True,
                throttling_rate_limit=100,
                throttling_burst_limit=200,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
            endpoint_types=[apigw.EndpointType.REGIONAL],
        )
        integration = apigw.LambdaIntegration(self.function, proxy=True)
        for method, path in routes:
            resource = self.rest_api.root.resource_for_path(path)
            resource.add_method(method, integration)
        acknowledge(
            self.rest_api,
            "APIG2",
            "Requests are validated by the API function against the pydantic contracts, which answers with "
            "RFC 9457 problem+json listing what is allowed; API Gateway models would duplicate them.",
        )
        for rule in ("APIG4", "COG4"):
            acknowledge(
                self.rest_api,
                rule,
                "Clients authenticate with tenant API keys (Authorization: Bearer) that the API function verifies "
                "against hashed keys in the jobs table and maps to a tenant; there are no Cognito users.",
            )
        acknowledge(
            self.rest_api,
            "APIG3",
            "The WAF web ACL is account-specific and associated by the platform team at deploy time.",
        )
        acknowledge(
            self.rest_api,
            "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
            "The account-level role API Gateway uses to write access and execution logs; AWS maintains it.",
        )
