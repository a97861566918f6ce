"""SQS: a receive checks each message's retention against its queue's setting, not all the queue's attributes."""

from __future__ import annotations

from typing import Any

from local.moto_patches.core import _replace, _restore

# --- SQS: a receive checks each message's retention against its queue's setting ----------------------------


def _sqs_backend_class() -> type:
    from moto.sqs.models import SQSBackend

    return SQSBackend


def _within_retention(self: Any, queue_name: str, message: Any) -> bool:
    from moto.core.utils import unix_time

    retention = int(self.get_queue(queue_name).message_retention_period)
    return bool(retention + message.sent_timestamp / 1000 > unix_time())


def check_retention_directly() -> None:
    """Read a queue's retention period, not all its attributes, for each message a receive returns.

    Upstream's `is_message_valid_based_on_retention_period` calls `get_queue_attributes`, which computes every
    attribute of the queue, including three counts that walk all its messages: a receive of n messages from a queue
    of N costs n x 3N message checks. With a backlog of a few hundred queued jobs in an intake queue, each dispatcher
    round took seconds of CPU. The check itself is unchanged (sent time + retention period, against now).
    """
    _replace(_sqs_backend_class(), "is_message_valid_based_on_retention_period", _within_retention)


def check_retention_through_attributes() -> None:
    _restore(_sqs_backend_class(), "is_message_valid_based_on_retention_period")
