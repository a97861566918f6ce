"""The `Alerts` port on Amazon SNS: a notification published to the stack's alarm topic (the one its CloudWatch alarms
notify), so an escalated job reaches whoever is subscribed to the alarms."""

from __future__ import annotations

from typing import Any

SUBJECT_LIMIT = 100  # SNS refuses a longer subject


class SnsAlerts:
    def __init__(self, client: Any, topic_arn: str) -> None:
        self._client = client
        self.topic_arn = topic_arn

    def publish(self, *, subject: str, message: str, attributes: dict[str, str]) -> None:
        self._client.publish(
            TopicArn=self.topic_arn,
            Subject=subject[:SUBJECT_LIMIT],
            Message=message,
            MessageAttributes={name: {"DataType": "String", "StringValue": v} for name, v in attributes.items()},
        )
