"""DynamoDB transactions in moto (`moto_patches.backup_only_touched_items`).

Pins: the upstream `DynamoDBBackend.transact_write_items` the patch wraps (its whole source, by digest, and the
backup/rollback lines the patch neutralises); without the patch a transaction deep-copies every item of its table
once per operation, with it only the items it touches. When a pin fails, moto changed: re-check the patch.
Behaviour: every transaction test runs with and without the patch and expects the same (table contents, GSI
queries, CancellationReasons, stream records). moto in decorator mode, no server.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import textwrap
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import Item

from local import moto_patches
from local.moto_patches import dynamodb as dynamodb_patches

REGION = "us-east-1"
TABLE = "jobs"  # pk/sk, GSI by_tenant (gsi1pk/gsi1sk), stream: like Longhaul's table
FLAT = "flat"  # hash key only
GSI = "by_tenant"
TENANT = "tenant-a"

#: moto 5.2.5's `DynamoDBBackend.transact_write_items`: signature, source digest, the lines the patch relies on
UPSTREAM_SIGNATURE = "(self, transact_items: list[dict[str, typing.Any]]) -> None"
UPSTREAM_DIGEST = "0b5c3b73cdccf326"
UPSTREAM_LINES = (
    "original_table_state[table_name] = copy.deepcopy(",
    "self.tables[table_name] = original_table_state[table_name]",
)


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def _is_patched() -> bool:
    return DynamoDBBackend.transact_write_items.__module__ == dynamodb_patches.__name__


@pytest.fixture(params=["upstream", "patched"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """moto with or without `backup_only_touched_items` (only that patch), two tables seeded."""
    was_patched = _is_patched()
    if request.param == "patched":
        moto_patches.backup_only_touched_items()
    else:
        moto_patches.back_up_whole_tables()
    try:
        with mock_aws():
            _create_tables()
            yield request.param
    finally:
        if was_patched:
            moto_patches.backup_only_touched_items()
        else:
            moto_patches.back_up_whole_tables()


def _client() -> Any:
    return boto3.client("dynamodb", region_name=REGION)


def _create_tables() -> None:
    client = _client()
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "gsi1pk", "gsi1sk")
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": GSI,
                "KeySchema": [
                    {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    client.create_table(
        TableName=FLAT,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
    for job, status in (("job#1", "QUEUED"), ("job#2", "QUEUED")):
        _put(TABLE, pk=job, sk="meta", status=status, gsi1pk=TENANT, gsi1sk=f"{status}#{job}")
        _put(TABLE, pk=job, sk="step#1", state="PENDING")
    _put(FLAT, id="counter", n=0)
    _put(FLAT, id="gone", n=1)


def _av(value: Any) -> dict[str, str]:
    return {"N": str(value)} if isinstance(value, int) else {"S": value}


def _item(**attrs: Any) -> dict[str, Any]:
    return {name: _av(value) for name, value in attrs.items()}


def _put(table: str, **attrs: Any) -> None:
    _client().put_item(TableName=table, Item=_item(**attrs))


def _table(name: str) -> Any:
    return dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables[name]


def _state(name: str) -> dict[str, Any]:
    """Everything a write can change in moto's table: its items (and partitions), its stream records."""
    table = _table(name)
    if table.range_key_attr is None:
        items = {hash_key.value: item.to_json() for hash_key, item in table.items.items()}
    else:
        items = {
            (hash_key.value, range_key.value): item.to_json()
            for hash_key, partition in table.items.items()
            for range_key, item in partition.items()
        }
    partitions = sorted(hash_key.value for hash_key in table.items)
    stream = [record.to_json() for record in table.stream_shard.items] if table.stream_shard else None
    return {"items": items, "partitions": partitions, "stream": stream}


def _by_tenant() -> list[dict[str, Any]]:
    return _client().query(
        TableName=TABLE,
        IndexName=GSI,
        KeyConditionExpression="gsi1pk = :t",
        ExpressionAttributeValues={":t": _av(TENANT)},
    )["Items"]


def _key(**attrs: Any) -> dict[str, Any]:
    return _item(**attrs)


def _transact(*ops: dict[str, Any]) -> ClientError | None:
    try:
        _client().transact_write_items(TransactItems=list(ops))
    except ClientError as error:
        return error
    return None


def _update_job_1() -> dict[str, Any]:
    """Update of an existing item that moves it in the GSI."""
    return {
        "Update": {
            "TableName": TABLE,
            "Key": _key(pk="job#1", sk="meta"),
            "UpdateExpression": "SET #s = :s, gsi1sk = :k",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":s": _av("RUNNING"), ":k": _av("RUNNING#job#1")},
        }
    }


def _put_job_3() -> dict[str, Any]:
    """Put of a new item, in a new partition, indexed by the GSI."""
    return {
        "Put": {
            "TableName": TABLE,
            "Item": _item(pk="job#3", sk="meta", status="QUEUED", gsi1pk=TENANT, gsi1sk="QUEUED#job#3"),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def _job_2_is(status: str) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": _key(pk="job#2", sk="meta"),
            "ConditionExpression": "#s = :s",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":s": _av(status)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _delete(table: str, **key: Any) -> dict[str, Any]:
    return {"Delete": {"TableName": table, "Key": _key(**key)}}


def _count_flat() -> dict[str, Any]:
    return {
        "Update": {
            "TableName": FLAT,
            "Key": _key(id="counter"),
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": _av(1)},
        }
    }


def _put_flat(name: str) -> dict[str, Any]:
    return {"Put": {"TableName": FLAT, "Item": _item(id=name, n=7)}}


# --- pins -------------------------------------------------------------------------------------------------------


def test_upstream_transact_write_items_is_the_one_the_patch_wraps() -> None:
    upstream = moto_patches._original(DynamoDBBackend, "transact_write_items")
    assert upstream.__module__ == "moto.dynamodb.models"
    assert str(inspect.signature(upstream)) == UPSTREAM_SIGNATURE
    source = inspect.getsource(upstream)
    for line in UPSTREAM_LINES:
        assert line in source, f"transact_write_items no longer has {line!r}: re-check backup_only_touched_items"
    digest = hashlib.sha256(textwrap.dedent(source).encode()).hexdigest()[:16]
    assert digest == UPSTREAM_DIGEST, "DynamoDBBackend.transact_write_items changed upstream: re-check the patch"


def test_the_patch_is_idempotent_and_reverts_to_moto() -> None:
    import moto.dynamodb.models as models

    was_patched = _is_patched()
    try:
        moto_patches.back_up_whole_tables()
        upstream = DynamoDBBackend.transact_write_items
        assert models.copy is copy
        moto_patches.backup_only_touched_items()
        moto_patches.backup_only_touched_items()
        assert _is_patched()
        assert models.copy is not copy
        moto_patches.back_up_whole_tables()
        moto_patches.back_up_whole_tables()
        assert DynamoDBBackend.transact_write_items is upstream
        assert models.copy is copy
    finally:
        if was_patched:
            moto_patches.backup_only_touched_items()


def test_outside_a_transaction_a_table_copy_is_still_a_copy(mode: str) -> None:
    import moto.dynamodb.models as models

    table = _table(TABLE)
    copied = models.copy.deepcopy(table)
    assert copied is not table
    assert copied.items == table.items


# --- behaviour, with and without the patch ------------------------------------------------------------------------


def test_a_successful_transaction_applies_every_operation(mode: str) -> None:
    error = _transact(
        _put_job_3(),
        _update_job_1(),
        _job_2_is("QUEUED"),
        _delete(TABLE, pk="job#2", sk="step#1"),
        _count_flat(),
        _delete(FLAT, id="gone"),
    )

    assert error is None
    items = _state(TABLE)["items"]
    assert items[("job#3", "meta")]["Attributes"]["status"] == _av("QUEUED")
    assert items[("job#1", "meta")]["Attributes"]["status"] == _av("RUNNING")
    assert ("job#2", "step#1") not in items
    assert _state(FLAT)["items"]["counter"]["Attributes"]["n"] == _av(1)
    assert "gone" not in _state(FLAT)["items"]
    assert [item["gsi1sk"]["S"] for item in _by_tenant()] == ["QUEUED#job#2", "QUEUED#job#3", "RUNNING#job#1"]
    assert len(_state(TABLE)["stream"]) == 4 + 3  # 4 seeded, then Put, Update, Delete


def test_a_failed_condition_rolls_back_every_operation(mode: str) -> None:
    before = {name: _state(name) for name in (TABLE, FLAT)}
    gsi_before = _by_tenant()

    error = _transact(
        _update_job_1(),
        _job_2_is("RUNNING"),
        _put_job_3(),
        _delete(TABLE, pk="job#2", sk="step#1"),
        _count_flat(),
        _put_flat("new"),
        _delete(FLAT, id="gone"),
    )

    assert error is not None
    assert error.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = error.response["CancellationReasons"]
    assert reasons[1] == {
        "Code": "ConditionalCheckFailed",
        "Message": "The conditional request failed",
        "Item": _item(pk="job#2", sk="meta", status="QUEUED", gsi1pk=TENANT, gsi1sk="QUEUED#job#2"),
    }
    assert [reason["Code"] for reason in reasons] == ["None", "ConditionalCheckFailed"] + ["None"] * 5
    assert {name: _state(name) for name in (TABLE, FLAT)} == before
    assert _by_tenant() == gsi_before
    assert [item["gsi1sk"]["S"] for item in gsi_before] == ["QUEUED#job#1", "QUEUED#job#2"]


@pytest.mark.parametrize(
    "invalid",
    [
        pytest.param(_delete(TABLE, pk="job#3"), id="key-without-range-key"),
        pytest.param(_delete(FLAT, id="counter"), id="same-item-twice"),
    ],
)
def test_a_validation_error_rolls_back_the_operations_before_it(mode: str, invalid: dict[str, Any]) -> None:
    before = {name: _state(name) for name in (TABLE, FLAT)}

    error = _transact(_update_job_1(), _put_job_3(), _count_flat(), invalid)

    assert error is not None
    assert error.response["Error"]["Code"] == "ValidationException"
    assert {name: _state(name) for name in (TABLE, FLAT)} == before


def test_an_operation_on_a_missing_table_changes_nothing(mode: str) -> None:
    before = _state(TABLE)

    error = _transact(_update_job_1(), {"Put": {"TableName": "missing", "Item": _item(pk="x", sk="y")}})

    assert error is not None
    assert error.response["Error"]["Code"] == "ResourceNotFoundException"
    assert _state(TABLE) == before


def test_a_transaction_copies_only_the_items_it_touches(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(TABLE)
    for n in range(2000):
        table.put_item(_item(pk=f"bulk#{n:04}", sk="meta", status="DONE", gsi1pk="tenant-b", gsi1sk=f"{n:04}"))
    copies: list[Item] = []
    item_deepcopy = Item.__deepcopy__

    def counting_deepcopy(self: Item, memo: dict[int, Any]) -> Item:
        copies.append(self)
        return item_deepcopy(self, memo)

    monkeypatch.setattr(Item, "__deepcopy__", counting_deepcopy)
    before = _state(TABLE)

    failed = _transact(_update_job_1(), _job_2_is("RUNNING"), _put_job_3(), _delete(TABLE, pk="job#2", sk="step#1"))
    assert failed is not None
    assert _state(TABLE) == before
    failed_copies = len(copies)
    succeeded = _transact(_update_job_1(), _job_2_is("QUEUED"), _put_job_3(), _delete(TABLE, pk="job#2", sk="step#1"))
    assert succeeded is None

    if mode == "upstream":  # the whole table (2,004 items) once per operation
        assert failed_copies >= 4 * 2004
        assert len(copies) - failed_copies >= 4 * 2004
    else:  # job#1, job#2, job#2's step (job#3 is absent), and update_item's own copy of job#1
        assert failed_copies == 4
        assert len(copies) - failed_copies == 4
