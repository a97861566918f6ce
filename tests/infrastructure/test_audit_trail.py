"""CloudTrail data events of the artifacts bucket: a trail of that bucket's object-level events only, with log file
validation, writing to a bucket of its own that only CloudTrail may write to."""

from __future__ import annotations

from typing import Any

from tests.infrastructure.conftest import resources


def test_a_trail_records_every_object_event_of_the_artifacts_bucket_in_a_bucket_of_its_own(
    template: dict[str, Any],
) -> None:
    (trail,) = resources(template, "AWS::CloudTrail::Trail").values()
    props = trail["Properties"]
    (artifacts,) = [k for k in resources(template, "AWS::S3::Bucket") if k.startswith("StorageArtifacts")]
    (selector,) = props["EventSelectors"]

    assert props["EnableLogFileValidation"] is True
    assert selector["IncludeManagementEvents"] is False and selector["ReadWriteType"] == "All"
    (data,) = selector["DataResources"]
    assert data["Type"] == "AWS::S3::Object"
    assert data["Values"] == [{"Fn::Join": ["", [{"Fn::GetAtt": [artifacts, "Arn"]}, "/"]]}]
    trail_bucket = props["S3BucketName"]["Ref"]
    assert trail_bucket != artifacts and trail_bucket.startswith("ArtifactsTrailLogs")
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": trail_bucket}
    ]
    writers = [s for s in policy if s["Effect"] == "Allow" and "s3:PutObject" in str(s["Action"])]
    assert writers and all(s["Principal"] == {"Service": "cloudtrail.amazonaws.com"} for s in writers)
