"""The Longhaul stack: composes the components, does the cross-component grants, tags, and runs cdk-nag."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import ArnFormat, Aspects, Aws, CfnOutput, RemovalPolicy, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as sm
from aws_cdk.aws_stepfunctions import StateMachine
from constructs import Construct

from longhaul.adapters.models.bedrock import split_inference_profile
from longhaul.adapters.tool_credentials import ITEM_ACTIONS as TOOL_ITEM_ACTIONS
from longhaul.core import schema
from longhaul.core.analytics import ANALYTICS_PREFIX, DAILY_PREFIX
from longhaul.core.routes import Routing
from longhaul.core.settings import Env
from longhaul.engine.spec import EMAIL, FORGET
from longhaul.operations.admin import TABLE_OUTPUT, WEBHOOK_SECRETS_OUTPUT
from longhaul.workflows import REGISTRY
from stacks.admission import Admission, dispatcher_name
from stacks.analytics import Analytics, database_name, grant_day_file_reads
from stacks.api import Api
from stacks.audit import ArtifactsTrail
from stacks.batch import BatchLane
from stacks.bundling import code_asset, code_version
from stacks.email import DEFAULT_SENDER, Email
from stacks.events import Events
from stacks.functions import TRACE_READ_ACTIONS
from stacks.identity import Identity
from stacks.nag import (
    CheckovAcknowledgments,
    acknowledge,
    acknowledge_checkov,
    acknowledge_data_access,
    acknowledge_executions,
    acknowledge_platform_findings,
    arn_ref,
)
from stacks.observability import Observability
from stacks.operations import Operations
from stacks.storage import Storage
from stacks.tools import ToolRole
from stacks.triggers import Triggers
from stacks.webhooks import Webhooks
from stacks.workers import Workers
from stacks.workflows import Workflows

# Stages whose data goes with the stack; `local` is the embedded runtime's (its in-memory AWS cannot run the
# Node.js custom resource that empties buckets, and loses everything at exit anyway).
LOCAL_STAGE = "local"
OIDC_ISSUER_OUTPUT, OIDC_AUDIENCE_OUTPUT = "OidcIssuer", "OidcAudience"
DESTROYED_STAGES = ("dev", LOCAL_STAGE, "test")
EMPTIED_STAGES = ("dev", "test")


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
        alarm_email: str | None = None,
        model_routes: Mapping[str, Mapping[str, Any]] | None = None,
        step_routes: Mapping[str, str] | None = None,
        class_routes: Mapping[str, str] | None = None,
        callback_allowlist: str = "",
        container_insights: bool = False,
        max_jobs_in_flight: int = 1000,
        oidc_issuer: str | None = None,
        oidc_audience: str | None = None,
        oidc_jwks_url: str | None = None,
        oidc_claims: Mapping[str, str] | None = None,
        email_sender: str = DEFAULT_SENDER,
        manual_url: str = "",
        stuck_after_minutes: int = 15,
        review_wait_alarm_minutes: int = 240,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal = RemovalPolicy.DESTROY if stage in DESTROYED_STAGES else RemovalPolicy.RETAIN
        code = code_asset(bundle=bundle)
        # One secret per tenant under the stack's own prefix: two deployments in one account never share them.
        webhook_secrets_prefix = f"{self.stack_name}/webhooks/"

        storage = Storage(
            self,
            "Storage",
            removal_policy=removal,
            auto_delete_objects=stage in EMPTIED_STAGES,
            deletion_protection=stage not in DESTROYED_STAGES,
        )
        ArtifactsTrail(
            self,
            "ArtifactsTrail",
            artifacts=storage.artifacts,
            access_logs=storage.access_logs,
            removal_policy=removal,
            auto_delete_objects=stage in EMPTIED_STAGES,
        )
        batch_lane = BatchLane(self, "BatchLane", bucket=storage.artifacts)
        # The stack's event bus: job status changes and reviews go out on it, and rules on it start jobs.
        events_out = Events(self, "Events")
        base_env = {
            Env.TABLE: storage.table.table_name,
            Env.BUCKET: storage.artifacts.bucket_name,
            Env.MODEL_PROVIDER: model_provider,
            Env.MODEL_ID: model_id,
            Env.STAGE: stage,
            Env.CODE_VERSION: code_version(code, self),
            Env.WEBHOOK_SECRETS_PREFIX: webhook_secrets_prefix,
            # Whatever ends a job gives back its slot and wakes the dispatcher (by name: see stacks/admission.py).
            Env.ADMISSION_DISPATCHER: dispatcher_name(self),
            Env.MAX_JOBS_IN_FLIGHT: str(max_jobs_in_flight),
            Env.STUCK_AFTER_MINUTES: str(stuck_after_minutes),
            Env.REVIEW_WAIT_ALARM_MINUTES: str(review_wait_alarm_minutes),
            Env.BATCH_ROLE: batch_lane.role.role_arn,
            Env.EVENT_BUS: events_out.bus_name,
        }
        # Routes are checked at synthesis (unknown providers or route names fail here, not in a step).
        routing = Routing.configured(
            model_routes or {}, step_routes or {}, provider=model_provider, model_id=model_id, classes=class_routes
        )
        if model_routes:
            base_env[Env.MODEL_ROUTES] = json.dumps(model_routes, sort_keys=True)
        if step_routes:
            base_env[Env.STEP_ROUTES] = json.dumps(step_routes, sort_keys=True)
        if class_routes:
            base_env[Env.CLASS_ROUTES] = json.dumps(class_routes, sort_keys=True)
        if callback_allowlist:
            base_env[Env.CALLBACK_ALLOWLIST] = callback_allowlist
        if manual_url:  # the console's links to the manual (none without it)
            base_env[Env.MANUAL_URL] = manual_url
        webhooks = Webhooks(
            self, "Webhooks", code=code, environment=base_env, secrets_prefix=base_env[Env.WEBHOOK_SECRETS_PREFIX]
        )
        # Whatever changes a job's status writes its webhook to the outbox and starts its delivery.
        base_env = {**base_env, Env.WEBHOOK_DELIVERY: webhooks.state_machine.state_machine_arn}
        workers = Workers(
            self,
            "Workers",
            storage=storage,
            environment=base_env,
            removal_policy=removal,
            container_insights=container_insights,
        )
        workflows = Workflows(
            self,
            "Workflows",
            code=code,
            environment=base_env,
            containers=workers.targets,
            artifacts=storage.artifacts,
        )
        # Agents' e-mail tools send from one SES identity; only their functions may.
        email = Email(self, "Email", sender=email_sender)
        workflows.grant_email(email)
        control_env = {
            **base_env,
            Env.CONTAINER_CLUSTER: workers.cluster.cluster_arn,
            # Jobs start through each workflow's `live` alias (replays of an old job: on its own version).
            Env.WORKFLOWS: json.dumps({name: alias.attr_arn for name, alias in workflows.aliases.items()}),
            Env.DEAD_LETTER_QUEUES: workflows.dead_letter_queues_env,
        }
        admission = Admission(self, "Admission", code=code, environment=control_env)
        control_env = {**control_env, **admission.environment}
        # JWTs beside API keys: the stack's own Cognito user pool, or the external issuer the context names.
        identity = Identity(
            self,
            "Identity",
            removal_policy=removal,
            issuer=oidc_issuer,
            audience=oidc_audience,
            jwks_url=oidc_jwks_url,
            claims=oidc_claims,
        )
        api = Api(self, "Api", code=code, stage_name=stage, environment=control_env, oidc=identity.environment)
        operations = Operations(self, "Operations", code=code, environment=control_env)
        # The export registers its partitions in the Glue database on AWS; the local platform has no Glue (moto's
        # CloudFormation creates no Glue resources), and DuckDB reads the partitions from the paths there.
        catalog = {Env.ANALYTICS_DATABASE: database_name(self)} if stage != LOCAL_STAGE else {}
        analytics = Analytics(
            self, "Analytics", code=code, environment={**control_env, **catalog}, bucket=storage.artifacts
        )

        # Cross-component grants: each function reaches the items and object prefixes its own work needs.
        uploads, work, results = schema.UPLOADS_PREFIX, schema.WORK_PREFIX, schema.RESULTS_PREFIX
        # Tenants' and reviewers' routes: submissions (presigned uploads, the accepted input), results, reviews. No
        # deletes: a job the engine refuses waits in its intake queue (`discard_new_job` is only for a platform
        # without admission control, which a deployment never is).
        storage.grant_items(api.function)
        storage.grant_key_lookup(api.authorizer_function)
        # A reviewer's result for a failed job handed to a person is published by the reviewers' route: results.
        storage.grant_objects(api.function, read=[uploads, work, results], write=[uploads, work, results])
        # Schedules and triggers: the API function manages them and their fires reach it (`stacks/triggers.py`); an
        # inbox's object is read and copied to the tenant's uploads, a deleted schedule or trigger is deleted.
        triggers = Triggers(self, "Triggers", function=api.function, bucket=storage.artifacts)
        storage.grant_objects(api.function, read=[schema.INBOX_PREFIX], write=[schema.INBOX_PREFIX])
        storage.grant_item_deletes(api.function, partitions=schema.tenant_key("*")[schema.PK])
        # Operators: replays drop step records and remove dead letters; a fix of a job's input writes its new version,
        # and a manual completion keeps what the person starts from with the job's work.
        storage.grant_items(api.ops_function, delete=True, batch_write=True)
        storage.grant_objects(api.ops_function, read=[uploads, work, results], write=[work])
        # Erasure (a tenant's of its job, an operator's of a tenant, the sweep's at the end of retention): the job's
        # items, every version of its objects, its messages in the steps' dead-letter queues.
        erased = (uploads, work, results, schema.MAP_RESULTS_PREFIX, ANALYTICS_PREFIX)
        step_dead_letters = [q.queue_arn for b in workflows.builders.values() for q in b.dead_letter_queues.values()]
        for eraser in (api.function, api.ops_function, operations.sweeper):
            storage.grant_erasure(eraser, prefixes=erased, queue_arns=step_dead_letters)
        workflows.grant_dead_letters(api.ops_function)
        api.ops_function.add_to_role_policy(  # the metrics route reads the platform's metrics back
            iam.PolicyStatement(actions=["cloudwatch:ListMetrics", "cloudwatch:GetMetricData"], resources=["*"])
        )
        for function in workflows.functions:
            storage.grant_items(function)
            storage.grant_objects(function, read=[uploads, work], write=[work])
        # Tools (agents' and compensations'): one role, assumed per call with a session policy scoped to the call's
        # job; its own policy is what any tool may do on any job (`stacks/tools.py`). A compensation that forgets
        # memory deletes the tenant's memory items (`dynamodb:LeadingKeys` `MEMORY#*`), nothing else.
        tools = ToolRole(self, "Tools", functions=workflows.tool_functions())
        storage.grant_objects(tools.role, read=[uploads, work], write=[work])
        storage.grant_partition_items(
            tools.role, actions=TOOL_ITEM_ACTIONS, partitions=[schema.job_pk("*"), schema.memory_pk("*")]
        )
        if workflows.tools_use(FORGET):
            storage.grant_partition_items(
                tools.role, actions=["dynamodb:DeleteItem"], partitions=[schema.memory_pk("*")]
            )
        if workflows.tools_use(EMAIL):
            email.grant_send(tools.role)
        for function in workflows.result_reading_functions():  # e.g. a dispute reads its reconciliation's result
            storage.grant_objects(function, read=[results])
        for function in workflows.publishing_functions():
            storage.grant_objects(function, write=[results])
        for function in (operations.sweeper, admission.dispatcher, *webhooks.functions):
            storage.grant_items(function)
        # Jobs that start jobs (`longhaul.api.children`): a child step submits its child, a completing job the job its
        # `then` chains, through the admission path (the child reads its parent's published result); a child's end
        # resumes its parent's wait.
        submitting = workflows.submitting_functions()
        workflows.grant_submissions(submitting)
        for function in submitting:
            assert isinstance(function, lambda_.Function)
            for name, value in admission.environment.items():
                function.add_environment(name, value)
            admission.grant_enqueue(function)
            storage.grant_objects(function, read=[results])
        workflows.grant_child_ends()
        # Submissions (and the sweep's repairs) queue jobs; whatever can end a job wakes the dispatcher.
        for function in (api.function, api.ops_function, operations.sweeper):
            admission.grant_enqueue(function)
        admission.grant_wake(
            [
                api.function,
                api.ops_function,
                operations.sweeper,
                *workflows.functions,
                *(target.task_definition.task_role for target in workers.targets.values()),
            ]
        )
        for queue in admission.dead_letter_queues.values():
            acknowledge(queue, "SQS3", "This queue is an intake queue's dead-letter queue.")
        for function in (api.function, api.ops_function, operations.sweeper, *workflows.functions):
            webhooks.state_machine.grant_start_execution(function)
        acknowledge_executions(self, webhooks.state_machine)
        for function in webhooks.functions:
            acknowledge(
                webhooks.state_machine,
                f"IAM5[Resource::{arn_ref(function)}:*]",
                "Invoking any version or alias of the webhook delivery's own functions.",
            )
        acknowledge(
            webhooks.dead_letter_queue,
            "SQS3",
            "This queue is the webhooks' dead-letter queue; a dead-letter queue of its own would add nothing.",
        )
        acknowledge(
            webhooks.deliverer,
            "IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:"
            f"{base_env[Env.WEBHOOK_SECRETS_PREFIX]}*]",
            "Reads the webhook signing secret of whichever tenant the webhook belongs to; one secret per tenant, "
            "all under this stack's prefix.",
        )
        # The analytics export reads finished jobs (their cost counts their executions' transitions once), writes
        # their Parquet objects and folds them into the day files; the usage reports (tenants' and operators') read
        # the day files back.
        storage.grant_items(analytics.exporter)
        storage.grant_objects(analytics.exporter, write=[ANALYTICS_PREFIX, DAILY_PREFIX])
        for function in (analytics.exporter, api.function, api.ops_function):
            grant_day_file_reads(storage.artifacts, function)
        for function in (api.function, api.ops_function):  # a job's trace read back (`GET …/trace`)
            function.add_to_role_policy(iam.PolicyStatement(actions=list(TRACE_READ_ACTIONS), resources=["*"]))
        for machine in workflows.state_machines.values():  # a decision resumes the review's task token
            machine.grant_task_response(api.function)
            machine.grant_task_response(api.ops_function)  # an operator's cancel ends a review's wait
        for machine in workflows.state_machines.values():
            for function in (api.function, api.ops_function):  # submissions, cancellations, costs; replays
                grant_start(function, machine)
                machine.grant_execution(
                    function,
                    "states:DescribeExecution",
                    "states:StopExecution",
                    "states:GetExecutionHistory",  # a finished job's cost counts its state transitions
                    "states:DescribeStateMachineForExecution",  # a job's workflow graph: the definition it runs
                )
                grant_map_run_history(function, machine)
                # The graph of a job not started yet (the machine's definition), and a replay on the job's own
                # version first asks whether that version still exists (versions authorize on the machine's ARN).
                grant_qualified(function, machine, "states:DescribeStateMachine")
            machine.grant_execution(api.ops_function, "states:RedriveExecution")  # an operator's redrive
            grant_start(admission.dispatcher, machine)  # queued jobs, replays on their version, compensation lanes
            machine.grant_execution(operations.sweeper, "states:DescribeExecution", "states:StopExecution")
            machine.grant_execution(analytics.exporter, "states:DescribeExecution", "states:GetExecutionHistory")
            grant_map_run_history(analytics.exporter, machine)
            acknowledge_executions(self, machine)
        for name, builder in workflows.builders.items():  # a container task answers its own token, nothing else
            for target in builder.container_targets.values():
                workflows.state_machines[name].grant_task_response(target.task_definition.task_role)
        for function in (api.function, api.ops_function, operations.sweeper):  # a cancellation stops its tasks
            workers.grant_stop_tasks(function)
        for target in workers.targets.values():  # a worker's status change starts its webhook's delivery
            webhooks.state_machine.grant_start_execution(target.task_definition.task_role)
        observability = Observability(
            self,
            "Observability",
            state_machines=workflows.state_machines,
            steps={name: spec.step_names for name, spec in REGISTRY.items()},
            dead_letter_queues={w: b.dead_letter_queues for w, b in workflows.builders.items()},
            intake_queues=admission.queues,
            model_provider=model_provider,
            model_providers=sorted({r.provider for r in routing.routes.values()}),
            alarm_email=alarm_email,
            removal_policy=removal,
            review_workflows=[name for name, spec in REGISTRY.items() if spec.review_step is not None],
            stuck_after_minutes=stuck_after_minutes,
            review_wait_alarm_minutes=review_wait_alarm_minutes,
        )
        # Whatever writes a status change puts its events on the bus (`longhaul.storage.bus`); operators read the tap.
        putting: list[iam.IGrantable] = [
            api.function,
            api.ops_function,
            operations.sweeper,
            admission.dispatcher,
            *workflows.functions,
            *(target.task_definition.task_role for target in workers.targets.values()),
        ]
        for grantee in putting:
            events_out.grant_put(grantee)
        events_out.grant_tap_reads(api.ops_function)
        api.ops_function.add_environment(Env.EVENTS_TAP, events_out.tap.queue_url)
        # An operator's escalation of a job tells whoever the alarms tell (`longhaul.operations.repair`).
        api.ops_function.add_environment(Env.ALARM_TOPIC, observability.alarm_topic.topic_arn)
        observability.grant_publish(api.ops_function)
        for bedrock_model in sorted({r.model_id for r in routing.routes.values() if r.provider == "bedrock"}):
            self._grant_model(workflows, bedrock_model)
        # The batch lane: fan-outs submit their calls as batch inference jobs; the sweeper finishes them (on Bedrock's
        # state-change event, and on its schedule) and resumes their waits.
        batch_models = sorted({r.model_id for r in routing.routes.values() if r.provider == "bedrock"})
        batch_lane.grant_submit(
            workflows.batch_functions(),
            [f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{split_inference_profile(m)[1]}" for m in batch_models],
        )
        batch_lane.on_state_change(operations, operations.sweeper)
        storage.grant_objects(operations.sweeper, read=[work], write=[work])
        for function in (operations.sweeper, *workflows.batch_functions()):  # a resumed batch leaves the open ones
            storage.grant_item_deletes(function, partitions=schema.OPEN_BATCHES_PARTITION)
        for machine in workflows.state_machines.values():
            machine.grant_task_response(operations.sweeper)
        secrets = sorted({r.api_key_secret for r in routing.routes.values() if r.api_key_secret})
        self._grant_route_secrets(workflows, secrets)
        observability.notify_on_alarms(self)
        CfnOutput(self, TABLE_OUTPUT, value=storage.table.table_name, description="the jobs table (API keys live here)")
        CfnOutput(
            self, OIDC_ISSUER_OUTPUT, value=identity.issuer, description="the OIDC issuer whose JWTs the API takes"
        )
        CfnOutput(self, OIDC_AUDIENCE_OUTPUT, value=identity.audience, description="the audience (aud) of those JWTs")
        if identity.user_pool is not None:
            CfnOutput(self, "UserPoolId", value=identity.user_pool.user_pool_id, description="the API's Cognito users")
        CfnOutput(self, "AlarmTopicArn", value=observability.alarm_topic.topic_arn, description="alarm notifications")
        CfnOutput(
            self,
            WEBHOOK_SECRETS_OUTPUT,
            value=webhook_secrets_prefix,
            description="the tenants' webhook signing secrets in Secrets Manager: <prefix><tenant>",
        )

        self.storage, self.api, self.workflows, self.observability = storage, api, workflows, observability
        self.webhooks = webhooks
        self.workers = workers
        self.email = email
        self.tools = tools
        self.admission = admission
        self.analytics = analytics
        self.events = events_out  # `self.events.bus`: the stack's EventBridge bus
        self.triggers = triggers
        # moto's CloudFormation (the local runtime) fails on a KMS key's tags (it reads the KMS API's TagKey).
        untagged = ["AWS::KMS::Key"] if stage == LOCAL_STAGE else []
        Tags.of(self).add("project", "longhaul", exclude_resource_types=untagged)
        Tags.of(self).add("stage", stage, exclude_resource_types=untagged)
        acknowledge_platform_findings(self)
        Aspects.of(self).add(CheckovAcknowledgments())
        acknowledge_checkov(
            storage.access_logs, "CKV_AWS_18", "This bucket holds the access logs: logging it would log the logs."
        )
        acknowledge_checkov(
            storage.access_logs, "CKV_AWS_21", "Access logs are written once and expire after 90 days: nothing to keep."
        )
        for method in api.public_methods:
            acknowledge_checkov(
                method,
                "CKV_AWS_59",
                "Public by design: the health check, the OpenAPI document and its viewer, the console's static files.",
            )
        acknowledge_data_access(
            self,
            table=storage.table,
            bucket=storage.artifacts,
            prefixes=(
                uploads,
                work,
                results,
                schema.MAP_RESULTS_PREFIX,
                schema.INBOX_PREFIX,
                ANALYTICS_PREFIX,
                DAILY_PREFIX,
            ),
        )

    def _grant_route_secrets(self, workflows: Workflows, secrets: list[str]) -> None:
        """secretsmanager:GetSecretValue on the keys of OpenAI-compatible routes, for the steps that call a model."""
        for number, secret_id in enumerate(secrets):
            secret = (
                sm.Secret.from_secret_complete_arn(self, f"RouteKey{number}", secret_id)
                if secret_id.startswith("arn:")
                else sm.Secret.from_secret_name_v2(self, f"RouteKey{number}", secret_id)
            )
            for function in workflows.model_functions():
                secret.grant_read(function)

    def _grant_model(self, workflows: Workflows, model_id: str) -> None:
        """bedrock:InvokeModel (Converse) and InvokeModelWithResponseStream (ConverseStream: a call streamed as it is
        written) on the configured model only, for the steps that call it.

        A cross-region inference profile (`us.…`, `eu.…`) routes to the base model in several regions, so the
        foundation-model ARN has a region wildcard; nothing else is wildcarded.
        """
        profile, base_model = split_inference_profile(model_id)
        foundation = f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{base_model}"
        resources = [foundation]
        if profile:
            resources.append(f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{model_id}")
        statement = iam.PolicyStatement(
            actions=["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"], resources=resources
        )
        for function in workflows.model_functions():
            function.add_to_role_policy(statement)
        acknowledge(
            self,
            f"IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{base_model}]",
            "Cross-region inference profiles invoke the configured model in whichever region they route to.",
        )


def grant_qualified(grantee: iam.IGrantable, machine: StateMachine, *actions: str) -> None:
    """`actions` on the machine and on its versions and aliases (`<machine ARN>:*`): a version or an alias authorizes
    on its own qualified ARN, which a grant on the machine's ARN does not cover."""
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=list(actions), resources=[machine.state_machine_arn, f"{machine.state_machine_arn}:*"]
        )
    )


def grant_start(grantee: iam.IGrantable, machine: StateMachine) -> None:
    """StartExecution through the machine's `live` alias, or on a job's own version (a replay of an old job)."""
    grant_qualified(grantee, machine, "states:StartExecution")


def grant_map_run_history(grantee: iam.IGrantable, machine: StateMachine) -> None:
    """ListExecutions of the machine's Map runs (`mapRun:<machine>/<label>:<id>`) and GetExecutionHistory of their
    child executions (`execution:<machine>/<label>:<id>`): a finished job's cost counts the state transitions of its
    Distributed Maps' children too (without them its count is a lower bound, marked `estimated`). A job started on
    a version (through the `live` alias) runs Map runs whose ARNs carry the version (`mapRun:<machine>:1/<label>:<id>`,
    their children's likewise), so both forms are granted."""
    stack = Stack.of(machine)

    def arns(resource: str) -> list[str]:
        return [
            stack.format_arn(
                service="states",
                resource=resource,
                resource_name=f"{machine.state_machine_name}{qualifier}/*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for qualifier in ("", ":*")
        ]

    # ListExecutions with a `mapRunArn` is authorized on the map run; on the machine too, whichever IAM evaluates
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:ListExecutions"], resources=[*arns("mapRun"), machine.state_machine_arn])
    )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=["states:GetExecutionHistory"], resources=arns("execution"))
    )
