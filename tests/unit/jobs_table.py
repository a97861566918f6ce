"""The jobs table with every index the storage construct declares (the listings need them)."""

from __future__ import annotations

from typing import Any

import boto3

from tests.unit.aws_env import REGION
from tests.unit.conftest import TABLE_NAME

# (index, partition key, sort key, projection), as in stacks/storage.py
INDEXES = (
    ("by_tenant", "gsi1pk", "gsi1sk", "ALL"),
    ("by_state", "gsi2pk", "gsi2sk", "ALL"),
    ("by_created", "gsi3pk", "gsi3sk", "KEYS_ONLY"),
)


def create_jobs_table() -> Any:
    attributes = ["pk", "sk"] + [name for _, pk, sk, _ in INDEXES for name in (pk, sk)]
    created = boto3.resource("dynamodb", region_name=REGION).create_table(
        TableName=TABLE_NAME,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in attributes],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": index,
                "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": projection},
            }
            for index, pk, sk, projection in INDEXES
        ],
    )
    created.wait_until_exists()
    return created
