"""Admission's adapters: the intake queues on SQS (one per SLA class) and the dispatcher's wake-up (an asynchronous
Lambda invoke: the caller never waits for the round).

A message that is not an intake message (`IntakeMessage`: not JSON, not an object, a field missing or malformed) is
poison: it is logged once (on its first receive) and neither deleted nor put back, so it stays hidden for
`HIDE_SECONDS` and the queue's redrive policy moves it to the dead-letter queue after `MAX_RECEIVES` receives; it
never fails the round and never holds a valid message back. A waiting job's message, by contrast, is read once per
round for as long as it waits: `put_back` renews it (a fresh copy, then the received one deleted), so its receive
count counts rounds that failed, never rounds waited.
"""

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AwareDatetime, ConfigDict, Field, ValidationError

from longhaul.core.budgets import SlaClass
from longhaul.core.model import Model
from longhaul.core.observability import logger
from longhaul.core.ports import Waiting
from longhaul.core.records import JOB_ID

RECEIVE_BATCH = 10  # SQS's most per ReceiveMessage
HIDE_SECONDS = 120  # a received message stays hidden while its round runs (longer than the dispatcher's timeout)
# Receives before SQS moves a message to the dead-letter queue: a message that no round could handle this many
# times is poison (a waiting job's message is renewed every round, so waiting never counts against it).
MAX_RECEIVES = 5


class IntakeMessage(Model):
    """The body of an intake message: the waiting job, as admission sent it."""

    model_config = ConfigDict(extra="forbid")

    job_id: Annotated[str, Field(pattern=JOB_ID.pattern)]
    tenant_id: Annotated[str, Field(min_length=1, max_length=128)]
    sla_class: SlaClass
    queued_at: AwareDatetime


class SqsIntakeQueues:
    def __init__(self, client: Any, queues: Mapping[str, str], *, hide_seconds: int = HIDE_SECONDS) -> None:
        self._client = client
        self._queues = dict(queues)
        self._hide_seconds = hide_seconds

    def send(self, waiting: Waiting) -> None:
        self._client.send_message(QueueUrl=self._queues[waiting.sla_class], MessageBody=_body(waiting))

    def receive(self, sla_class: str, limit: int) -> list[Waiting]:
        received: list[Waiting] = []
        while len(received) < limit:
            response = self._client.receive_message(
                QueueUrl=self._queues[sla_class],
                MaxNumberOfMessages=min(RECEIVE_BATCH, limit - len(received)),
                VisibilityTimeout=self._hide_seconds,
                WaitTimeSeconds=0,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
            messages = response.get("Messages", [])
            for message in messages:
                waiting = _waiting(message, sla_class)
                if waiting is not None:
                    received.append(waiting)
            if len(messages) < RECEIVE_BATCH:
                break
        return received

    def delete(self, received: list[Waiting]) -> None:
        for sla_class, batch in _batches(received):
            entries = [{"Id": str(i), "ReceiptHandle": w.receipt} for i, w in enumerate(batch)]
            self._client.delete_message_batch(QueueUrl=self._queues[sla_class], Entries=entries)

    def put_back(self, received: list[Waiting]) -> None:
        """Renew each message for the next round: a fresh copy first, then the received one deleted (a crash in
        between leaves a duplicate, which admission drops: a job takes its slot once)."""
        for sla_class, batch in _batches(received):
            queue = self._queues[sla_class]
            self._client.send_message_batch(
                QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": _body(w)} for i, w in enumerate(batch)]
            )
            entries = [{"Id": str(i), "ReceiptHandle": w.receipt} for i, w in enumerate(batch)]
            self._client.delete_message_batch(QueueUrl=queue, Entries=entries)


def _body(waiting: Waiting) -> str:
    return IntakeMessage(
        job_id=waiting.job_id, tenant_id=waiting.tenant_id, sla_class=waiting.sla_class, queued_at=waiting.queued_at
    ).model_dump_json()


def _waiting(message: Mapping[str, Any], sla_class: str) -> Waiting | None:
    """The waiting job a message carries, or None for poison (logged on its first receive only)."""
    receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
    try:
        body = IntakeMessage.model_validate_json(message.get("Body", ""))
        if body.sla_class != sla_class:
            raise ValueError(f"the message of a {body.sla_class} job in the {sla_class} queue")
    except (ValidationError, ValueError) as error:
        if receives <= 1:
            logger.warning(
                "poison intake message: it goes to the dead-letter queue after its receives",
                extra={
                    "queue": sla_class,
                    "message_id": message.get("MessageId"),
                    "max_receives": MAX_RECEIVES,
                    "reason": _reason(error),
                },
            )
        return None
    return Waiting(
        job_id=body.job_id,
        tenant_id=body.tenant_id,
        sla_class=body.sla_class,
        queued_at=body.queued_at,
        receipt=str(message["ReceiptHandle"]),
        receives=receives,
    )


def _reason(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        return f"{where}: {first['msg']}"[:300]
    return str(error)[:300]


def _batches(received: list[Waiting]) -> list[tuple[str, list[Waiting]]]:
    """Per class, in batches of at most ten (SQS's batch limit)."""
    out: list[tuple[str, list[Waiting]]] = []
    for sla_class in sorted({w.sla_class for w in received}):
        mine = [w for w in received if w.sla_class == sla_class]
        out += [(sla_class, mine[i : i + RECEIVE_BATCH]) for i in range(0, len(mine), RECEIVE_BATCH)]
    return out


class LambdaWake:
    """Wakes the dispatcher with an asynchronous invoke (`InvocationType=Event`): it returns once queued."""

    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def wake(self) -> None:
        self._client.invoke(FunctionName=self._function, InvocationType="Event", Payload=b'{"source": "wake"}')
