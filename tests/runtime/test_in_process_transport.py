"""The process's AWS calls to its own moto server are answered in process, as the server answers them over HTTP.

A real `ThreadedMotoServer` on a free port; the same calls are made once over its socket and once in process, and
their answers compared. A request that reaches the socket while the server is served in process fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.httpsession import URLLib3Session

from local import moto_patches
from local.platform import _start_moto, _stop_moto
from tests.runtime.upstream import digest
from tests.unit.aws_env import REGION, offline_credentials


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    offline_credentials(monkeypatch)
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    moto = _start_moto(0)
    try:
        yield "http://{}:{}".format(*moto.get_host_and_port())
    finally:
        _stop_moto(moto)
        if not was_applied:
            moto_patches.revert()


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint, config=Config(retries={"max_attempts": 1}))


def _exercise(endpoint: str, name: str) -> dict[str, Any]:
    """A DynamoDB, S3 and SQS round trip, errors included; returns what a caller would compare."""
    dynamodb, s3, sqs = (_client(s, endpoint) for s in ("dynamodb", "s3", "sqs"))
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}, "blob": {"B": b"\x00\xffbytes"}})
    item = dynamodb.get_item(TableName=name, Key={"pk": {"S": "a"}}, ConsistentRead=True)["Item"]
    with pytest.raises(ClientError) as condition:
        dynamodb.put_item(TableName=name, Item={"pk": {"S": "a"}}, ConditionExpression="attribute_not_exists(pk)")
    s3.create_bucket(Bucket=name)
    body = bytes(range(256)) * 1000  # binary, larger than one read
    s3.put_object(Bucket=name, Key="k/1.bin", Body=body, Metadata={"snake_case": "kept", "plain": "yes"})
    got = s3.get_object(Bucket=name, Key="k/1.bin")
    odd = "k/a b+c%d é?x=1&y#z.txt"  # a key a path must quote: space, plus, percent, non-ASCII, query characters
    s3.put_object(Bucket=name, Key=odd, Body=b"odd")
    odd_body = s3.get_object(Bucket=name, Key=odd)["Body"].read()
    head = s3.head_object(Bucket=name, Key="k/1.bin")  # a HEAD: the length of the body it does not carry
    s3.put_object(Bucket=name, Key="gone.txt", Body=b"gone")
    deleted = s3.delete_object(Bucket=name, Key="gone.txt")["ResponseMetadata"]["HTTPStatusCode"]  # a 204: no body
    with pytest.raises(ClientError) as absent:
        s3.get_object(Bucket=name, Key="absent")
    missing = absent.value.response
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="héllo")
    received = sqs.receive_message(QueueUrl=url)["Messages"]
    return {
        "item": item,
        "conditional": condition.value.response["Error"]["Code"],
        "body": got["Body"].read() == body,
        "metadata": got["Metadata"],
        "missing": (
            missing["Error"]["Code"],
            missing["ResponseMetadata"]["HTTPStatusCode"],
        ),
        "listing": [o["Key"] for o in s3.list_objects_v2(Bucket=name, Prefix="k/")["Contents"]],
        "message": [m["Body"] for m in received],
        "odd": odd_body,
        "head": (head["ContentLength"], head["ETag"], head["Metadata"]),
        "deleted": deleted,
    }


def test_calls_answered_in_process_equal_those_answered_over_the_socket(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    moto_patches.send_over_http()
    over_http = _exercise(server, "over-http")

    moto_patches.apply()
    sent: list[str] = []
    original = URLLib3Session.send
    monkeypatch.setattr(
        URLLib3Session, "send", lambda self, request: sent.append(request.url) or original(self, request)
    )
    in_process = _exercise(server, "in-process")

    assert sent == []  # nothing went through a socket
    assert in_process == over_http
    assert over_http["conditional"] == "ConditionalCheckFailedException"
    assert over_http["missing"] == ("NoSuchKey", 404)
    assert over_http["metadata"] == {"snake_case": "kept", "plain": "yes"}
    assert over_http["body"] and over_http["message"] == ["héllo"]
    assert over_http["odd"] == b"odd" and "k/a b+c%d é?x=1&y#z.txt" in over_http["listing"]
    assert over_http["head"][0] == 256_000 and over_http["deleted"] == 204


def test_another_endpoint_is_still_called_over_its_socket(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(URLLib3Session, "send", lambda self, request: sent.append(request.url) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _client("sqs", "http://127.0.0.1:9").list_queues()  # no server of this process there
    assert sent and sent[0].startswith("http://127.0.0.1:9/")
    assert "Queues" not in _client("sqs", server).list_queues()  # while its own server's answers come in process
    assert len(sent) == 1


def test_an_exception_of_the_application_is_answered_500_as_the_server_answers_it(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.sqs.models import SQSBackend

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug of the in-memory AWS")

    monkeypatch.setattr(SQSBackend, "list_queues", broken)
    for endpoint_served in (False, True):  # over the socket, then in process
        (moto_patches.send_in_process if endpoint_served else moto_patches.send_over_http)()
        with pytest.raises(ClientError) as failed:
            _client("sqs", server).list_queues()
        assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def test_the_upstream_calls_the_transport_repeats_are_pinned() -> None:
    """`transport._answer` repeats what the server's application does with a request (the dispatcher's choice of the
    backend's application, moto's Flask view around a response method): a change upstream must be read again."""
    from moto.core.utils import convert_to_flask_response
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    assert digest(convert_to_flask_response.__call__) == "5d0949692286cf76", "moto's view changed: re-check _answer"
    assert digest(DomainDispatcherApplication.__call__) == "36eb7f931a4a093d", "the dispatcher changed: re-check"
