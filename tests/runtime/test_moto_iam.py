"""IAM enforcement (`local.moto_patches.iam`): pinned against moto 5.2.5's own check, which it replaces.

Without the patch, moto authorizes every service but S3 and SQS on the resource `*`, so a statement scoped to a
table refuses a call it grants, an `Allow` with a condition applies whatever the request, and a refusal of a
JSON-protocol call reaches botocore as the code `403`. With it, a role's call is allowed exactly where its policy says.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.authorization import enable_iam_authentication

from local.moto_patches import iam
from tests.unit.aws_env import REGION, offline_credentials

ACCOUNT = "123456789012"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/granted"
BUCKET = "artifacts-bucket"
SENDER = "notices@example.com"


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_credentials(monkeypatch)


def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


POLICY = _policy(
    {"Effect": "Allow", "Action": ["dynamodb:PutItem", "dynamodb:GetItem"], "Resource": TABLE_ARN},
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": f"arn:aws:s3:::{BUCKET}/work/*"},
    {
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": f"arn:aws:sqs:{REGION}:{ACCOUNT}:granted",
        "Condition": {"StringEquals": {"aws:SourceVpce": "vpce-1"}},
    },
    {
        "Effect": "Allow",
        "Action": "dynamodb:DeleteItem",
        "Resource": TABLE_ARN,
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["MEMORY#*"]}},
    },
    {"Effect": "Allow", "Action": "ses:SendEmail", "Resource": f"arn:aws:ses:{REGION}:{ACCOUNT}:identity/{SENDER}"},
    {"Effect": "Allow", "Action": "sns:Publish", "Resource": f"arn:aws:sns:{REGION}:{ACCOUNT}:alarms"},
    {
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": f"arn:aws:s3:::{BUCKET}",
        "Condition": {"StringLike": {"s3:prefix": ["analytics/*"]}},
    },
)


@pytest.fixture
def aws() -> Iterator[boto3.session.Session]:
    """moto with two tables, a bucket, a queue and a role; yields a session signed with the role's credentials."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        for name in ("granted", "other"):
            dynamodb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        boto3.client("sqs", region_name=REGION).create_queue(QueueName="granted")
        client = boto3.client("iam", region_name=REGION)
        trust = _policy(
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        )
        role = client.create_role(RoleName="step", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        client.put_role_policy(RoleName="step", PolicyName="grants", PolicyDocument=POLICY)
        credentials = iam.role_credentials(role)
        yield boto3.session.Session(
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_access_key,
            aws_session_token=credentials.session_token,
            region_name=REGION,
        )


@pytest.fixture
def enforced(aws: boto3.session.Session) -> Iterator[None]:
    iam.enforce_iam([os.environ["AWS_ACCESS_KEY_ID"]])  # the key `mock_aws` sets: the test's own, trusted
    iam.clear_denials()
    yield
    iam.relax_iam()


def _code(call: Any) -> str:
    with pytest.raises(ClientError) as raised:
        call()
    return str(raised.value.response["Error"]["Code"])


# --- upstream: why the patch exists ----------------------------------------------------------------------------


def test_upstream_refuses_a_call_its_scoped_statement_grants_and_reports_the_code_403(
    aws: boto3.session.Session,
) -> None:
    with enable_iam_authentication():
        code = _code(lambda: aws.client("dynamodb").put_item(TableName="granted", Item={"pk": {"S": "1"}}))
    assert code == "403"  # checked on the resource `*`, which `table/granted` does not match; and XML for JSON


def test_upstream_applies_a_conditional_allow_as_if_it_had_no_condition(aws: boto3.session.Session) -> None:
    from moto.iam.access_control import IAMPolicy, PermissionResult

    policy = IAMPolicy(POLICY)
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:granted"
    assert policy.is_action_permitted("sqs:SendMessage", queue) == PermissionResult.PERMITTED


def test_upstream_check_is_the_one_the_patch_replaces() -> None:
    from moto.core.authorization import ActionAuthenticatorMixin

    source = textwrap.dedent(inspect.getsource(iam._original_check(ActionAuthenticatorMixin)))
    assert hashlib.sha256(source.encode()).hexdigest()[:16] == "081b03e8a939b7bd", "upstream changed: re-check"


# --- with the patch ----------------------------------------------------------------------------------------------


def test_a_role_may_call_what_its_policy_grants_on_that_resource_only(
    aws: boto3.session.Session, enforced: None
) -> None:
    dynamodb = aws.client("dynamodb")
    dynamodb.put_item(TableName="granted", Item={"pk": {"S": "1"}})
    assert dynamodb.get_item(TableName="granted", Key={"pk": {"S": "1"}})["Item"]
    assert _code(lambda: dynamodb.put_item(TableName="other", Item={"pk": {"S": "1"}})) == "AccessDeniedException"
    assert _code(lambda: dynamodb.scan(TableName="granted")) == "AccessDeniedException"
    principal, action, resource = iam.denials()[-1]
    assert ":assumed-role/step/" in principal and action == "dynamodb:Scan" and resource == TABLE_ARN


def test_a_policy_changed_meanwhile_decides_the_next_call(aws: boto3.session.Session, enforced: None) -> None:
    """Decisions are remembered per policy documents: a granted call allowed many times is refused as soon as a deny
    is attached, and allowed again once it is removed."""
    dynamodb = aws.client("dynamodb")
    for n in range(3):
        dynamodb.put_item(TableName="granted", Item={"pk": {"S": str(n)}})
    deny = _policy({"Effect": "Deny", "Action": "dynamodb:PutItem", "Resource": TABLE_ARN})
    client = boto3.client("iam", region_name=REGION)
    client.put_role_policy(RoleName="step", PolicyName="deny", PolicyDocument=deny)
    assert _code(lambda: dynamodb.put_item(TableName="granted", Item={"pk": {"S": "4"}})) == "AccessDeniedException"
    client.delete_role_policy(RoleName="step", PolicyName="deny")
    dynamodb.put_item(TableName="granted", Item={"pk": {"S": "5"}})


def test_a_transaction_needs_each_items_own_action_on_its_table(aws: boto3.session.Session, enforced: None) -> None:
    dynamodb = aws.client("dynamodb")
    put = {"Put": {"TableName": "granted", "Item": {"pk": {"S": "2"}}}}
    dynamodb.transact_write_items(TransactItems=[put])
    delete = {"Delete": {"TableName": "granted", "Key": {"pk": {"S": "2"}}}}
    assert _code(lambda: dynamodb.transact_write_items(TransactItems=[put, delete])) == "AccessDeniedException"
    assert iam.denials()[-1][1] == "dynamodb:DeleteItem"
    other = {"Put": {"TableName": "other", "Item": {"pk": {"S": "2"}}}}
    assert _code(lambda: dynamodb.transact_write_items(TransactItems=[put, other])) == "AccessDeniedException"


def test_objects_are_authorized_by_key_and_a_presigned_url_as_its_signer(
    aws: boto3.session.Session, enforced: None
) -> None:
    s3 = aws.client("s3")
    s3.put_object(Bucket=BUCKET, Key="work/job/a.json", Body=b"{}")
    assert _code(lambda: s3.put_object(Bucket=BUCKET, Key="results/a.json", Body=b"{}")) == "AccessDenied"
    granted = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "work/job/b.json"})
    refused = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "results/b.json"})
    assert requests.put(granted, data=b"{}", timeout=10).status_code == 200
    assert requests.put(refused, data=b"{}", timeout=10).status_code == 403


def test_a_listing_is_authorized_on_its_prefix(aws: boto3.session.Session, enforced: None) -> None:
    s3 = aws.client("s3")
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix="analytics/jobs/dt=2026-12-07/")["KeyCount"] == 0
    assert _code(lambda: s3.list_objects_v2(Bucket=BUCKET, Prefix="work/")) == "AccessDenied"
    assert _code(lambda: s3.list_objects_v2(Bucket=BUCKET)) == "AccessDenied"


def test_item_deletes_are_authorized_on_the_items_partition_key(aws: boto3.session.Session, enforced: None) -> None:
    dynamodb = aws.client("dynamodb")
    for pk in ("MEMORY#tenant-a", "JOB#1"):
        boto3.client("dynamodb", region_name=REGION).put_item(TableName="granted", Item={"pk": {"S": pk}})

    dynamodb.delete_item(TableName="granted", Key={"pk": {"S": "MEMORY#tenant-a"}})

    assert _code(lambda: dynamodb.delete_item(TableName="granted", Key={"pk": {"S": "JOB#1"}})) == (
        "AccessDeniedException"
    )
    assert iam.denials()[-1][1] == "dynamodb:DeleteItem"
    job = {"Delete": {"TableName": "granted", "Key": {"pk": {"S": "JOB#1"}}}}
    assert _code(lambda: dynamodb.transact_write_items(TransactItems=[job])) == "AccessDeniedException"


def test_a_send_is_authorized_on_the_senders_identity(aws: boto3.session.Session, enforced: None) -> None:
    ses = boto3.client("ses", region_name=REGION)  # the test's own key
    for address in (SENDER, "other@example.com"):
        ses.verify_email_identity(EmailAddress=address)
    message = {
        "Destination": {"ToAddresses": ["vendor@example.org"]},
        "Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "b"}}}},
    }

    aws.client("sesv2").send_email(FromEmailAddress=SENDER, **message)

    refused = _code(lambda: aws.client("sesv2").send_email(FromEmailAddress="other@example.com", **message))
    assert refused in ("AccessDenied", "AccessDeniedException")
    assert iam.denials()[-1][1:] == ("ses:SendEmail", f"arn:aws:ses:{REGION}:{ACCOUNT}:identity/other@example.com")


def test_a_batch_of_messages_is_authorized_as_its_single_message_action(
    aws: boto3.session.Session, enforced: None
) -> None:
    queue = boto3.client("sqs", region_name=REGION).create_queue(QueueName="batched")["QueueUrl"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:batched"
    allow = {"Effect": "Allow", "Action": ["sqs:SendMessage", "sqs:DeleteMessage"], "Resource": arn}
    boto3.client("iam", region_name=REGION).put_role_policy(
        RoleName="step", PolicyName="queue", PolicyDocument=_policy(allow)
    )
    sqs = aws.client("sqs")

    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "1", "MessageBody": "a"}, {"Id": "2", "MessageBody": "b"}])
    received = boto3.client("sqs", region_name=REGION).receive_message(QueueUrl=queue, MaxNumberOfMessages=2)
    entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(received["Messages"])]
    sqs.delete_message_batch(QueueUrl=queue, Entries=entries)

    assert iam.denials() == []
    assert _code(lambda: sqs.change_message_visibility_batch(QueueUrl=queue, Entries=[])) in (
        "AccessDenied",
        "AccessDeniedException",
    )
    assert iam.denials()[-1][1] == "sqs:ChangeMessageVisibility"


def test_cloudwatch_is_authorized_on_its_iam_prefix_not_its_signing_name(
    aws: boto3.session.Session, enforced: None
) -> None:
    allow = {"Effect": "Allow", "Action": "cloudwatch:ListMetrics", "Resource": "*"}
    boto3.client("iam", region_name=REGION).put_role_policy(
        RoleName="step", PolicyName="metrics", PolicyDocument=_policy(allow)
    )
    cloudwatch = aws.client("cloudwatch")

    cloudwatch.list_metrics(Namespace="Longhaul")  # signed for "monitoring", granted as "cloudwatch:"

    assert iam.denials() == []
    assert _code(
        lambda: cloudwatch.get_metric_statistics(
            Namespace="Longhaul", MetricName="m", StartTime=0, EndTime=60, Period=60, Statistics=["Sum"]
        )
    ) in ("AccessDenied", "AccessDeniedException")
    assert iam.denials()[-1][1] == "cloudwatch:GetMetricStatistics"


def test_an_allow_whose_condition_the_request_does_not_meet_does_not_apply(
    aws: boto3.session.Session, enforced: None
) -> None:
    sqs = aws.client("sqs")
    url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/granted"
    assert _code(lambda: sqs.send_message(QueueUrl=url, MessageBody="x")) == "AccessDeniedException"


def test_the_platforms_own_key_passes_and_an_unknown_key_does_not(aws: boto3.session.Session, enforced: None) -> None:
    boto3.client("dynamodb", region_name=REGION).scan(TableName="other")  # the test's own key, trusted
    stranger = boto3.client("dynamodb", region_name=REGION, aws_access_key_id="AKIASTRANGER", aws_secret_access_key="x")
    assert _code(lambda: stranger.scan(TableName="other")) == "UnrecognizedClientException"


def test_a_role_may_not_call_a_service_the_local_check_cannot_resolve(
    aws: boto3.session.Session, enforced: None
) -> None:
    assert _code(lambda: aws.client("kinesis").list_streams()) in ("AccessDenied", "AccessDeniedException")
    assert iam.denials()[-1][1] == "kinesis:*"


def test_a_publish_is_authorized_on_its_topic(aws: boto3.session.Session, enforced: None) -> None:
    sns = boto3.client("sns", region_name=REGION)  # the test's own key
    granted, other = (sns.create_topic(Name=name)["TopicArn"] for name in ("alarms", "other"))

    aws.client("sns").publish(TopicArn=granted, Subject="escalated", Message="{}")

    assert _code(lambda: aws.client("sns").publish(TopicArn=other, Message="{}")) in (
        "AuthorizationError",
        "AccessDenied",
    )
    assert iam.denials()[-1][1:] == ("sns:Publish", other)


# --- the evaluation alone ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "access", "allowed"),
    [
        ({"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}, iam.Access("dynamodb:Query", TABLE_ARN), True),
        ({"Effect": "Allow", "NotAction": "dynamodb:Scan", "Resource": "*"}, iam.Access("dynamodb:Scan", "*"), False),
        (
            {"Effect": "Allow", "Action": "ecs:RunTask", "Resource": "arn:aws:ecs:*:*:task-definition/ocr:*",
             "Condition": {"ArnEquals": {"ecs:cluster": "arn:aws:ecs:us-east-1:1:cluster/workers"}}},
            iam.Access("ecs:RunTask", "arn:aws:ecs:us-east-1:1:task-definition/ocr:3",
                       {"ecs:cluster": "arn:aws:ecs:us-east-1:1:cluster/workers"}),
            True,
        ),
        (
            {"Effect": "Allow", "Action": "ecs:RunTask", "Resource": "*",
             "Condition": {"ArnEquals": {"ecs:cluster": "arn:aws:ecs:us-east-1:1:cluster/workers"}}},
            iam.Access("ecs:RunTask", "arn:aws:ecs:us-east-1:1:task-definition/ocr:3",
                       {"ecs:cluster": "arn:aws:ecs:us-east-1:1:cluster/other"}),
            False,
        ),
        ({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/work/*"},
         iam.Access("s3:GetObject", "*"), False),
    ],
)  # fmt: skip
def test_statements_are_evaluated_like_iam(statement: dict[str, Any], access: iam.Access, allowed: bool) -> None:
    assert iam.evaluate([{"Statement": [statement]}], access) is allowed


def test_an_explicit_deny_wins() -> None:
    allow = {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}
    deny = {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE_ARN}
    assert not iam.evaluate([{"Statement": [allow]}, {"Statement": deny}], iam.Access("dynamodb:DeleteItem", TABLE_ARN))


# --- session policies: a tool call's credentials (`adapters.tool_credentials`) --------------------------------------


def _tool_role(trusted: str) -> str:
    """The stack's tool role as deployed: trusted by `trusted` (a role ARN), its own policy any job's."""
    client = boto3.client("iam", region_name=REGION)
    trust = _policy(
        {"Effect": "Allow", "Principal": {"AWS": trusted}, "Action": "sts:AssumeRole"},
        {"Effect": "Allow", "Principal": {"AWS": [trusted]}, "Action": "sts:TagSession"},
    )
    arn = client.create_role(RoleName="tools", AssumeRolePolicyDocument=trust, MaxSessionDuration=3600)["Role"]["Arn"]
    grants = _policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/work/*"},
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"],
            "Resource": TABLE_ARN,
            "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["JOB#*", "MEMORY#*"]}},
        },
    )
    client.put_role_policy(RoleName="tools", PolicyName="grants", PolicyDocument=grants)
    may_assume = _policy({"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"], "Resource": arn})
    client.put_role_policy(RoleName="step", PolicyName="tools", PolicyDocument=may_assume)
    return arn


def test_a_tool_sessions_calls_are_the_role_intersected_with_its_session_policy(
    aws: boto3.session.Session, enforced: None
) -> None:
    from longhaul.adapters.tool_credentials import AssumedToolRole
    from longhaul.core.ports import ToolScope

    step_role = boto3.client("iam", region_name=REGION).get_role(RoleName="step")["Role"]["Arn"]
    role = AssumedToolRole(aws.client("sts"), _tool_role(step_role), bucket=BUCKET, table_name="granted", region=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    for job in ("job_a", "job_b"):
        s3.put_object(Bucket=BUCKET, Key=f"work/{job}/input.json", Body=b"{}")
    credentials = role.credentials(ToolScope("job_a", "tenant-a", "talk"))
    tool = boto3.session.Session(
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
        aws_session_token=credentials.session_token,
        region_name=REGION,
    )
    tool_s3, tool_dynamodb = tool.client("s3"), tool.client("dynamodb")

    assert tool_s3.get_object(Bucket=BUCKET, Key="work/job_a/input.json")["Body"].read() == b"{}"
    assert _code(lambda: tool_s3.get_object(Bucket=BUCKET, Key="work/job_b/input.json")) == "AccessDenied"
    tool_dynamodb.put_item(TableName="granted", Item={"pk": {"S": "JOB#job_a"}})
    tool_dynamodb.put_item(TableName="granted", Item={"pk": {"S": "MEMORY#tenant-a"}})
    for call in (
        lambda: tool_dynamodb.get_item(TableName="granted", Key={"pk": {"S": "JOB#job_b"}}),
        lambda: tool_dynamodb.put_item(TableName="granted", Item={"pk": {"S": "MEMORY#tenant-b"}}),
        lambda: tool_dynamodb.query(
            TableName="granted", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "JOB#job_b"}}
        ),
    ):
        assert _code(call) == "AccessDeniedException"
    own = tool_dynamodb.query(
        TableName="granted", KeyConditionExpression="#k = :p", ExpressionAttributeNames={"#k": "pk"},
        ExpressionAttributeValues={":p": {"S": "JOB#job_a"}},
    )  # fmt: skip
    assert own["Count"] == 1
    refused = {(p.rsplit("/", 2)[-2:][0], a, r.rsplit("/", 1)[-1]) for p, a, r in iam.denials()}
    assert ("tools", "s3:GetObject", "input.json") in refused  # the assumed tool role's session, refused


def test_a_role_is_assumed_only_by_whom_its_trust_policy_names(aws: boto3.session.Session, enforced: None) -> None:
    _tool_role("arn:aws:iam::123456789012:role/someone-else")

    assume = aws.client("sts").assume_role
    code = _code(lambda: assume(RoleArn="arn:aws:iam::123456789012:role/tools", RoleSessionName="tool-job_a"))

    assert code == "AccessDenied"
    assert iam.denials()[-1][1:] == ("sts:AssumeRole", "arn:aws:iam::123456789012:role/tools")


def test_put_events_is_authorized_on_each_entrys_bus(aws: boto3.session.Session, enforced: None) -> None:
    events = boto3.client("events", region_name=REGION)  # the test's own key
    for name in ("Longhaul-local", "other"):
        events.create_event_bus(Name=name)
    allow = {"Effect": "Allow", "Action": "events:PutEvents",
             "Resource": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/Longhaul-local"}  # fmt: skip
    boto3.client("iam", region_name=REGION).put_role_policy(
        RoleName="step", PolicyName="bus", PolicyDocument=_policy(allow)
    )
    entry = {"Source": "longhaul", "DetailType": "Job Status Changed", "Detail": "{}"}

    aws.client("events").put_events(Entries=[{**entry, "EventBusName": "Longhaul-local"}])

    refused = _code(lambda: aws.client("events").put_events(Entries=[{**entry, "EventBusName": "other"}]))
    assert refused in ("AccessDenied", "AccessDeniedException")
    assert iam.denials()[-1][1:] == ("events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/other")


def test_a_presigned_url_past_its_expiry_is_refused_as_s3_refuses_it(
    aws: boto3.session.Session, enforced: None
) -> None:
    s3 = aws.client("s3")
    s3.put_object(Bucket=BUCKET, Key="work/job/c.json", Body=b"{}")
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "work/job/c.json"}, ExpiresIn=1)
    alive = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "work/job/c.json"})
    time.sleep(2.1)

    refused = requests.get(expired, timeout=10)
    assert refused.status_code == 403 and "Request has expired" in refused.text
    assert requests.get(alive, timeout=10).status_code == 200
    assert iam.denials() == []  # an expiry is not a missing grant
