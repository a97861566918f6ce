"""Analytics over every job: the export function on its schedule, the Glue database and tables over the Parquet files
it writes under the artifacts bucket's `analytics/` prefix, and an Athena workgroup to query them.

- The export runs on a schedule of its own (`EXPORT_EVERY`): nothing on a job's path calls it, so it adds no state
  transition and can never fail a job (`longhaul.operations.analytics`).
- After writing a run's job files, the export folds their rows into one file per table and day under
  `analytics-daily/` (outside the tables' locations, so Athena never counts a row twice): the usage report reads
  those only, three objects per day of its window.
- The tables are declared, not crawled: their columns come from the rows' models (`longhaul.core.analytics.columns`),
  so the files and the catalog cannot drift. Their partitions (`dt`, `tenant_id`, `workflow`) are registered by the
  export as it writes a partition's first object (`glue:BatchCreatePartition`, an existing one left as it is).
  Partition projection would need no registration, but it cannot list tenants: `tenant_id` would have to be
  `injected`, which refuses every query that does not name one tenant (an operator's report names none).
- The workgroup enforces its configuration: its own results prefix (`athena-results/`, expiring), results encrypted,
  metrics published, a bound on the bytes one query scans.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from longhaul.core.analytics import ANALYTICS_PREFIX, DAILY_PREFIX, PARTITION_COLUMNS, TABLES, columns
from longhaul.storage.analytics import PARQUET_INPUT, PARQUET_OUTPUT, PARQUET_SERDE
from stacks.functions import platform_function

EXPORT_EVERY = Duration.minutes(10)
RESULTS_PREFIX = "athena-results/"
RESULTS_EXPIRY = Duration.days(30)
#: A query that would scan more than this is cancelled (10 GB: years of a busy platform's exports).
BYTES_SCANNED_CUTOFF = 10 * 1024**3


def database_name(stack: Stack) -> str:
    """The Glue database: named after the stack, so two deployments in one account never share one."""
    return "".join(c if c.isalnum() else "_" for c in stack.stack_name.lower())[:200] + "_analytics"


class Analytics(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        environment: Mapping[str, str],
        bucket: s3.Bucket,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.exporter = platform_function(
            self,
            "Exporter",
            code=code,
            handler="handlers.analytics.export",
            service="longhaul-analytics",
            environment=environment,
            timeout_seconds=300,
            memory_mb=1024,
            description="Longhaul: export finished jobs as Parquet (analytics/), for Athena and the usage report",
        )
        self.schedule = events.Rule(
            self,
            "Every10Minutes",
            schedule=events.Schedule.rate(EXPORT_EVERY),
            targets=[targets.LambdaFunction(self.exporter, retry_attempts=2)],
        )
        self.database_name = database_name(stack)
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name, description="Longhaul: every finished job, its steps and model calls"
            ),
        )
        self.tables: dict[str, glue.CfnTable] = {}
        for table in TABLES:
            location = f"s3://{bucket.bucket_name}/{ANALYTICS_PREFIX}{table}/"
            cfn = glue.CfnTable(
                self,
                f"{table.title()}Table",
                catalog_id=Aws.ACCOUNT_ID,
                database_name=self.database_name,
                table_input=glue.CfnTable.TableInputProperty(
                    name=table,
                    table_type="EXTERNAL_TABLE",
                    parameters={"classification": "parquet", "parquet.compression": "ZSTD"},
                    partition_keys=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in PARTITION_COLUMNS],
                    storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                        location=location,
                        input_format=PARQUET_INPUT,
                        output_format=PARQUET_OUTPUT,
                        serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=PARQUET_SERDE),
                        columns=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in columns(table)],
                    ),
                ),
            )
            cfn.add_resource_dependency(self.database)
            self.tables[table] = cfn
        bucket.add_lifecycle_rule(id="expire-athena-results", prefix=RESULTS_PREFIX, expiration=RESULTS_EXPIRY)
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=f"{stack.stack_name}-analytics"[:128],
            description="Longhaul: queries over the analytics export",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                bytes_scanned_cutoff_per_query=BYTES_SCANNED_CUTOFF,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{bucket.bucket_name}/{RESULTS_PREFIX}",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )
        self._bucket = bucket
        # The export registers the partitions it writes (its objects: `Storage.grant_objects`, by the stack).
        self.exporter.add_to_role_policy(
            iam.PolicyStatement(actions=["glue:BatchCreatePartition"], resources=self._catalog_arns())
        )

    def _catalog_arns(self) -> list[str]:
        catalog = f"arn:{Aws.PARTITION}:glue:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        return [
            f"{catalog}:catalog",
            f"{catalog}:database/{self.database_name}",
            *(f"{catalog}:table/{self.database_name}/{t}" for t in TABLES),
        ]


def grant_day_file_reads(bucket: s3.IBucket, grantee: iam.IGrantable) -> None:
    """List and read the day files under `analytics-daily/` only: the usage report's reads, and the export's (which
    reads a day file before folding into it; the listing makes a day with no file yet a 404, not a 403)."""
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{DAILY_PREFIX}*"]}},
        )
    )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{DAILY_PREFIX}*")])
    )
