"""A job's metered usage in DynamoDB: its step invocations' counters and the transitions of its executions.

Each step invocation adds its counters with one atomic ADD on the job item (no transaction: a Map's items add
concurrently without conflicting, and a lost race is impossible since ADD commutes). The transitions are set once
per job attempt, conditionally, so two readers counting at once store one figure.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from longhaul.core import schema
from longhaul.core.metering import Metered


class UsageStore:
    def __init__(self, table: Any) -> None:
        self.table = table

    def add(self, job_id: str, usage: Metered) -> None:
        counters = usage.counters()
        if not counters:
            return
        names = {f"#m{i}": name for i, name in enumerate(counters)}
        values = {f":m{i}": value for i, value in enumerate(counters.values())}
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="ADD " + ", ".join(f"#m{i} :m{i}" for i in range(len(counters))),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def set_transitions(
        self, job_id: str, *, attempt: int, transitions: int, history_events: int, complete: bool
    ) -> bool:
        """Store the transitions counted over the job's executions up to `attempt` (False: already stored)."""
        try:
            self.table.update_item(
                Key=schema.job_key(job_id),
                UpdateExpression="SET orchestration_transitions = :t, orchestration_history_events = :e, "
                "orchestration_counted_attempt = :a, orchestration_complete = :c",
                ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(orchestration_counted_attempt) "
                "OR orchestration_counted_attempt < :a)",
                ExpressionAttributeValues={":t": transitions, ":e": history_events, ":a": attempt, ":c": complete},
            )
            return True
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
