"""A job's live output: the coalescer (bounded records, nothing lost), the stream store's resume (no loss, no
repeat, a writer still writing is waited for, expired records skipped), the adapters' streams (the same answer as
the call without a stream) and the routes (SSE windows, `Last-Event-ID`, the JSON long-poll, another tenant's 404)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from longhaul.adapters.models.offline import OfflineExtractiveModel
from longhaul.adapters.models.openai_compat import OpenAICompatibleModel
from longhaul.core import schema
from longhaul.core.llm import ModelRequest
from longhaul.core.streams import COALESCE_CHARS, MAX_STREAM_TTL_SECONDS, Coalescer, NewRecord
from longhaul.storage.streams import GAP_GRACE_SECONDS, StreamStore
from tests.unit.api_helpers import submit
from tests.unit.conftest import KEY_A, KEY_B, CallApi, FakeClock


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def delta(call_id: str = "c1", index: int = 0, text: str = "x") -> NewRecord:
    return NewRecord(kind="output_delta", step="draft_answer", call_id=call_id, index=index, text=text)


# ---------------------------------------------------------------------- the coalescer


def test_deltas_are_coalesced_by_size_and_nothing_is_lost() -> None:
    written: list[NewRecord] = []
    coalescer = Coalescer(written.append, step="draft", item=None, call_id="c1", monotonic=Ticks())
    text = "".join(f"word{i} " for i in range(400))
    for start in range(0, len(text), 7):
        coalescer.feed(text[start : start + 7])
    coalescer.finish(output_tokens=42)

    deltas = [r for r in written if r.kind == "output_delta"]
    assert "".join(r.text or "" for r in deltas) == text
    assert [r.index for r in deltas] == list(range(len(deltas)))
    assert all(len(r.text or "") <= COALESCE_CHARS for r in deltas)
    assert len(deltas) == -(-len(text) // COALESCE_CHARS)  # full pieces only, then what is left
    assert written[-1].kind == "call_finished" and written[-1].output_tokens == 42


def test_held_text_is_written_once_its_time_is_up() -> None:
    written: list[NewRecord] = []
    ticks = Ticks()
    coalescer = Coalescer(written.append, step="draft", item=3, call_id="c1", seconds=0.25, monotonic=ticks)
    coalescer.feed("Hello")
    ticks.now = 0.1
    coalescer.feed(", ")
    assert written == []  # held: neither 200 characters nor 250 ms yet
    ticks.now = 0.3
    coalescer.feed("world")
    assert [(r.text, r.index, r.item) for r in written] == [("Hello, world", 0, 3)]
    coalescer.feed("!")
    coalescer.finish(output_tokens=3)
    assert [r.text for r in written] == ["Hello, world", "!", None]


def test_a_record_that_cannot_be_written_never_fails_the_call() -> None:
    errors: list[Exception] = []

    def broken(_: NewRecord) -> None:
        raise RuntimeError("table unavailable")

    coalescer = Coalescer(broken, step="draft", item=None, call_id="c1", chars=2, on_error=errors.append)
    coalescer.feed("abcd")
    coalescer.finish(output_tokens=1)
    assert len(errors) == 3 and coalescer.records == 0


# ---------------------------------------------------------------------- the store: resume without loss or repeat


@pytest.fixture
def streams(table: Any, clock: FakeClock) -> StreamStore:
    return StreamStore(table, clock=clock)


def test_a_reader_resumes_after_its_last_id_without_loss_or_repeat(streams: StreamStore) -> None:
    for index in range(7):
        streams.append("job_1", delta(index=index, text=f"piece {index} "))
    streams.append("job_2", delta(text="another job's"))

    first = streams.after("job_1", 0, limit=3)
    rest = streams.after("job_1", first[-1].id)
    assert [r.id for r in first] == [1, 2, 3] and [r.id for r in rest] == [4, 5, 6, 7]
    assert [r.index for r in first + rest] == list(range(7))
    assert streams.after("job_1", 7) == []
    assert [r.text for r in streams.after("job_2")] == ["another job's"]


def test_a_reader_waits_for_an_id_still_being_written_then_passes_a_lost_one(
    streams: StreamStore, table: Any, clock: FakeClock
) -> None:
    streams.append("job_1", delta(index=0))
    table.update_item(  # a writer has taken id 2 and not written it yet
        Key={schema.PK: schema.stream_pk("job_1"), schema.SK: schema.STREAM_SEQ_SK},
        UpdateExpression="ADD stream_seq :one",
        ExpressionAttributeValues={":one": 1},
    )
    streams.append("job_1", delta(index=1))
    assert [r.id for r in streams.after("job_1")] == [1]  # not 3 before 2: a reader at 3 would never see 2
    clock.advance(timedelta(seconds=GAP_GRACE_SECONDS + 1))
    assert [r.id for r in streams.after("job_1", 1)] == [3]  # its writer died: passed


def test_records_expire(streams: StreamStore, clock: FakeClock) -> None:
    streams.append("job_1", delta())
    item = streams.table.get_item(Key={schema.PK: schema.stream_pk("job_1"), schema.SK: schema.stream_record_sk(1)})
    assert int(item["Item"][schema.TTL_ATTRIBUTE]) == int(clock.now().timestamp()) + streams.ttl_seconds
    assert streams.ttl_seconds <= MAX_STREAM_TTL_SECONDS
    clock.advance(timedelta(seconds=streams.ttl_seconds + 1))
    assert streams.after("job_1") == []  # moto never deletes it: the reader skips it
    with pytest.raises(ValueError):
        StreamStore(streams.table, ttl_seconds=MAX_STREAM_TTL_SECONDS + 1)


# ---------------------------------------------------------------------- the adapters' streams


def _request() -> ModelRequest:
    return ModelRequest(
        task="echo",
        system="s",
        prompt="p",
        context={"text": "The quick brown fox “jumps” over the lazy dog. " * 20},
        offline="tests.unit.test_streams:echo",
    )


def echo(context: dict[str, Any], model_id: str) -> str:
    return str(context["text"])


def test_the_offline_model_streams_the_same_answer_in_pieces() -> None:
    model = OfflineExtractiveModel()
    pieces: list[str] = []
    streamed = model.stream(_request(), pieces.append)
    assert streamed == model.generate(_request())
    assert len(pieces) > 10 and "".join(pieces) == streamed.text


@pytest.fixture
def sse_server() -> Iterator[str]:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": "Hello, "}}]},
        {"choices": [{"index": 0, "delta": {"content": "wörld"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3}},
    ]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_an_openai_compatible_stream_answers_what_the_call_would(sse_server: str) -> None:
    model = OpenAICompatibleModel("m", sse_server, api_key=lambda: None)
    pieces: list[str] = []
    response = model.stream(_request(), pieces.append)
    assert pieces == ["Hello, ", "wörld"]
    assert response.text == "Hello, wörld" and response.stop_reason == "end_turn"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 3)


# ---------------------------------------------------------------------- the routes


def _frames(body: str) -> list[dict[str, Any]]:
    frames = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            frames.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
    return frames


def test_the_stream_route_serves_sse_windows_resumes_and_refuses_another_tenant(
    call_api: CallApi, table: Any, api_keys: dict[str, str]
) -> None:
    job_id = submit(call_api).body["job_id"]
    streams = StreamStore(table)
    for index, text in enumerate(("The answer ", "is 42.")):
        streams.append(job_id, delta(index=index, text=text))
    streams.append(job_id, NewRecord(kind="call_finished", step="draft_answer", call_id="c1", output_tokens=4))
    path = f"/v1/jobs/{job_id}/stream"

    first = call_api("GET", path, key=KEY_A, query={"wait": "0"}, headers={"Accept": "text/event-stream"})
    assert first.status == 200 and first.content_type.startswith("text/event-stream")
    frames = _frames(first.raw_body)
    assert [f["event"] for f in frames] == ["output_delta", "output_delta", "call_finished"]
    assert frames[0]["data"] == {
        "step": "draft_answer",
        "item": None,
        "call_id": "c1",
        "index": 0,
        "text": "The answer ",
    }
    assert frames[2]["data"] == {"step": "draft_answer", "item": None, "call_id": "c1", "output_tokens": 4}
    assert [f["id"] for f in frames] == ["1", "2", "3"]

    resumed = call_api("GET", path, key=KEY_A, query={"wait": "0"}, headers={"Last-Event-ID": "1"})
    assert [f["id"] for f in _frames(resumed.raw_body)] == ["2", "3"]
    by_query = call_api("GET", path, key=KEY_A, query={"last_event_id": "2"}, headers={"Accept": "text/event-stream"})
    assert [f["id"] for f in _frames(by_query.raw_body)] == ["3"]

    page = call_api("GET", path, key=KEY_A, query={"after": "1", "wait": "0"})
    assert page.content_type.startswith("application/json")
    assert [r["id"] for r in page.body["records"]] == [2, 3] and page.body["last_event_id"] == 3
    assert page.body["records"][0] == {"id": 2, "event": "output_delta", "data": frames[1]["data"]}
    assert page.body["ended"] is False

    assert call_api("GET", path, key=KEY_B, headers={"Accept": "text/event-stream"}).status == 404
    assert call_api("GET", path, key=KEY_A, headers={"Last-Event-ID": "nope"}).status == 400

    finished = {"ExpressionAttributeNames": {"#s": "status"}, "ExpressionAttributeValues": {":s": "completed"}}
    table.update_item(Key=schema.job_key(job_id), UpdateExpression="SET #s = :s", **finished)
    ended = _frames(call_api("GET", path, key=KEY_A, headers={"Last-Event-ID": "3"}).raw_body)
    assert ended == [{"id": "3", "event": "end", "data": {"status": "completed"}}]
