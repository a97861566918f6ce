"""The local DynamoDB's query reads its own partition (`moto_patches.dynamodb.query_one_partition`): every query
answers what moto's own answers, page by page, in the same order. A request is handled, its answer written, under the
lock that serializes every operation (`serialize_dynamodb_operations`)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from local.moto_patches import dynamodb as dynamodb_patches


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        resource = boto3.resource("dynamodb", region_name="us-east-1")
        created = resource.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "g", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-g",
                    "KeySchema": [
                        {"AttributeName": "g", "KeyType": "HASH"},
                        {"AttributeName": "sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        rng = random.Random(7)
        with created.batch_writer() as batch:
            for n in range(600):
                pk = f"JOB#{n % 3}"
                kind = rng.choice(["EVENT", "STEP", "CHARGE"])
                batch.put_item(
                    Item={"pk": pk, "sk": f"{kind}#{n:05d}", "g": f"G{n % 2}", "body": "x" * rng.randint(0, 5000)}
                )
        yield created


QUERIES: list[dict[str, Any]] = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": "JOB#1"}},
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": "JOB#9"}},  # no such partition
    {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "ExpressionAttributeValues": {":p": "JOB#2", ":s": "STEP#"},
        "Limit": 17,
    },
    {
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": "JOB#0", ":a": "EVENT#00100", ":b": "EVENT#00400"},
        "ScanIndexForward": False,
        "Limit": 9,
    },
    {
        "KeyConditionExpression": "pk = :p AND sk > :a",
        "ExpressionAttributeValues": {":p": "JOB#1", ":a": "CHARGE#00300"},
        "FilterExpression": "attribute_exists(body)",
        "ProjectionExpression": "pk, sk",
    },
    {"IndexName": "by-g", "KeyConditionExpression": "g = :g", "ExpressionAttributeValues": {":g": "G1"}, "Limit": 50},
]


def pages(table: Any, query: dict[str, Any]) -> list[tuple[list[tuple[str, str]], Any]]:
    found, kwargs = [], dict(query)
    while True:
        response = table.query(**kwargs)
        found.append(([(i["pk"], i["sk"]) for i in response["Items"]], response.get("LastEvaluatedKey")))
        if "LastEvaluatedKey" not in response:
            return found
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_a_query_answers_as_moto_does_page_by_page(table: Any, query: dict[str, Any]) -> None:
    dynamodb_patches.query_whole_table()
    upstream = pages(table, query)
    dynamodb_patches.query_one_partition()
    try:
        assert pages(table, query) == upstream
    finally:
        dynamodb_patches.query_whole_table()
    assert len(upstream) > 1 or "Limit" not in query  # the queries with a limit take several pages


def test_a_query_does_not_create_the_partition_it_reads(table: Any) -> None:
    dynamodb_patches.query_one_partition()
    try:
        assert table.query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": "JOB#7"})["Items"] == []
        moto_table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table("t")
        assert sorted(str(k.value) for k in moto_table.items) == ["JOB#0", "JOB#1", "JOB#2"]
    finally:
        dynamodb_patches.query_whole_table()


def test_an_update_reads_the_old_item_under_the_lock_that_serializes_its_write(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`UpdateItem`'s handler copies the item before the update (for `ReturnValues`): under the lock, or another
    thread's write can change it meanwhile (a 500: "dictionary changed size during iteration")."""
    import copy
    import types

    from moto.dynamodb import responses

    held: list[bool] = []

    def deepcopy(value: Any, *args: Any, **kwargs: Any) -> Any:
        held.append(dynamodb_patches.DYNAMODB_LOCK._is_owned())  # type: ignore[attr-defined]
        return copy.deepcopy(value, *args, **kwargs)

    monkeypatch.setattr(responses, "copy", types.SimpleNamespace(deepcopy=deepcopy))
    dynamodb_patches.serialize_dynamodb_operations()
    try:
        table.update_item(
            Key={"pk": "JOB#0", "sk": "EVENT#00000"},
            UpdateExpression="ADD n :one",
            ExpressionAttributeValues={":one": 1},
            ReturnValues="ALL_OLD",
        )
    finally:
        dynamodb_patches.unserialize_dynamodb_operations()
    assert held and all(held)


def test_a_read_writes_its_answer_under_the_lock_that_serializes_writes(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read's items are the table's own objects, turned into the answer after the backend returns them: under the
    lock, or another thread's write to one of them meanwhile fails the read (a 500: "dictionary changed size during
    iteration", a BatchGetItem beside an UpdateItem of the same item)."""
    from moto.dynamodb import responses

    held: list[bool] = []
    convert = responses.dynamo_to_dict

    def dynamo_to_dict(value: Any) -> Any:
        held.append(dynamodb_patches.DYNAMODB_LOCK._is_owned())  # type: ignore[attr-defined]
        return convert(value)

    monkeypatch.setattr(responses, "dynamo_to_dict", dynamo_to_dict)
    key = {"pk": "JOB#0", "sk": "EVENT#00000"}
    dynamodb_patches.serialize_dynamodb_operations()
    try:
        table.meta.client.batch_get_item(RequestItems={"t": {"Keys": [key]}})
        table.get_item(Key=key)
        table.query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": "JOB#0"})
    finally:
        dynamodb_patches.unserialize_dynamodb_operations()
    assert len(held) >= 3 and all(held)
