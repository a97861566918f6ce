"""One correlation id per job: taken from the client's request, stored on the job, returned on every response, bound to
the logs, and kept out of them: keys, secrets, tokens and document text never reach a log line."""

from __future__ import annotations

import io
import json
import logging

import pytest

from longhaul.core import correlation
from longhaul.core.observability import REDACTED, logger, redact
from tests.unit.api_helpers import submit
from tests.unit.conftest import KEY_A, CallApi

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}, TRACE_ID),
        ({"X-Request-Id": "client-req:42"}, "client-req:42"),
        ({"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01", "x-request-id": "other"}, TRACE_ID),
    ],
)
def test_the_clients_trace_or_request_id_is_the_correlation_id(headers: dict[str, str], expected: str) -> None:
    assert correlation.from_headers(headers) == expected


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"},
        {"X-Request-Id": "has space"},
        {"X-Request-Id": "x" * 129},
    ],
)
def test_without_a_usable_id_a_new_trace_id_is_made(headers: dict[str, str]) -> None:
    made = correlation.from_headers(headers)
    assert len(made) == 32 and int(made, 16) >= 0 and made != "0" * 32


def test_outgoing_calls_carry_the_id_and_a_traceparent_of_its_trace() -> None:
    headers = correlation.outgoing_headers(TRACE_ID)
    assert headers["X-Request-Id"] == TRACE_ID
    assert headers["traceparent"].startswith(f"00-{TRACE_ID}-") and headers["traceparent"].endswith("-01")
    assert correlation.outgoing_headers("client-req:42") == {"X-Request-Id": "client-req:42"}


@pytest.mark.usefixtures("api_keys")
def test_a_submission_stores_the_id_on_the_job_and_every_response_returns_it(call_api: CallApi) -> None:
    accepted = submit(call_api, **{"X-Request-Id": "order-7781"})
    assert accepted.status == 202 and accepted.header("X-Request-Id") == "order-7781"
    job_id = accepted.body["job_id"]

    status = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A)
    assert status.body["correlation_id"] == "order-7781"
    assert status.header("X-Request-Id") not in (None, "order-7781")  # the read is a request of its own
    events = call_api("GET", f"/v1/jobs/{job_id}/events", key=KEY_A).body["events"]
    assert events and all(e["correlation_id"] == "order-7781" for e in events)
    refused = call_api("GET", f"/v1/jobs/{job_id}", key="lh_not_a_key_0000", headers={"X-Request-Id": "r-1"})
    assert refused.status == 401 and refused.header("X-Request-Id") == "r-1"


def test_log_lines_keep_out_keys_secrets_tokens_and_document_text() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    logger.addHandler(handler)
    try:
        logger.info(
            "calling with lh_local_alpha_5f3a9c2e7b1d4068 and whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=",
            extra={
                "authorization": "Bearer abcdefghijklmnopqrstuvwxyz",
                "task_token": "AQB8AAAAKgAAAAMAAAAAAAAAAeN",
                "text": "CONFIDENTIAL master services agreement",
                "detail": {"secret": "s3cr3t", "pages": 3},
                "job_id": "job_1",
            },
        )
    finally:
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue().splitlines()[-1])
    text = json.dumps(line)
    for secret in ("lh_local_alpha", "whsec_", "abcdefghijklmnop", "AQB8AAAA", "CONFIDENTIAL", "s3cr3t"):
        assert secret not in text
    assert line["job_id"] == "job_1" and line["detail"] == {"secret": REDACTED, "pages": 3}


def test_long_opaque_tokens_are_masked_wherever_they_appear() -> None:
    token = "A" * 40 + "b+/=" * 30
    assert redact({"message": f"resuming with {token} now"}) == {"message": f"resuming with {REDACTED} now"}
