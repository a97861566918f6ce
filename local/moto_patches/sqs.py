"""SQS: a receive checks each message's retention against its queue's setting, not all the queue's attributes; a
message's visibility and delay are checked against a cheap clock."""

from __future__ import annotations

import time
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


# --- SQS: a message's visibility and delay are checked against a cheap clock ----------------------------------


def _sqs_models() -> Any:
    import moto.sqs.models

    return moto.sqs.models


def _unix_time_millis(dt: Any = None) -> float:
    """`moto.core.utils.unix_time_millis`: now as `time.time()` (the same epoch milliseconds, without datetimes)."""
    if dt is not None:
        from moto.core.utils import unix_time_millis

        return unix_time_millis(dt)
    return time.time() * 1000.0


def read_the_clock_directly() -> None:
    """Let SQS's models read now in epoch milliseconds from `time.time()`.

    A queue checks every message's `visible` and `delayed` against now for each count it reports, and upstream's
    `send_message` computes all the queue's attributes (three such counts) to read one of them: each send walks the
    queue's messages three times, each check importing `UTC` and building two datetimes. With a few hundred queued
    jobs in an intake queue, that was a fifth of a burst of submissions' CPU. The times compared are the same
    milliseconds since the epoch, set and read by the same clock.
    """
    _replace(_sqs_models(), "unix_time_millis", _unix_time_millis)


def read_the_clock_through_datetimes() -> None:
    _restore(_sqs_models(), "unix_time_millis")
