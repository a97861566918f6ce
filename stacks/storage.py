"""Storage: the jobs table (jobs, steps, events, idempotency, API keys) and the artifacts bucket."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from longhaul.core import limits, schema

#: How long an overwritten or deleted artifact's previous version is kept.
NONCURRENT_DAYS = 7
#: What every function that keeps job state may do to the table's items (see `Storage.grant_items`).
ITEM_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:ConditionCheckItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)


class Storage(Construct):
    """`auto_delete_objects` (with a DESTROY removal policy) empties both buckets when the stack is deleted, so
    deleting a dev stage does not fail on non-empty buckets; it adds a custom resource (a Node.js Lambda)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        auto_delete_objects: bool = False,
        deletion_protection: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        if auto_delete_objects and removal_policy != RemovalPolicy.DESTROY:
            raise ValueError("auto_delete_objects needs removal_policy DESTROY: retained buckets keep their objects")
        self.table = dynamodb.Table(
            self,
            "Jobs",
            partition_key=dynamodb.Attribute(name=schema.PK, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=schema.SK, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=schema.TTL_ATTRIBUTE,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=removal_policy,
            # A stack update or a console click cannot delete the jobs (off for the stages that are torn down).
            deletion_protection=deletion_protection,
        )
        # by_tenant: a tenant's jobs by time; by_state: jobs by status (the sweep), dead letters by time;
        # by_created: every job by time (operators), keys only and written once per job.
        for index, (pk, sk) in schema.INDEXES.items():
            self.table.add_global_secondary_index(
                index_name=index,
                partition_key=dynamodb.Attribute(name=pk, type=dynamodb.AttributeType.STRING),
                sort_key=dynamodb.Attribute(name=sk, type=dynamodb.AttributeType.STRING),
                projection_type=dynamodb.ProjectionType.KEYS_ONLY
                if index in schema.KEYS_ONLY_INDEXES
                else dynamodb.ProjectionType.ALL,
            )
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=removal_policy,
            auto_delete_objects=auto_delete_objects,
        )
        self.artifacts = s3.Bucket(
            self,
            "Artifacts",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            # An overwritten or deleted object stays recoverable for NONCURRENT_DAYS (a rerun overwrites its keys).
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                *(
                    s3.LifecycleRule(
                        id=f"expire-{p.strip('/')}", prefix=p, expiration=Duration.days(schema.INTERMEDIATE_EXPIRY_DAYS)
                    )
                    for p in schema.INTERMEDIATE_PREFIXES
                ),
                # Results are kept as long as the longest retention allows, then expire whatever happened: the
                # backstop of the sweep, which erases each job when its own tenant's retention ends (one rule per
                # tenant's days is not something a bucket's lifecycle can hold).
                s3.LifecycleRule(
                    id="expire-results",
                    prefix=schema.RESULTS_PREFIX,
                    expiration=Duration.days(limits.RETENTION_DAYS_MAX + limits.RETENTION_BACKSTOP_DAYS),
                ),
                s3.LifecycleRule(id="abort-multipart", abort_incomplete_multipart_upload_after=Duration.days(1)),
                s3.LifecycleRule(id="noncurrent", noncurrent_version_expiration=Duration.days(NONCURRENT_DAYS)),
                s3.LifecycleRule(id="delete-markers", expired_object_delete_marker=True),
            ],
            cors=[
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.PUT],
                    allowed_origins=["*"],
                    allowed_headers=["*"],
                    max_age=3000,
                )
            ],
            removal_policy=removal_policy,
            auto_delete_objects=auto_delete_objects,
        )

    def grant_items(self, grantee: iam.IGrantable, *, delete: bool = False, batch_write: bool = False) -> None:
        """The item actions the platform's functions use on the jobs table and its indexes: read, query, put, update
        and condition checks (a transaction needs each of its items' actions); deleting and batch writes only where
        asked. Never Scan, never table administration."""
        actions = [
            *ITEM_ACTIONS,
            *(["dynamodb:DeleteItem"] if delete else []),
            *(["dynamodb:BatchWriteItem"] * batch_write),
        ]
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=actions, resources=[self.table.table_arn, f"{self.table.table_arn}/index/*"])
        )

    def grant_item_deletes(self, grantee: iam.IGrantable, *, partitions: str) -> None:
        """DeleteItem on the items whose partition key matches `partitions` (`MEMORY#*`) only."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:DeleteItem"],
                resources=[self.table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [partitions]}},
            )
        )

    def grant_partition_items(
        self, grantee: iam.IGrantable, *, actions: Sequence[str], partitions: Sequence[str]
    ) -> None:
        """`actions` on the table's items (never its indexes) whose partition key matches one of `partitions`
        (`JOB#*`, by `dynamodb:LeadingKeys`)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions),
                resources=[self.table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(partitions)}},
            )
        )

    def grant_key_lookup(self, grantee: iam.IGrantable) -> None:
        """GetItem of API key items (`APIKEY#<hash>`, by `dynamodb:LeadingKeys`): the API authorizer looks a key's
        hash up, nothing else (its lookups are kept `LOOKUP_CACHE_SECONDS` in the function, `storage/cache.py`)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"],
                resources=[self.table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [schema.api_key_key("*")[schema.PK]]}},
            )
        )

    def grant_erasure(self, grantee: iam.IGrantable, *, prefixes: Sequence[str], queue_arns: Sequence[str]) -> None:
        """What an erasure (`longhaul.operations.erasure`) needs beyond `grant_items`: deleting the job's items (one
        by one and in batches), listing (under `prefixes` only), reading and deleting every version of the objects
        under `prefixes` (the bucket is versioned: a plain DELETE would leave the content in a noncurrent version),
        and taking a job's messages off `queue_arns` (one statement for them all)."""
        self.grant_items(grantee, delete=True, batch_write=True)
        statements = [
            iam.PolicyStatement(
                actions=["s3:ListBucketVersions"],
                resources=[self.artifacts.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
            ),
            iam.PolicyStatement(
                actions=["s3:GetObjectVersion", "s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[self.artifacts.arn_for_objects(f"{p}*") for p in prefixes],
            ),
        ]
        if queue_arns:
            statements.append(
                iam.PolicyStatement(
                    actions=["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"],
                    resources=list(queue_arns),
                )
            )
        for statement in statements:
            grantee.grant_principal.add_to_principal_policy(statement)

    def grant_objects(self, grantee: iam.IGrantable, *, read: Sequence[str] = (), write: Sequence[str] = ()) -> None:
        """GetObject (and HeadObject) under the `read` prefixes, PutObject under the `write` ones; no listing, no
        deletes (intermediate objects expire by the bucket's lifecycle)."""
        for action, prefixes in (("s3:GetObject", read), ("s3:PutObject", write)):
            if prefixes:
                grantee.grant_principal.add_to_principal_policy(
                    iam.PolicyStatement(
                        actions=[action], resources=[self.artifacts.arn_for_objects(f"{p}*") for p in prefixes]
                    )
                )
