"""Small DynamoDB helpers shared by the stores: plain values, update expressions, prefix queries, transactions."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from longhaul.core.errors import TransientError


class Cancelled(Exception):
    """A transaction was cancelled; `reasons` has each item's cancellation code (None where it was fine)."""

    def __init__(self, reasons: Sequence[str | None]) -> None:
        super().__init__(", ".join(str(r) for r in reasons))
        self.reasons = list(reasons)

    @property
    def guard_failed(self) -> bool:
        """The first item's condition (the guard) did not hold (moto reports no reasons at all)."""
        return not self.reasons or self.reasons[0] == "ConditionalCheckFailed"


def plain(value: Any) -> Any:
    """DynamoDB's Decimals back to int/float, recursively."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def update_expression(fields: Mapping[str, Any], *, extra_set: tuple[str, ...] = (), add: str = "") -> dict[str, Any]:
    """UpdateItem arguments that SET the fields (REMOVE those that are None) plus `extra_set`/`add` clauses."""
    names = {f"#f{i}": k for i, k in enumerate(fields)}
    values = {f":f{i}": v for i, v in enumerate(fields.values()) if v is not None}
    sets = [f"#f{i} = :f{i}" for i, v in enumerate(fields.values()) if v is not None] + list(extra_set)
    removes = [f"#f{i}" for i, v in enumerate(fields.values()) if v is None]
    expression = "SET " + ", ".join(sets)
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    if add:
        expression += f" ADD {add}"
    return {"UpdateExpression": expression, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}


def backoff(tries: int) -> None:
    """Full-jitter exponential backoff between optimistic retries (5 ms doubling, capped at 320 ms)."""
    time.sleep(random.uniform(0, 0.005 * 2 ** min(tries, 6)))


def query_prefix(table: Any, pk: str, prefix: str) -> list[dict[str, Any]]:
    """Every item of a partition whose sort key starts with `prefix` (consistent, all pages)."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {":pk": pk, ":prefix": prefix},
        "ConsistentRead": True,
    }
    while True:
        response = table.query(**kwargs)
        items.extend(plain(i) for i in response.get("Items", []))
        if "LastEvaluatedKey" not in response:
            return items
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def transact(client: Any, items: list[dict[str, Any]]) -> None:
    """One transaction; its cancellation raises `Cancelled` with the reasons."""
    try:
        client.transact_write_items(TransactItems=items)
    except ClientError as error:
        if error.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        raise Cancelled([r.get("Code") for r in error.response.get("CancellationReasons", [])]) from None


def transact_guarded(client: Any, items: list[dict[str, Any]], *, what: str) -> bool:
    """A transaction whose first item is a guard: False when the guard's condition did not hold; a conflict with a
    concurrent writer is a `TransientError` (worth another attempt)."""
    try:
        transact(client, items)
        return True
    except Cancelled as cancelled:
        if cancelled.guard_failed:
            return False
        raise TransientError(f"{what} conflicted with another write ({cancelled.reasons}); retry") from None
