"""The local front door routes as API Gateway does and answers every refusal as problem+json: a real server on
127.0.0.1 with a REST API's routes and an integration that records the proxy events it is given."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from local.frontdoor import FrontDoor

PROBLEMS = "https://longhaul.dev/problems/"
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:api"
URI = f"arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/{FUNCTION}/invocations"
RESOURCES = {
    "/v1/jobs": ["GET", "POST"],
    "/v1/jobs/{job_id}": ["GET"],
    "/v1/jobs/{job_id}/result": ["GET"],
    "/console/{proxy+}": ["GET"],
}


class FakeApiGateway:
    """What the front door reads of a REST API: its resources, their integrations, its binary media types."""

    def get_resources(self, **_: Any) -> dict[str, Any]:
        items = [
            {"id": f"r{n}", "path": path, "resourceMethods": {m: {} for m in methods}}
            for n, (path, methods) in enumerate(RESOURCES.items())
        ]
        return {"items": items}

    def get_integration(self, **_: Any) -> dict[str, Any]:
        return {"uri": URI}

    def get_rest_api(self, **_: Any) -> dict[str, Any]:
        return {}


class Integration:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, arn: str, event: dict[str, Any]) -> tuple[bytes, bool]:
        self.events.append(event)
        answer = {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}
        return json.dumps(answer).encode(), False


@pytest.fixture
def integration() -> Integration:
    return Integration()


@pytest.fixture
def door(integration: Integration) -> Iterator[int]:
    front_door = FrontDoor(FakeApiGateway(), "api1", "v1", integration=integration)
    port = front_door.start("127.0.0.1", 0)
    yield port
    front_door.stop()


def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as is (in a thread: the server may answer before reading all of it) and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:

        def send() -> None:
            with contextlib.suppress(OSError):  # the server answered and closed before reading the rest
                conn.sendall(request)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        received = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
            head, _, body = received.partition(b"\r\n\r\n")
            if b"\r\n\r\n" in received and b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
        sender.join(timeout=10)
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def assert_problem(answer: tuple[int, dict[str, str], bytes], status: int, kind: str) -> dict[str, Any]:
    code, headers, body = answer
    assert code == status, body
    assert headers["content-type"].startswith("application/problem+json"), headers
    problem: dict[str, Any] = json.loads(body)
    assert problem["type"] == PROBLEMS + kind and problem["status"] == status, problem
    return problem


# ---------------------------------------------------------------------- routing on the raw path


def test_an_encoded_slash_is_part_of_its_segment(door: int, integration: Integration) -> None:
    status, _, _ = exchange(door, get("/v1/jobs/job_x%2Fresult"))

    assert status == 200
    (event,) = integration.events
    assert event["resource"] == "/v1/jobs/{job_id}" and event["requestContext"]["resourcePath"] == "/v1/jobs/{job_id}"
    assert event["pathParameters"] == {"job_id": "job_x/result"}  # decoded, as API Gateway passes it
    assert event["path"] == event["requestContext"]["path"] == "/v1/jobs/job_x%2Fresult"  # raw, as API Gateway


def test_path_parameters_are_decoded_and_the_path_kept_raw(door: int, integration: Integration) -> None:
    exchange(door, get("/v1/jobs/a%20b%C3%A9?x=1"))
    exchange(door, get("/console/jobs%2F1/page"))

    job, console = integration.events
    assert job["pathParameters"] == {"job_id": "a bé"} and job["path"] == "/v1/jobs/a%20b%C3%A9"
    assert job["queryStringParameters"] == {"x": "1"}
    assert console["resource"] == "/console/{proxy+}" and console["pathParameters"] == {"proxy": "jobs/1/page"}


def test_an_encoded_literal_segment_is_no_route(door: int, integration: Integration) -> None:
    assert_problem(exchange(door, get("/v1/job%73/job_1")), 404, "not-found")
    assert integration.events == []


def test_an_unknown_path_and_a_method_not_allowed_are_problems(door: int) -> None:
    assert_problem(exchange(door, get("/v1/nothing")), 404, "not-found")
    request = b"DELETE /v1/jobs/job_1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    code, headers, _ = exchange(door, request)
    assert_problem((code, headers, _), 405, "method-not-allowed")
    assert headers["allow"] == "GET"


# ---------------------------------------------------------------------- the HTTP layer's refusals


def test_a_header_over_the_servers_limit_is_a_431_problem(door: int, integration: Integration) -> None:
    problem = assert_problem(
        exchange(door, get("/v1/jobs", "X-Big: " + "a" * 256 * 1024)), 431, "request-header-fields-too-large"
    )

    assert problem["title"] == "Request Header Fields Too Large"
    assert integration.events == []


def test_too_many_headers_is_a_431_problem(door: int, integration: Integration) -> None:
    headers = [f"X-Header-{n}: {n}" for n in range(300)]

    assert_problem(exchange(door, get("/v1/jobs", *headers)), 431, "request-header-fields-too-large")
    assert integration.events == []


def test_a_malformed_request_line_is_a_400_problem(door: int) -> None:
    assert_problem(exchange(door, b"GET /v1/jobs HTTP/1.1 extra\r\nHost: x\r\n\r\n"), 400, "bad-request")
    assert_problem(exchange(door, b"GET /v1/jobs HTTP/3.0\r\nHost: x\r\n\r\n"), 505, "http-version-not-supported")


def test_a_malformed_chunked_body_is_a_400_problem(door: int, integration: Integration) -> None:
    request = (
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nnot-a-chunk-size\r\n{}\r\n0\r\n\r\n"
    )

    assert_problem(exchange(door, request), 400, "bad-request")
    assert integration.events == []
