"""No input is a 500: a corpus of hostile bodies over every route that reads one, each answered by a 400, 413 or 422
problem naming where the body is wrong, with nothing stored; and an error nobody foresaw is a 500 problem whose
`error_id` is in the log line of that error."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from handlers import api
from longhaul.api.jobs import JobService
from longhaul.core import limits
from longhaul.core.auth import api_key_item
from longhaul.core.observability import logger
from longhaul.core.settings import function_environment
from tests.unit.api_helpers import BODY, PROBLEM_JSON, body_with, stored_nothing
from tests.unit.conftest import KEY_A, ApiResponse, LambdaContext, rest_event

REVIEWER_KEY = "key-reviewer-a-0123456789"
MISSING = "job_000000000000000000000000000000"
# Every route that reads a JSON body, with a valid body of its own and the key of a role it serves.
ROUTES = {
    "submit": ("POST", "/v1/jobs", "tenant", BODY),
    "upload": ("POST", "/v1/uploads", "tenant", {"filename": "a.pdf", "media_type": "application/pdf"}),
    "replay": ("POST", f"/v1/ops/jobs/{MISSING}/replay", "operator", {"from_step": "draft_answer", "reason": "fix"}),
    "policy": ("PUT", "/v1/ops/tenants/tenant-a/policy", "operator", {"max_job_tokens": 1000}),
    "decision": ("POST", "/v1/reviews/rev_000000000000000000000000/decision", "reviewer", {"decision": "approve"}),
}
DEEP = 40  # above limits.MAX_JSON_DEPTH, below the parser's own recursion limit
INVISIBLE_TEXTS = {
    "spaces": "   \t  ",
    "zero-width": "\u200b\u200c\u200d\u2060\ufeff",
    "controls": "\x01\x02\x03\x7f",
    "other-blanks": "\u00a0\u3000\u2800\u3164\u00ad",
}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# Hostile bodies, whatever the route: (raw body or a function of the route's valid body, expected status, where:
# a location the problem's `errors` must name; None: every location is in the body).
CORPUS: dict[str, tuple[bytes | Callable[[dict[str, Any]], Any], int, list[Any] | None]] = {
    "not-utf-8": (b'{"name": "caf\xe9"}', 400, ["body"]),
    "utf-16": ('{"a": 1}'.encode("utf-16"), 400, ["body"]),
    "bom": (b'\xef\xbb\xbf{"a": 1}', 400, ["body"]),
    "truncated": (b'{"a": [1, 2', 400, ["body"]),
    "nested-1000": (nested(1000).encode(), 422, None),
    "nested-100000": (nested(100_000).encode(), 422, ["body"]),
    "nested-object": (
        lambda b: {**b, "x": json.loads(nested(DEEP))},
        422,
        ["body", "x", *[0] * (limits.MAX_JSON_DEPTH - 1)],  # the first array deeper than the limit
    ),
    "integer-5000-digits": (lambda b: b | {"n": "__BIG__"}, 422, ["body", "n"]),
    "float-overflow": (lambda b: b | {"n": "__1e999__"}, 422, ["body", "n"]),
    "nan": (lambda b: b | {"n": "__NaN__"}, 400, ["body", "n"]),
    "infinity": (lambda b: b | {"n": "__-Infinity__"}, 400, ["body", "n"]),
    "lone-surrogate": (lambda b: b | {"s": "__LONE__"}, 400, ["body", "s"]),
    "lone-surrogate-key": (lambda b: b | {"__LONE__": 1}, 400, ["body"]),
    "null": (b"null", 422, None),
    "array": (b"[]", 422, None),
    "string": (b'"x"', 422, None),
    "number": (b"1", 422, None),
    "over-the-limit": (b'{"x": "' + b"a" * limits.MAX_BODY_BYTES + b'"}', 413, None),
}


def encode(value: Any) -> bytes:
    """JSON with the tokens `json.dumps` will not write (NaN, 1e999, a lone surrogate) put in by hand."""
    text = json.dumps(value)
    for token, raw in (("1e999", "1e999"), ("NaN", "NaN"), ("-Infinity", "-Infinity"), ("BIG", "9" * 5000)):
        text = text.replace(f'"__{token}__"', raw)
    return text.replace("__LONE__", "\\ud800").encode()


@pytest.fixture
def keys(table: Any, api_keys: dict[str, str], operator_key: str) -> dict[str, str]:
    table.put_item(Item=api_key_item(REVIEWER_KEY, "tenant-a", role="reviewer"))
    return {"tenant": KEY_A, "operator": operator_key, "reviewer": REVIEWER_KEY}


def call(settings_env: dict[str, str], method: str, path: str, key: str, raw: bytes) -> ApiResponse:
    """The event API Gateway delivers: text as is, anything that is not UTF-8 base64-encoded (binary passthrough)."""
    event = rest_event(method, path, headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        event["body"], event["isBase64Encoded"] = raw.decode("utf-8"), False
    except UnicodeDecodeError:
        event["body"], event["isBase64Encoded"] = base64.b64encode(raw).decode(), True
    with function_environment(settings_env):
        result = api.handler(event, LambdaContext())
    headers = dict(result.get("headers") or {})
    headers.update({k: v[-1] for k, v in (result.get("multiValueHeaders") or {}).items() if v})
    return ApiResponse(status=result["statusCode"], headers=headers, raw_body=result.get("body") or "")


@pytest.mark.parametrize("route", ROUTES)
def test_a_hostile_body_is_a_problem_naming_where_never_a_500(
    settings_env: dict[str, str], keys: dict[str, str], table: Any, s3: Any, bucket: str, sfn: Any,
    state_machine_arn: str, route: str,
) -> None:  # fmt: skip
    method, path, role, valid = ROUTES[route]
    for case, (body, status, where) in CORPUS.items():
        raw = body if isinstance(body, bytes) else encode(body(valid))

        response = call(settings_env, method, path, keys[role], raw)

        assert response.status == status, f"{case}: {response.raw_body}"
        assert response.content_type.startswith(PROBLEM_JSON), case
        problem = response.body
        assert problem["status"] == status and problem["type"].startswith("https://longhaul.dev/problems/"), case
        if where is not None:
            assert where in [e["loc"] for e in problem["errors"]], f"{case}: {problem['errors']}"
        assert all(e["loc"][0] == "body" for e in problem.get("errors", [])), f"{case}: {problem['errors']}"
        assert (status == 413) == ("errors" not in problem), case  # a body over the limit is refused unread
    stored_nothing(table, s3, bucket, sfn, state_machine_arn)()


TEXT_FIELDS = {
    "question": ("submit", lambda text: body_with(question=text), ["body", "input", "question"]),
    "document text": (
        "submit",
        lambda text: body_with(documents=[{"name": "a.txt", "text": text}]),
        ["body", "input", "documents", 0, "text"],
    ),
    "document name": (
        "submit",
        lambda text: body_with(documents=[{"name": text, "text": "Some text."}]),
        ["body", "input", "documents", 0, "name"],
    ),
    "upload filename": ("upload", lambda text: {"filename": text, "media_type": "text/plain"}, ["body", "filename"]),
    "replay reason": ("replay", lambda text: {"from_step": "draft_answer", "reason": text}, ["body", "reason"]),
    "decision comment": ("decision", lambda text: {"decision": "approve", "comment": text}, ["body", "comment"]),
    "edited answer": (
        "decision",
        lambda text: {"decision": "edit", "edits": {"answer": text}},
        ["body", "edits", "answer"],
    ),
}


@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_a_text_field_with_no_visible_character_is_422_naming_it(
    settings_env: dict[str, str], keys: dict[str, str], table: Any, s3: Any, bucket: str, sfn: Any,
    state_machine_arn: str, field: str,
) -> None:  # fmt: skip
    route, make, where = TEXT_FIELDS[field]
    method, path, role, _ = ROUTES[route]
    for name, text in INVISIBLE_TEXTS.items():
        response = call(settings_env, method, path, keys[role], json.dumps(make(text)).encode())

        assert response.status == 422, f"{name}: {response.raw_body}"
        assert where in [e["loc"] for e in response.body["errors"]], f"{name}: {response.body['errors']}"
    stored_nothing(table, s3, bucket, sfn, state_machine_arn)()


def test_a_visible_character_among_invisible_ones_is_accepted(settings_env: dict[str, str], keys: dict[str, str]):
    body = body_with(question="\u200b  Why?  \u200b")

    assert call(settings_env, "POST", "/v1/jobs", keys["tenant"], json.dumps(body).encode()).status == 202


def test_a_whole_number_written_with_a_fraction_is_that_integer(settings_env: dict[str, str], keys: dict[str, str]):
    """JSON (and JSON Schema's `integer`) does not tell 16 from 16.0 or 1.6e1."""
    raw = json.dumps(body_with(max_passages="__16__")).replace('"__16__"', "1.6e1").encode()

    assert call(settings_env, "POST", "/v1/jobs", keys["tenant"], raw).status == 202


# ---------------------------------------------------------------------- the unforeseen


@pytest.fixture
def log_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    stream = io.StringIO()
    monkeypatch.setattr(logger.registered_handler, "stream", stream)
    yield stream


def error_lines(log: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, log.getvalue().splitlines()) if line.get("level") == "ERROR"]


def test_an_unforeseen_error_in_a_route_is_a_500_problem_whose_id_is_in_its_log_line(
    settings_env: dict[str, str], keys: dict[str, str], monkeypatch: pytest.MonkeyPatch, log_lines: io.StringIO
) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("a bug nobody foresaw")

    monkeypatch.setattr(JobService, "view", broken)

    response = call(settings_env, "GET", "/v1/jobs/job_1", keys["tenant"], b"")

    assert response.status == 500 and response.content_type.startswith(PROBLEM_JSON)
    problem = response.body
    assert problem["type"] == "https://longhaul.dev/problems/internal"
    assert problem["error_id"].startswith("err_") and problem["error_id"] in problem["detail"]
    (line,) = error_lines(log_lines)
    assert line["error_id"] == problem["error_id"] and "a bug nobody foresaw" in line["exception"]


def test_an_unforeseen_error_before_routing_is_a_500_problem_too(
    settings_env: dict[str, str], keys: dict[str, str], monkeypatch: pytest.MonkeyPatch, log_lines: io.StringIO
) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("the key store is down")

    monkeypatch.setattr(api, "_authenticate", broken)

    response = call(settings_env, "GET", "/v1/jobs", keys["tenant"], b"")

    assert response.status == 500 and response.content_type.startswith(PROBLEM_JSON)
    (line,) = error_lines(log_lines)
    assert line["error_id"] == response.body["error_id"] and "the key store is down" in line["exception"]


# ---------------------------------------------------------------------- paths


@pytest.mark.parametrize("segment", ["\u0084", 'a"b', "a\\b", "#", "`", "\u200b"])
def test_a_path_parameter_is_any_segment_validated_by_its_route(
    settings_env: dict[str, str], keys: dict[str, str], segment: str
) -> None:
    """Powertools matched only some characters in a path parameter (`404 no route` for the others); API Gateway
    hands the route any segment, and the route answers: a 422 naming the parameter, or its own 404."""
    policy = call(settings_env, "GET", f"/v1/ops/tenants/{segment}/policy", keys["operator"], b"")
    job = call(settings_env, "GET", f"/v1/jobs/{segment}", keys["tenant"], b"")

    assert policy.status == 422 and policy.body["errors"][0]["loc"] == ["path", "tenant_id"], policy.raw_body
    assert job.status == 404 and job.body["detail"].startswith("no job"), job.raw_body


def test_a_route_gets_its_path_parameters_decoded_as_api_gateway_passes_them(
    settings_env: dict[str, str], keys: dict[str, str]
) -> None:
    """API Gateway routes on the raw path (`%2F` is part of its segment) and passes the decoded segment in
    `pathParameters`: `/v1/jobs/job_x%2Fresult` is `GET /v1/jobs/{job_id}` for the job `job_x/result`."""
    job = call(settings_env, "GET", "/v1/jobs/job_x%2Fresult", keys["tenant"], b"")
    policy = call(settings_env, "GET", "/v1/ops/tenants/tenant%2Fa/policy", keys["operator"], b"")

    assert job.status == 404 and job.body["detail"] == "no job 'job_x/result'", job.raw_body
    assert job.body["instance"] == "/v1/jobs/job_x%2Fresult"
    assert policy.status == 422 and policy.body["errors"][0]["loc"] == ["path", "tenant_id"], policy.raw_body
