"""What a function keeps per request is per thread: the local runtime runs invocations of one function at once.

Powertools keeps the request being resolved (event, route, routing context) and the logger's keys on shared objects;
`handlers.resolver.ThreadSafeRestResolver` and `longhaul.core.observability.PerThreadKeysFormatter` keep them per
thread.
Each test makes two requests meet inside their handlers (a barrier), so they do overlap, then checks what each saw.
"""

from __future__ import annotations

import io
import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger

from handlers.resolver import ThreadSafeRestResolver
from longhaul.core.observability import PerThreadKeysFormatter

MEET = threading.Barrier(2, timeout=10)


def _event(path: str, tenant: str) -> dict[str, Any]:
    return {
        "resource": path,
        "path": path,
        "httpMethod": "GET",
        "headers": {"x-tenant": tenant},
        "multiValueHeaders": {"x-tenant": [tenant]},
        "queryStringParameters": None,
        "pathParameters": None,
        "requestContext": {"path": path, "stage": "v1", "resourcePath": path, "httpMethod": "GET"},
        "body": None,
        "isBase64Encoded": False,
    }


def test_two_requests_resolved_at_once_each_see_their_own_event_route_and_context() -> None:
    # Given a resolver with two routes whose bodies meet before reading the request
    app = ThreadSafeRestResolver()

    def answer(name: str) -> dict[str, Any]:
        MEET.wait()
        return {
            "route": name,
            "path": app.current_event.path,
            "tenant": app.current_event.get_header_value("x-tenant"),
            "caller": app.context.get("caller"),
            "matched": app.context["_route"].rule.pattern,
        }

    @app.get("/v1/alpha")
    def alpha() -> dict[str, Any]:
        return answer("alpha")

    @app.get("/v1/beta")
    def beta() -> dict[str, Any]:
        return answer("beta")

    def call(path: str, tenant: str) -> dict[str, Any]:
        app.append_context(caller=tenant)  # what the API handler does before `resolve`
        response = app.resolve(_event(path, tenant), object())  # type: ignore[arg-type]
        assert response["statusCode"] == 200, response
        return dict(json.loads(response["body"]))

    # When both are resolved at the same time
    MEET.reset()
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(call, "/v1/alpha", "tenant-a")
        second = pool.submit(call, "/v1/beta", "tenant-b")
        a, b = first.result(timeout=10), second.result(timeout=10)

    # Then each answered from its own request
    assert (a["route"], a["path"], a["tenant"], a["caller"]) == ("alpha", "/v1/alpha", "tenant-a", "tenant-a")
    assert (b["route"], b["path"], b["tenant"], b["caller"]) == ("beta", "/v1/beta", "tenant-b", "tenant-b")
    assert "alpha" in a["matched"] and "beta" in b["matched"]
    assert app.context == {}  # each `resolve` cleared its own thread's context


def test_logger_keys_are_per_thread_and_start_from_the_sealed_ones() -> None:
    # Given a logger built like the functions' one
    formatter = PerThreadKeysFormatter()
    logger = Logger(service="keys-test", logger_formatter=formatter, stream=io.StringIO())
    formatter.seal()
    stream = io.StringIO()
    logger.registered_handler.setStream(stream)  # type: ignore[attr-defined]

    def request(job_id: str) -> None:
        logger.structure_logs(cold_start=False)  # what `inject_lambda_context(clear_state=True)` does first
        logger.append_keys(job_id=job_id)
        MEET.wait()  # the other request has appended its key too
        logger.info("working")
        MEET.wait()
        logger.remove_keys(["job_id"])

    # When two requests set their keys and log at the same time
    MEET.reset()
    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(request, "job-1"), pool.submit(request, "job-2")]:
            future.result(timeout=10)

    # Then each line carries its own request's key and the service
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert sorted(line["job_id"] for line in lines) == ["job-1", "job-2"]
    assert {line["service"] for line in lines} == {"keys-test"}
    # and the building thread's keys are untouched
    assert "job_id" not in logger.get_current_keys()


def test_routes_compile_their_patterns_on_first_use_and_match_as_compiled_ones() -> None:
    """An init registers every route; a route's pattern is compiled the first time a request of its method tries it,
    and matches (parameters, trailing slashes, other segments) as the compiled pattern would."""
    app = ThreadSafeRestResolver()

    @app.get("/v1/jobs/<job_id>/events")
    def events(job_id: str) -> dict[str, str]:
        return {"job": job_id}

    @app.get("/v1/jobs")
    def jobs() -> dict[str, str]:
        return {"jobs": "all"}

    lazy = app._compile_regex("/v1/jobs/<job_id>/events")
    compiled = re.compile(lazy.pattern)
    assert lazy.groups == compiled.groups == 1
    for path in ("/v1/jobs/job_1/events", "/v1/jobs/a b/events/", "/v1/jobs/a/b/events", "/v1/jobs//events"):
        found, expected = lazy.match(path), compiled.match(path)
        assert (found and found.groupdict()) == (expected and expected.groupdict()), path
    assert lazy.fullmatch("/v1/jobs/j/events").groupdict() == {"job_id": "j"}  # the rest of a compiled pattern
    assert app._compile_regex("/v1/jobs").groups == 0
    answer = app.resolve(_event("/v1/jobs/job_9/events", "t"), None)  # type: ignore[arg-type]
    assert answer["statusCode"] == 200 and json.loads(answer["body"]) == {"job": "job_9"}
    assert json.loads(app.resolve(_event("/v1/jobs/", "t"), None)["body"]) == {"jobs": "all"}  # type: ignore[arg-type]
