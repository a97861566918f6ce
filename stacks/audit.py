"""The audit trail's AWS side: CloudTrail data events of the artifacts bucket (who read, wrote or deleted which
object, with what credentials), in a bucket of the trail's own.

The API's audit trail (`longhaul.storage.audit`) records what people do through the API and the admin commands;
what reaches the artifacts directly (a function's role, a person with console access, a presigned URL) only
CloudTrail sees. The trail records data events of this one bucket, no management events (the account's own trail,
if it has one, keeps those: recording them twice is billed twice), with log file validation (a digest file per
hour, signed by CloudTrail: a removed or edited log file is detectable, as an edited audit entry is). The trail's
bucket is private, TLS-only, versioned and access-logged; only CloudTrail may write to it (the policy CDK writes,
conditioned on this trail's ARN). The local platform does not deploy a trail (moto's CloudFormation has none).
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag import acknowledge_checkov

#: How long the trail's log files are kept.
TRAIL_RETENTION_DAYS = 365


class ArtifactsTrail(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        artifacts: s3.IBucket,
        access_logs: s3.IBucket,
        removal_policy: RemovalPolicy,
        auto_delete_objects: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Logs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="trail/",
            lifecycle_rules=[
                s3.LifecycleRule(id="expire", expiration=Duration.days(TRAIL_RETENTION_DAYS)),
                s3.LifecycleRule(id="noncurrent", noncurrent_version_expiration=Duration.days(1)),
            ],
            removal_policy=removal_policy,
            auto_delete_objects=auto_delete_objects,
        )
        self.trail = cloudtrail.Trail(
            self,
            "Trail",
            bucket=self.bucket,
            is_multi_region_trail=False,
            include_global_service_events=False,
            enable_file_validation=True,
            management_events=cloudtrail.ReadWriteType.NONE,
        )
        self.trail.add_s3_event_selector(
            [cloudtrail.S3EventSelector(bucket=artifacts)],
            include_management_events=False,
            read_write_type=cloudtrail.ReadWriteType.ALL,
        )
        for check, reason in (
            (
                "CKV_AWS_35",
                "The trail's bucket is encrypted (SSE-S3), private and TLS-only; a KMS key would add a key and its "
                "policy per deployment and keep out no reader the bucket policy does not.",
            ),
            (
                "CKV_AWS_67",
                "A trail of one bucket's data events, in the bucket's region: the account's own trail keeps its "
                "management events in every region.",
            ),
            (
                "CKV_AWS_252",
                "Nothing reads a notification of each log file delivered: the files are read when an incident is "
                "investigated.",
            ),
        ):
            acknowledge_checkov(self.trail, check, reason)
