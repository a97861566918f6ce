"""Least privilege, proven locally: every call runs under its function's own synthesized role (IAM enforcement, see
`local.moto_patches.iam`), so a grant missing from the template fails the job here as it would on AWS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from local.moto_patches import iam
from local.platform import LocalPlatform
from tests.workflows.conftest import Client

PUBLISH = "publish_result"


def _role_of(platform: LocalPlatform, logical_fragment: str) -> str:
    """The role name of the deployed function whose logical id contains `logical_fragment`."""
    deployment = platform.deployment
    (logical_id,) = [lid for lid in deployment.functions if logical_fragment in lid]
    role_arn = platform.client("lambda").get_function(FunctionName=deployment.functions[logical_id])["Configuration"]
    return str(role_arn["Role"]).rsplit("/", 1)[-1]


@pytest.fixture
def without_results_grant(platform: LocalPlatform) -> Iterator[str]:
    """The publish step's role as a template without its `s3:PutObject` on `results/*` would deploy it."""
    client = platform.client("iam")
    role = _role_of(platform, "DocumentAnalysispublishresult")
    (name,) = client.list_role_policies(RoleName=role)["PolicyNames"]
    original = client.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
    document: dict[str, Any] = json.loads(original) if isinstance(original, str) else original

    def grants_results(statement: dict[str, Any]) -> bool:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        return statement["Action"] == "s3:PutObject" and any(str(r).endswith("/results/*") for r in resources)

    kept = [s for s in document["Statement"] if not grants_results(s)]
    assert len(kept) == len(document["Statement"]) - 1, "the publish step has exactly one grant on results/*"
    client.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps({**document, "Statement": kept}))
    try:
        yield role
    finally:
        client.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))


@pytest.mark.iam_denials_expected
def test_a_grant_removed_from_a_role_fails_the_job_with_access_denied(
    alpha: Client, sample_request: dict[str, Any], without_results_grant: str
) -> None:
    # Given the publish step's role without its grant on results/*, when a job runs
    job = alpha.wait(alpha.submit(sample_request), timeout=180)

    # Then it fails in that step, as the deployment's fault (never retried), naming the refused call
    assert job["status"] == "failed", job
    error = job["error"]
    assert (error["step"], error["kind"], error["error"]) == (
        PUBLISH,
        "platform-misconfigured",
        "PlatformConfigurationError",
    )
    assert "AccessDenied" in error["message"] and "PutObject" in error["message"]
    # and the refusal is the publish role's PutObject of the job's result, nothing else
    refused = {
        (principal.split("/")[-2], action, resource.rsplit("/", 2)[-2]) for principal, action, resource in iam.denials()
    }
    assert refused == {(without_results_grant, "s3:PutObject", job["job_id"])}


def test_the_api_function_cannot_scan_delete_items_or_read_dead_letters(platform: LocalPlatform) -> None:
    client = platform.client("iam")
    table_arn = platform.client("dynamodb").describe_table(TableName=platform.deployment.table_name)["Table"][
        "TableArn"
    ]
    queues = [url for lid, url in platform.deployment.queues.items() if "dlq" in lid.lower()]
    assert queues, "the step dead-letter queues"

    def policies(role: str) -> list[dict[str, Any]]:
        names = client.list_role_policies(RoleName=role)["PolicyNames"]
        documents = [client.get_role_policy(RoleName=role, PolicyName=n)["PolicyDocument"] for n in names]
        for attached in client.list_attached_role_policies(RoleName=role)["AttachedPolicies"]:  # CDK's overflow
            version = client.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
            documents.append(
                client.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)["PolicyVersion"][
                    "Document"
                ]
            )
        return [json.loads(d) if isinstance(d, str) else d for d in documents]

    def queue_arn(url: str) -> str:
        return platform.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]

    api, ops = policies(_role_of(platform, "ApiHandler")), policies(_role_of(platform, "ApiOpsHandler"))
    assert not iam.evaluate(api, iam.Access("dynamodb:Scan", table_arn))
    # A tenant's erasure of its own job (`DELETE /v1/jobs/{job_id}`) runs in the API function: it deletes the job's
    # items (in batches) and takes the job's messages out of the steps' dead letters (tests/workflows/test_erasure.py).
    assert iam.evaluate(api, iam.Access("dynamodb:DeleteItem", table_arn))
    # the operators' function may also redrive and purge dead letters, and delete in batches
    assert iam.evaluate(ops, iam.Access("dynamodb:DeleteItem", table_arn))
    assert all(iam.evaluate(ops, iam.Access("sqs:ReceiveMessage", queue_arn(url))) for url in queues)
    assert not iam.evaluate(ops, iam.Access("dynamodb:Scan", table_arn))
