"""A job's live output: model text as it is written, coalesced into short-lived stream records.

Two records of a job are kept apart on purpose: the durable event log (gapless `seq`, state changes, the audit of a
job) and these stream records (coalesced model output that expires). A token stream never bloats or reorders the log,
and a delta is never a result: the validation ladder judges the whole answer, which the step keeps as before.

A model call's text deltas go through one `Coalescer` per call, which writes a record at most every
`COALESCE_SECONDS` or `COALESCE_CHARS` characters (whichever comes first) and one `call_finished` record with the
call's output tokens at its end. Each record is numbered in the job's stream (its SSE `id`), so a reader resumes
after the last id it has, without loss or repeat, while the records live (`STREAM_TTL_SECONDS`).
"""

import time
from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import Field

from longhaul.core.model import Model

#: How long a call's deltas are held before they are written as one record (seconds).
COALESCE_SECONDS = 0.25
#: How many characters of a call's deltas are written as one record at most, without waiting for `COALESCE_SECONDS`.
COALESCE_CHARS = 200
#: How long a stream record lives (DynamoDB TTL; readers skip expired ones too): at most a day, by design.
STREAM_TTL_SECONDS = 6 * 3600
MAX_STREAM_TTL_SECONDS = 24 * 3600
#: The offline model's writing pace: characters of its answer per (local, scaled) second, in pieces of
#: `OFFLINE_PIECE_CHARS`.
OFFLINE_CHARS_PER_SECOND = 2000.0
OFFLINE_PIECE_CHARS = 24

RecordKind = Literal["output_delta", "call_finished"]
#: The SSE event that closes a job's stream (its job is terminal and every record has been sent).
END_EVENT = "end"


class StreamRecord(Model):
    """One record of a job's stream: `output_delta` (a piece of a call's text; `index` counts the call's deltas from
    0) or `call_finished` (the call's `output_tokens`). `id` orders the job's records: the SSE id."""

    id: int = Field(ge=1)
    kind: RecordKind
    step: str
    item: int | None = None
    call_id: str
    index: int | None = Field(default=None, ge=0)
    text: str | None = None
    output_tokens: int | None = Field(default=None, ge=0)
    written_at: str

    def data(self) -> dict[str, object]:
        """The SSE event's data, as the API pins it."""
        if self.kind == "output_delta":
            return {**self._call(), "index": self.index, "text": self.text}
        return {**self._call(), "output_tokens": self.output_tokens}

    def _call(self) -> dict[str, object]:
        return {"step": self.step, "item": self.item, "call_id": self.call_id}


class NewRecord(Model):
    """A record to append (the store numbers it)."""

    kind: RecordKind
    step: str
    item: int | None = None
    call_id: str
    index: int | None = None
    text: str | None = None
    output_tokens: int | None = None


class StreamWriter(Protocol):
    def append(self, job_id: str, record: NewRecord) -> int: ...


class Coalescer:
    """One model call's deltas → a bounded number of stream records (see the module's docstring).

    `feed` is called with each delta as the provider sends it; a record is written when the held text reaches
    `chars` characters or `seconds` have passed since the held text's first delta; `finish` writes what is held
    and the `call_finished` record. A failure to write is swallowed (logged by `on_error`): the stream is a view, the
    call and its answer go on."""

    def __init__(
        self,
        write: Callable[[NewRecord], object],
        *,
        step: str,
        item: int | None,
        call_id: str,
        seconds: float = COALESCE_SECONDS,
        chars: int = COALESCE_CHARS,
        monotonic: Callable[[], float] = time.monotonic,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._write, self.step, self.item, self.call_id = write, step, item, call_id
        self.seconds, self.chars, self._monotonic, self._on_error = seconds, chars, monotonic, on_error
        self._held: list[str] = []
        self._held_chars = 0
        self._since: float | None = None
        self.index = 0  # the next delta's index
        self.records = 0

    def feed(self, text: str) -> None:
        if not text:
            return
        if self._since is None:
            self._since = self._monotonic()
        self._held.append(text)
        self._held_chars += len(text)
        while self._held_chars >= self.chars:
            joined = "".join(self._held)
            self._held, self._held_chars = [joined[self.chars :]], len(joined) - self.chars
            self._emit(joined[: self.chars])
            self._since = self._monotonic() if self._held_chars else None
        if self._held_chars and self._since is not None and self._monotonic() - self._since >= self.seconds:
            self.flush()

    def flush(self) -> None:
        """Write what is held (if anything) as one delta."""
        if self._held_chars:
            text = "".join(self._held)
            self._held, self._held_chars, self._since = [], 0, None
            self._emit(text)

    def finish(self, output_tokens: int) -> None:
        self.flush()
        self._safe(
            NewRecord(
                kind="call_finished",
                step=self.step,
                item=self.item,
                call_id=self.call_id,
                output_tokens=output_tokens,
            )
        )

    def _emit(self, text: str) -> None:
        record = NewRecord(
            kind="output_delta", step=self.step, item=self.item, call_id=self.call_id, index=self.index, text=text
        )
        self.index += 1
        self._safe(record)

    def _safe(self, record: NewRecord) -> None:
        try:
            self._write(record)
            self.records += 1
        except Exception as error:  # the stream is a view of the call: it never fails the call
            if self._on_error is not None:
                self._on_error(error)


def sse_frame(event: str, data: str, event_id: int | None = None) -> str:
    """One Server-Sent Event (`data` is one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


# ---------------------------------------------------------------------- the API's contract


class OutputDelta(Model):
    """`event: output_delta`: a piece of a model call's text as it was written."""

    step: str
    item: int | None = Field(description="The fan-out's item, or null for a step's own call.")
    call_id: str = Field(description="The model call (each call of a step, retry or rung has its own).")
    index: int = Field(ge=0, description="This call's deltas counted from 0: concatenated in order, its text.")
    text: str


class CallFinished(Model):
    """`event: call_finished`: a model call's text is complete (the step then validates the whole answer)."""

    step: str
    item: int | None
    call_id: str
    output_tokens: int = Field(ge=0)


class StreamEvent(Model):
    """One record of a job's stream, as the long-poll answers it (the SSE form sends `id`, `event` and `data`)."""

    id: int = Field(ge=1, description="The record's id: give it as `after` (or `Last-Event-ID`) to resume.")
    event: RecordKind
    data: OutputDelta | CallFinished


class StreamPage(Model):
    """The job's stream records after `after` (oldest first)."""

    job_id: str
    status: str = Field(description="The job's status when the records were read.")
    records: list[StreamEvent]
    last_event_id: int = Field(
        ge=0, description="The id to resume after: the last record's, or `after` when there were none."
    )
    ended: bool = Field(description="The job is terminal and every record was given: nothing more will come.")


def stream_event(record: StreamRecord) -> StreamEvent:
    data: OutputDelta | CallFinished = (
        OutputDelta.model_validate(record.data())
        if record.kind == "output_delta"
        else CallFinished.model_validate(record.data())
    )
    return StreamEvent(id=record.id, event=record.kind, data=data)
