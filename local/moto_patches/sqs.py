"""SQS: a receive checks each message's retention against its queue's setting, not all the queue's attributes; a
message's visibility and delay are checked against a cheap clock; a queue's attributes are computed when read."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
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


# --- SQS: a queue's attributes are computed when read, one at a time ------------------------------------------


def _queue_class() -> type:
    from moto.sqs.models import Queue

    return Queue


class _QueueAttributes(Mapping[str, Any]):
    """A queue's attributes as upstream's `Queue.attributes` computes them (the same names and values: booleans as
    `"true"`/`"false"`, the redrive policy as JSON, the policy only when set), each computed when it is read."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._names = dict.fromkeys(names)

    def __getitem__(self, name: str) -> Any:
        from moto.core.utils import camelcase_to_underscores

        if name not in self._names:
            raise KeyError(name)
        queue = self._queue
        if name == "Policy" and queue.policy:
            return queue.policy
        if name == "RedrivePolicy" and queue.redrive_policy:
            return json.dumps(queue.redrive_policy)
        value = getattr(queue, camelcase_to_underscores(name))
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _attributes(self: Any) -> _QueueAttributes:
    return _QueueAttributes(self)


def compute_queue_attributes_when_read() -> None:
    """Compute a queue's attributes when each is read, not all whenever one is.

    Upstream's `Queue.attributes` is a property that computes every attribute, among them three message counts that
    each walk the queue's messages, and `send_message` reads it for one flag (`ContentBasedDeduplication`), as
    `_validate_message` and a FIFO queue's `add_message` do: a send to a queue of N messages walked them about nine
    times. With a backlog of a few hundred queued jobs, sending each new one to its intake queue was a tenth of a burst
    of submissions' CPU, growing with the backlog. The names and values are upstream's (`GetQueueAttributes` reads all
    of them, as before)."""
    _replace(_queue_class(), "attributes", property(_attributes))


def compute_queue_attributes_at_once() -> None:
    _restore(_queue_class(), "attributes")
