"""A job's live output over real HTTP (`GET /v1/jobs/{job_id}/stream`): the draft's text arrives in pieces before the
job completes; a client that disconnects and resumes with `Last-Event-ID` gets the rest without gaps or repeats, and
the pieces of a call, concatenated, are the call's whole answer (as the operators' kept response has it)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import requests

from local.platform import LocalPlatform
from tests.workflows.conftest import Client


def sse(response: requests.Response) -> Iterator[dict[str, Any]]:
    """The Server-Sent Events of a streamed response as they arrive: {"id", "event", "data", "at"}."""
    frame: dict[str, Any] = {}
    for raw in response.iter_lines():
        line = raw.decode("utf-8")  # SSE is UTF-8
        if line == "":
            if "event" in frame:
                yield {**frame, "at": time.monotonic()}
            frame = {}
        elif line.startswith(":") or line.startswith("retry:"):
            continue
        else:
            name, _, value = line.partition(":")
            frame[name] = json.loads(value.strip()) if name == "data" else value.strip()


def test_a_client_follows_the_draft_as_it_is_written_and_resumes_without_gaps_or_repeats(
    platform: LocalPlatform, alpha: Client, beta: Client, sample_request: dict[str, Any]
) -> None:
    before = platform.time_scale
    platform.set_time_scale(1.0)  # the offline model writes at its real pace: the draft takes about a second
    try:
        job_id = alpha.submit(sample_request)
        url = f"{alpha.base}/v1/jobs/{job_id}/stream"
        # Another tenant's job is a 404.
        assert requests.get(url, headers=beta.headers, timeout=10).status_code == 404

        first: list[dict[str, Any]] = []
        with requests.get(
            url, headers={**alpha.headers, "Accept": "text/event-stream"}, stream=True, timeout=60
        ) as response:
            assert response.status_code == 200
            assert response.headers["Content-Type"].startswith("text/event-stream")
            for event in sse(response):
                first.append(event)
                drafted = [e for e in first if e["event"] == "output_delta" and e["data"]["step"] == "draft_answer"]
                if len(drafted) >= 2:
                    break  # disconnect in the middle of the draft
        first_draft_at = next(e["at"] for e in first if e["data"].get("step") == "draft_answer")
        status_then = alpha.get(f"/v1/jobs/{job_id}").json()["status"]

        rest: list[dict[str, Any]] = []
        with requests.get(
            url, headers={**alpha.headers, "Last-Event-ID": first[-1]["id"]}, stream=True, timeout=60
        ) as response:
            assert response.status_code == 200
            for event in sse(response):
                rest.append(event)
                if event["event"] == "end":
                    break
        job = alpha.wait(job_id)
    finally:
        platform.set_time_scale(before)

    assert job["status"] == "completed"
    assert status_then != "completed"  # the draft's first pieces were read while the job was still running
    assert time.monotonic() > first_draft_at
    assert rest[-1]["event"] == "end" and rest[-1]["data"] == {"status": "completed"}
    events = first + rest[:-1]
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(set(ids)) and ids == list(range(1, len(ids) + 1))  # no gap, no repeat, across the reconnect

    calls: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        calls.setdefault(event["data"]["call_id"], []).append(event)
    draft_calls = [c for c, es in calls.items() if es[0]["data"]["step"] == "draft_answer"]
    assert len(draft_calls) == 1
    draft = calls[draft_calls[0]]
    deltas = [e["data"] for e in draft if e["event"] == "output_delta"]
    assert len(deltas) >= 3  # several pieces
    assert [d["index"] for d in deltas] == list(range(len(deltas)))
    assert draft[-1]["event"] == "call_finished"

    ops = {**platform.auth_header("ops")}
    kept = requests.get(f"{alpha.base}/v1/ops/jobs/{job_id}/calls", headers=ops, timeout=10).json()
    draft_call = next(c for c in kept["calls"] if c["step"] == "draft_answer")
    answer = requests.get(
        f"{alpha.base}/v1/ops/jobs/{job_id}/responses/{draft_call['response_hash']}", headers=ops, timeout=10
    ).json()
    streamed = "".join(d["text"] for d in deltas)
    assert streamed == answer["text"]
    assert draft[-1]["data"]["output_tokens"] == answer["output_tokens"]
