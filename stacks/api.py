"""API: REST API Gateway → the API function (Powertools REST resolver, validated by the pydantic contracts); the
operator routes (`/v1/ops/…`) go to a function of their own, the same code under a role that may also read and delete
dead letters and step records, so the tenants' and reviewers' function can do neither."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct
from pydantic import BaseModel

from longhaul.core.budgets import TenantPolicy
from longhaul.core.contracts import (
    BulkReplayRequest,
    BulkTerminateRequest,
    EscalationRequest,
    InputFixRequest,
    JobUpdate,
    ReplayRequest,
    TerminateRequest,
    UploadRequest,
)
from longhaul.core.triggers import SchedulePatch, ScheduleRequest, TriggerPatch, TriggerRequest
from longhaul.review.contracts import DecisionRequest, ManualCompletionRequest
from stacks.functions import LOG_RETENTION, platform_function
from stacks.nag import acknowledge

# Every route the API function serves; a test checks this list against the function's resolver.
ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs/{job_id}"),
    ("GET", "/v1/jobs/{job_id}/events"),
    ("GET", "/v1/jobs/{job_id}/stream"),
    ("GET", "/v1/jobs/{job_id}/result"),
    ("GET", "/v1/jobs/{job_id}/result/download"),
    ("GET", "/v1/jobs/{job_id}/graph"),
    ("GET", "/v1/jobs/{job_id}/trace"),
    ("GET", "/v1/jobs/{job_id}/pages"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/jobs/{job_id}/cancel"),
    ("POST", "/v1/jobs/{job_id}/pause"),
    ("POST", "/v1/jobs/{job_id}/resume"),
    ("POST", "/v1/jobs/{job_id}/signals/{name}"),
    ("PATCH", "/v1/jobs/{job_id}"),
    ("DELETE", "/v1/jobs/{job_id}"),
    ("POST", "/v1/uploads"),
    ("POST", "/v1/schedules"),
    ("GET", "/v1/schedules"),
    ("GET", "/v1/schedules/{schedule_id}"),
    ("PATCH", "/v1/schedules/{schedule_id}"),
    ("DELETE", "/v1/schedules/{schedule_id}"),
    ("POST", "/v1/triggers"),
    ("GET", "/v1/triggers"),
    ("GET", "/v1/triggers/{trigger_id}"),
    ("PATCH", "/v1/triggers/{trigger_id}"),
    ("DELETE", "/v1/triggers/{trigger_id}"),
    ("GET", "/v1/ops/dead-letters"),
    ("GET", "/v1/ops/jobs"),
    ("GET", "/v1/ops/jobs/{job_id}"),
    ("GET", "/v1/ops/jobs/{job_id}/events"),
    ("GET", "/v1/ops/jobs/{job_id}/stream"),
    ("GET", "/v1/ops/jobs/{job_id}/graph"),
    ("GET", "/v1/ops/jobs/{job_id}/trace"),
    ("GET", "/v1/ops/jobs/{job_id}/calls"),
    ("GET", "/v1/ops/jobs/{job_id}/prompts/{prompt_hash}"),
    ("GET", "/v1/ops/jobs/{job_id}/responses/{response_hash}"),
    ("POST", "/v1/ops/jobs/{job_id}/cancel"),
    ("POST", "/v1/ops/jobs/{job_id}/pause"),
    ("POST", "/v1/ops/jobs/{job_id}/resume"),
    ("POST", "/v1/ops/jobs/{job_id}/signals/{name}"),
    ("POST", "/v1/ops/jobs/{job_id}/replay"),
    ("GET", "/v1/ops/jobs/{job_id}/input"),
    ("PATCH", "/v1/ops/jobs/{job_id}/input"),
    ("POST", "/v1/ops/jobs/{job_id}/escalate"),
    ("DELETE", "/v1/ops/jobs/{job_id}/escalate"),
    ("POST", "/v1/ops/jobs/{job_id}/manual-completion"),
    ("POST", "/v1/ops/jobs/{job_id}/terminate"),
    # Collection actions (AIP-136 custom methods: a colon in the path part; through `OPS_PROXY` like the rest).
    ("POST", "/v1/ops/jobs:replay"),
    ("POST", "/v1/ops/jobs:terminate"),
    ("PATCH", "/v1/ops/jobs/{job_id}"),
    ("GET", "/v1/ops/tenants/{tenant_id}/policy"),
    ("PUT", "/v1/ops/tenants/{tenant_id}/policy"),
    ("GET", "/v1/ops/tenants/{tenant_id}/memory"),
    ("DELETE", "/v1/ops/tenants/{tenant_id}/memory"),
    ("DELETE", "/v1/ops/tenants/{tenant_id}/memory/{memory_id}"),
    ("DELETE", "/v1/ops/tenants/{tenant_id}/data"),
    ("PATCH", "/v1/ops/tenants/{tenant_id}/policy"),
    ("GET", "/v1/ops/webhooks/dead-letters"),
    ("POST", "/v1/ops/webhooks/{webhook_id}/redeliver"),
    ("GET", "/v1/ops/metrics"),
    ("GET", "/v1/ops/events"),
    ("GET", "/v1/ops/reports"),
    ("GET", "/v1/reports/usage"),
    ("GET", "/v1/ops/audit"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/reviews"),
    ("GET", "/v1/reviews/{review_id}"),
    ("POST", "/v1/reviews/{review_id}/decision"),
    ("GET", "/v1/me"),
    # The MCP endpoint (Streamable HTTP, stateless: POST each message; GET, its stream, is a 405).
    ("POST", "/mcp"),
    ("GET", "/mcp"),
    # Without an API key (the function serves them before its key check).
    ("GET", "/v1/health"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/docs"),
    # The web console: its page and assets (the function serves them before its key check).
    ("GET", "/console"),
    ("GET", "/console/{proxy+}"),
)


OPS_PREFIX = "/v1/ops/"
#: The operator routes reach the gateway as one greedy resource: every `/v1/ops/…` path but a streamed one goes to the
#: operators' function, whose resolver routes it (and answers a known path's other methods with 405 and `Allow`, as the
#: gateway's own routes are answered). Two resources where one per path segment and method would be some sixty of the
#: stack's 500, and an operator route added later costs none.
OPS_PROXY = "/v1/ops/{proxy+}"
#: The same for what hangs below one job, one schedule, one trigger (`/v1/jobs/{job_id}/cancel`, `…/result/download`,
#: `/v1/schedules/{schedule_id}`…): one greedy resource each, to the API function, whose resolver routes the raw path.
#: A job's stream keeps its own (its integration streams). The collections and a job itself keep theirs.
PROXIES: tuple[tuple[str, str], ...] = (
    (OPS_PREFIX, OPS_PROXY),
    ("/v1/jobs/{job_id}/", "/v1/jobs/{job_id}/{proxy+}"),
    ("/v1/schedules/", "/v1/schedules/{proxy+}"),
    ("/v1/triggers/", "/v1/triggers/{proxy+}"),
)


def gateway_routes(routes: Sequence[tuple[str, str]] = ROUTES) -> tuple[tuple[str, str], ...]:
    """The gateway's methods: each route outside the greedy prefixes (`PROXIES`), the streamed routes (their
    integration streams), and `ANY <prefix>{proxy+}` for the rest of each prefix's routes."""
    own: list[tuple[str, str]] = []
    greedy: list[tuple[str, str]] = []
    for method, path in routes:
        proxy = next((p for prefix, p in PROXIES if path.startswith(prefix) and path not in STREAM_ROUTES), None)
        if proxy is None:
            own.append((method, path))
        elif ("ANY", proxy) not in greedy:
            greedy.append(("ANY", proxy))
    return (*own, *greedy)


#: Answered without a key (the function serves them before its key check).
# Without a key: the health check, the OpenAPI document and its viewer, and the console's page and assets (a browser
# loads them before anyone signs in; the console then calls the API with the key it is given).
PUBLIC_ROUTES = frozenset({"/v1/health", "/v1/openapi.json", "/v1/docs", "/console", "/console/{proxy+}"})
#: The routes whose integration streams the function's response (API Gateway's `responseTransferMode: STREAM`: the
#: function is invoked with InvokeWithResponseStream, and Server-Sent Events may flow up to 15 minutes).
STREAM_ROUTES = frozenset({"/v1/jobs/{job_id}/stream", "/v1/ops/jobs/{job_id}/stream"})
#: The routes with a JSON body, and its contract. API Gateway checks only that the body is a JSON object (one model
#: shared by every route, a resource of the stack's 500 each otherwise); the API function's pydantic validation is the
#: contract, with its field-level problems: a missing field is its `422` with `errors`, on AWS as on the local platform
#: (which runs no gateway validation), never the gateway's `400` first.
BODY_MODELS: dict[tuple[str, str], type[BaseModel] | None] = {
    ("POST", "/v1/jobs"): None,  # the union of the workflows' requests
    ("POST", "/v1/uploads"): UploadRequest,
    ("POST", "/v1/schedules"): ScheduleRequest,
    ("PATCH", "/v1/schedules/{schedule_id}"): SchedulePatch,
    ("POST", "/v1/triggers"): TriggerRequest,
    ("PATCH", "/v1/triggers/{trigger_id}"): TriggerPatch,
    ("POST", "/v1/ops/jobs/{job_id}/replay"): ReplayRequest,
    ("PATCH", "/v1/ops/jobs/{job_id}/input"): InputFixRequest,
    ("POST", "/v1/ops/jobs/{job_id}/escalate"): EscalationRequest,
    ("POST", "/v1/ops/jobs/{job_id}/manual-completion"): ManualCompletionRequest,
    ("POST", "/v1/ops/jobs/{job_id}/terminate"): TerminateRequest,
    ("POST", "/v1/ops/jobs:replay"): BulkReplayRequest,
    ("POST", "/v1/ops/jobs:terminate"): BulkTerminateRequest,
    ("PATCH", "/v1/jobs/{job_id}"): JobUpdate,
    ("PATCH", "/v1/ops/jobs/{job_id}"): JobUpdate,
    ("PUT", "/v1/ops/tenants/{tenant_id}/policy"): TenantPolicy,
    ("POST", "/v1/reviews/{review_id}/decision"): DecisionRequest,
}


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
        oidc: Mapping[str, str] | None = None,
    ) -> None:
        """`oidc`: the authorizer's `LONGHAUL_OIDC_*` settings (`stacks.identity.Identity.environment`): the issuer
        whose JWTs it accepts beside API keys."""
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
        self.ops_function = platform_function(
            self,
            "OpsHandler",
            code=code,
            handler="handlers.api.handler",
            service="longhaul-ops-api",
            environment=environment,
            timeout_seconds=29,
            memory_mb=1024,
            description="Longhaul HTTPS API v1: operator routes",
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
        # One invoke permission per function for this API (its `execute-api` ARN), not two per method: with some
        # forty methods those would be most of CloudFormation's 500 resources a stack may hold.
        integration = apigw.LambdaIntegration(self.function, proxy=True, scope_permission_to_method=False)
        ops_integration = apigw.LambdaIntegration(self.ops_function, proxy=True, scope_permission_to_method=False)
        # A job's live output (`STREAM_ROUTES`): the same functions, their responses streamed to the client.
        streamed = {
            function: apigw.LambdaIntegration(
                function,
                proxy=True,
                scope_permission_to_method=False,
                response_transfer_mode=apigw.ResponseTransferMode.STREAM,
            )
            for function in (self.function, self.ops_function)
        }
        # Unknown keys are refused here, before the API function runs (cached per key; see handlers/authorizer.py).
        # The cache TTL is a flood shield, not the revocation bound: the API function looks every key up again
        # through its own 10 s cache, so a revoked key is refused within LOOKUP_CACHE_SECONDS whatever is cached here.
        self.authorizer_function = platform_function(
            self,
            "Authorizer",
            code=code,
            handler="handlers.authorizer.handler",
            service="longhaul-authorizer",
            environment=environment,
            timeout_seconds=10,
            memory_mb=256,
            description="Longhaul API keys and JWTs: refuses unknown keys and invalid tokens before the API runs",
        )
        for name, value in (oidc or {}).items():
            self.authorizer_function.add_environment(name, value)
        authorizer = apigw.RequestAuthorizer(
            self,
            "Keys",
            handler=self.authorizer_function,
            identity_sources=[apigw.IdentitySource.header("Authorization")],
            results_cache_ttl=Duration.minutes(5),
        )
        # Bodies are checked against their contract's shape before the function runs (the function's pydantic
        # validation, with the field-level problems, stays the contract); a refusal is problem+json too.
        validator = self.rest_api.add_request_validator(
            "Bodies", validate_request_body=True, validate_request_parameters=True
        )
        self.rest_api.add_gateway_response(
            "BadBody",
            type=apigw.ResponseType.BAD_REQUEST_BODY,
            response_headers={"Content-Type": "'application/problem+json'"},
            templates={
                "application/json": '{"type": "https://longhaul.dev/problems/invalid-request", "title": "Invalid '
                'request body", "status": 400, "detail": "$context.error.validationErrorString"}'
            },
        )
        for kind in (apigw.ResponseType.UNAUTHORIZED, apigw.ResponseType.ACCESS_DENIED):
            self.rest_api.add_gateway_response(
                f"Refused{kind.response_type}",
                type=kind,
                status_code="401",
                response_headers={
                    "Content-Type": "'application/problem+json'",
                    "WWW-Authenticate": "'Bearer realm=\"longhaul\"'",
                },
                templates={
                    "application/json": '{"type": "https://longhaul.dev/problems/unauthorized", "title": "A valid API '
                    'key is required (Authorization: Bearer <key>)", "status": 401}'
                },
            )
        self.public_methods: list[apigw.Method] = []
        self._object_model: apigw.IModel | None = None
        for method, path in gateway_routes(routes):
            resource = self.rest_api.root.resource_for_path(path)
            public = path in PUBLIC_ROUTES
            function = self.ops_function if path.startswith(OPS_PREFIX) else self.function
            if path in STREAM_ROUTES:
                chosen = streamed[function]
            else:
                chosen = ops_integration if path.startswith(OPS_PREFIX) else integration
            added = resource.add_method(
                method,
                chosen,
                authorizer=None if public else authorizer,
                authorization_type=apigw.AuthorizationType.NONE if public else apigw.AuthorizationType.CUSTOM,
                request_validator=validator if (method, path) in BODY_MODELS else None,
                request_models={"application/json": self._body_model()} if (method, path) in BODY_MODELS else None,
            )
            if public:
                self.public_methods.append(added)
        for rule in ("APIG4", "COG4"):
            acknowledge(
                self.rest_api,
                rule,
                "Every route but the health check, the OpenAPI document and its viewer and the console's static files "
                "(public by design) has the Lambda authorizer of API keys (Authorization: Bearer) and optional JWTs.",
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

    def _body_model(self) -> apigw.IModel:
        """A JSON object (JSON Schema draft 4, as API Gateway reads it): the one model of every route with a body."""
        if self._object_model is None:
            self._object_model = self.rest_api.add_model(
                "JsonObjectBody",
                content_type="application/json",
                schema=apigw.JsonSchema(schema=apigw.JsonSchemaVersion.DRAFT4, type=apigw.JsonSchemaType.OBJECT),
            )
        return self._object_model
