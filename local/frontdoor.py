"""The local front door: serves the deployed REST API's routes over HTTP, as API Gateway would.

moto stores the REST API (resources, methods, Lambda-proxy integrations) but does not execute it. The routes
are read back from moto; each request becomes a REST proxy event, the integrated function is invoked as API Gateway
does (the platform passes the in-process runtime's `invoke_integration`: its middlewares, timeout and concurrency
apply) and the proxy result is mapped back.

Routing is on the raw (still percent-encoded) path, as API Gateway routes: an encoded slash is part of its segment,
so `/v1/jobs/job_x%2Fresult` is `GET /v1/jobs/{job_id}` with `job_id` `job_x/result`. The event's `path` is the raw
path, its `pathParameters` the decoded segments. Every refusal is problem+json, the HTTP layer's own included (a
request line or header over the server's limits, too many headers, a malformed request: `ProblemRequestHandler`).

A route whose method has a Lambda authorizer (`authorizationType: CUSTOM`) runs it first, as API Gateway does
(`GatewayAuthorizer`): the same function, a REQUEST authorizer event, its answer cached by the identity header for
the TTL the template declares (`local.deploy.ApiAuthorizer`); public routes (`NONE`) stay public.

Beside the API's routes, the front door is the local OIDC issuer's origin (`local.issuer`): it serves
`/.well-known/openid-configuration`, `/.well-known/jwks.json` and mints tokens at `POST /local/token`.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import logging
import mimetypes
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.security import safe_join
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from local import lambda_runtime
from local.issuer import DISCOVERY_PATH, JWKS_PATH, TOKEN_PATH, LocalIssuer

lambda_runtime.ensure_code_root_on_path()  # the limits are stated once, in the domain package
from longhaul.core import limits  # noqa: E402

LOG = logging.getLogger(__name__)  # not under "longhaul" (the handlers' Powertools logger: it does not propagate)
# API Gateway's own hard limit: below it the API function applies the platform's limit (and answers its 413).
MAX_BODY_BYTES = limits.API_GATEWAY_MAX_BODY_BYTES
PROBLEM_BASE = "https://longhaul.dev/problems/"
REGION = "us-east-1"  # the local platform's (local/deploy.py), in the method ARN an authorizer is asked about
MANUAL_PATH = "/manual/"  # where the built manual is served, beside the API's routes
ISSUER_PATHS = frozenset({JWKS_PATH, DISCOVERY_PATH, TOKEN_PATH})  # the local OIDC issuer's, beside the API's
_FUNCTION_IN_URI = re.compile(
    r":lambda:path/[^/]+/functions/(?P<arn>.+)/(?P<streaming>response-streaming-)?invocations$"
)
# The characters a raw path keeps as they are (RFC 3986 pchar and "/", "%" of escapes); others are percent-encoded.
_PATH_SAFE = "/%!$&'()*+,;=:@-._~"
# The `type` of each refusal of the HTTP layer (the request never reached the application).
HTTP_LAYER_PROBLEMS = {
    400: "bad-request",
    408: "request-timeout",
    414: "uri-too-long",
    431: "request-header-fields-too-large",
    501: "not-implemented",
    505: "http-version-not-supported",
}
_TEXT_TYPES = (
    "text/",
    "application/json",
    "application/problem+json",
    "application/xml",
    "+json",
    "+xml",
    "application/x-www-form-urlencoded",
    "application/javascript",
)


@dataclass(frozen=True)
class Route:
    """One method of one resource, e.g. GET /v1/jobs/{job_id} -> function ARN."""

    resource_id: str
    resource_path: str
    method: str
    function_arn: str
    pattern: re.Pattern[str]
    streaming: bool = False  # `responseTransferMode: STREAM`: the response is streamed (`FrontDoor._stream`)
    authorized: bool = False  # `authorizationType: CUSTOM`: the API's Lambda authorizer runs first

    @property
    def literal_segments(self) -> int:
        return sum(1 for part in self.resource_path.split("/") if part and not part.startswith("{"))


def path_pattern(resource_path: str) -> re.Pattern[str]:
    """`/v1/jobs/{job_id}` -> regex with named groups; `{proxy+}` matches the rest of the path."""
    parts = []
    for segment in resource_path.strip("/").split("/"):
        if segment.startswith("{") and segment.endswith("+}"):
            parts.append(f"(?P<{_group(segment[1:-2])}>.+)")
        elif segment.startswith("{") and segment.endswith("}"):
            parts.append(f"(?P<{_group(segment[1:-1])}>[^/]+)")
        elif segment:
            parts.append(re.escape(segment))
    return re.compile("^/" + "/".join(parts) + "/?$")


def _group(name: str) -> str:
    return re.sub(r"\W", "_", name)


def load_routes(apigateway: Any, rest_api_id: str) -> list[Route]:
    """Every method with a Lambda integration of the REST API, most specific paths first."""
    routes = []
    resources = apigateway.get_resources(restApiId=rest_api_id, limit=500, embed=["methods"])["items"]
    for resource in resources:
        for method in resource.get("resourceMethods", {}):
            integration = apigateway.get_integration(
                restApiId=rest_api_id, resourceId=resource["id"], httpMethod=method
            )
            match = _FUNCTION_IN_URI.search(integration.get("uri", ""))
            if match is None:
                LOG.warning("skipping %s %s: not a Lambda integration", method, resource["path"])
                continue
            routes.append(
                Route(
                    resource["id"],
                    resource["path"],
                    method.upper(),
                    match["arn"],
                    path_pattern(resource["path"]),
                    streaming=bool(match["streaming"]),
                    authorized=(resource["resourceMethods"][method] or {}).get("authorizationType") == "CUSTOM",
                )
            )
    return sorted(routes, key=lambda r: (-r.literal_segments, -len(r.resource_path)))


def problem_body(status: int, kind: str, title: str, detail: str) -> bytes:
    return json.dumps({"type": PROBLEM_BASE + kind, "title": title, "status": status, "detail": detail}).encode()


def problem(status: int, kind: str, title: str, detail: str, headers: dict[str, str] | None = None) -> Response:
    body = problem_body(status, kind, title, detail)
    return Response(body, status, headers=headers, content_type="application/problem+json")


def http_layer_problem(status: int) -> tuple[str, str]:
    """The `type` (its last part) and title of a refusal of the HTTP layer with `status`."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return HTTP_LAYER_PROBLEMS.get(status) or re.sub(r"[^a-z0-9]+", "-", phrase.lower()).strip("-"), phrase


def raw_path(request: Request) -> str:
    """The request's path as the client sent it, percent-encodings kept (`PATH_INFO` is decoded): what API Gateway
    routes on and passes as the event's `path`. Without the server's raw URI, the decoded path encoded again."""
    raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI")
    if not raw:
        return quote(request.path, safe=_PATH_SAFE)
    split = urlsplit(str(raw))
    # No scheme but a leading "//": the first segment was taken for a host (as werkzeug's server puts it back).
    path = f"/{split.netloc}{split.path}" if not split.scheme and split.netloc else split.path
    try:  # the request line's bytes (the server reads them as Latin-1; WSGI passes that as UTF-8 read as Latin-1)
        sent = path.encode("latin-1").decode().encode("latin-1")
    except UnicodeError:
        sent = path.encode()
    return quote(sent, safe=_PATH_SAFE) or "/"


def path_parameter(raw: str) -> str:
    """A path parameter as API Gateway passes it in `pathParameters`: the raw segment(s), decoded."""
    return unquote(raw, errors="replace")


class ProblemRequestHandler(WSGIRequestHandler):
    """werkzeug's request handler, whose own refusals (`send_error`: a request line or header line over the limit,
    too many headers, a malformed request line, an unsupported HTTP version) are problem+json, not HTML."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        kind, phrase = http_layer_problem(code)
        detail = "; ".join(part for part in (message, explain) if part) or phrase
        self.log_error("code %d, message %s", code, message)
        if self.request_version == "HTTP/0.9":  # the request line was not understood: answer with a status line
            self.request_version = "HTTP/1.0"
        self.send_response(code, phrase)
        self.send_header("Connection", "close")
        body = b""
        if code >= 200 and code not in (HTTPStatus.NO_CONTENT, HTTPStatus.RESET_CONTENT, HTTPStatus.NOT_MODIFIED):
            body = problem_body(code, kind, phrase, detail)
            self.send_header("Content-Type", "application/problem+json")
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)


def _is_text(content_type: str, binary_types: list[str]) -> bool:
    media = content_type.split(";")[0].strip().lower()
    if any(media == t.lower() or (t.endswith("/*") and media.startswith(t[:-1].lower())) for t in binary_types):
        return False
    return not media or any(t in media for t in _TEXT_TYPES)


def _multi(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _forwarded(request: Request) -> list[tuple[str, str]]:
    """The X-Forwarded-* headers API Gateway adds, unless the client sent them (links are built from them)."""
    present = {k.lower() for k, _ in request.headers.items()}
    port = str(request.environ.get("SERVER_PORT", ""))
    candidates = [
        ("X-Forwarded-For", request.remote_addr or "127.0.0.1"),
        ("X-Forwarded-Proto", request.scheme),
        ("X-Forwarded-Port", port),
    ]
    return [(k, v) for k, v in candidates if k.lower() not in present]


def proxy_event(
    request: Request,
    route: Route,
    params: dict[str, str],
    stage: str,
    binary_types: list[str],
    api_id: str,
    path: str | None = None,
) -> dict[str, Any]:
    """The REST API (v1) Lambda proxy event for `request` matched to `route`; `path` is the raw path (`raw_path`)."""
    path = path or raw_path(request)
    raw = request.get_data()
    text = raw and _is_text(request.content_type or "", binary_types)
    try:
        body = raw.decode() if text else None
    except UnicodeDecodeError:
        body = None
    encoded = bool(raw) and body is None
    headers = _multi(list(request.headers.items()) + _forwarded(request))
    query = _multi(list(request.args.items(multi=True)))
    request_id = str(uuid.uuid4())
    now = time.time()
    return {
        "resource": route.resource_path,
        "path": path,
        "httpMethod": request.method,
        "headers": {k: v[-1] for k, v in headers.items()} or None,
        "multiValueHeaders": headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": {
            "accountId": route.function_arn.split(":")[4],
            "apiId": api_id,
            "resourceId": route.resource_id,
            "resourcePath": route.resource_path,
            "httpMethod": request.method,
            "path": path,  # as behind a custom domain: the front door serves the stage at the root
            "stage": stage,
            "protocol": request.environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
            "requestId": request_id,
            "extendedRequestId": request_id,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "domainName": request.host,
            "identity": {
                "sourceIp": request.remote_addr or "127.0.0.1",
                "userAgent": request.user_agent.string,
            },
        },
        "body": base64.b64encode(raw).decode() if encoded else (body if raw else None),
        "isBase64Encoded": encoded,
    }


def proxy_response(payload: dict[str, Any], request_id: str) -> Response:
    """Map a Lambda proxy result (statusCode, headers, multiValueHeaders, body, isBase64Encoded) to HTTP."""
    body = payload.get("body") or ""
    data = base64.b64decode(body) if payload.get("isBase64Encoded") else str(body).encode()
    response = Response(data, int(payload.get("statusCode", 200)))
    response.headers.remove("Content-Type")
    for key, value in (payload.get("headers") or {}).items():
        response.headers[key] = str(value)
    for key, values in (payload.get("multiValueHeaders") or {}).items():
        response.headers.remove(key)
        for value in values:
            response.headers.add(key, str(value))
    response.headers.setdefault("x-amzn-RequestId", request_id)
    return response


SSE = "text/event-stream"
#: How long the front door holds a streamed response at most (API Gateway's limit for a streamed response).
STREAM_MAX_SECONDS = 15 * 60
#: The `wait` each later window of a stream is asked with (seconds): a window answers as soon as it has records.
STREAM_WINDOW_WAIT_SECONDS = 10
_SSE_ID = re.compile(rb"^id: *(\d+)$", re.MULTILINE)
_SSE_END = re.compile(rb"^event: *end$", re.MULTILINE)


def _last_id(body: bytes, previous: str | None) -> str | None:
    ids = _SSE_ID.findall(body)
    return ids[-1].decode() if ids else previous


def _ended(body: bytes) -> bool:
    return _SSE_END.search(body) is not None


def _next_window(event: dict[str, Any], last_id: str | None) -> dict[str, Any]:
    """The proxy event of a stream's next window: the same request, after the last id sent, waiting for records."""
    replaced = ("last-event-id", "accept")
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() not in replaced}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() not in replaced}
    headers["Accept"], multi["Accept"] = SSE, [SSE]  # the stream goes on as it began
    if last_id is not None:
        headers["Last-Event-ID"], multi["Last-Event-ID"] = last_id, [last_id]
    query = {k: v for k, v in (event.get("queryStringParameters") or {}).items() if k != "wait"}
    query["wait"] = str(STREAM_WINDOW_WAIT_SECONDS)
    request_id = str(uuid.uuid4())
    context = {**event["requestContext"], "requestId": request_id, "extendedRequestId": request_id}
    return {
        **event,
        "headers": headers,
        "multiValueHeaders": multi,
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()},
        "requestContext": context,
    }


# What API Gateway answers when the authorizer refuses (the stack's UNAUTHORIZED and ACCESS_DENIED gateway responses).
UNAUTHORIZED_TITLE = "A valid API key is required (Authorization: Bearer <key>)"


def unauthorized() -> Response:
    return problem(
        401,
        "unauthorized",
        UNAUTHORIZED_TITLE,
        "The API's authorizer refused the request",
        {"WWW-Authenticate": 'Bearer realm="longhaul"'},
    )


class GatewayAuthorizer:
    """API Gateway's REQUEST authorizer: no identity header is a 401 without a call; otherwise the function is
    invoked with the authorizer event and its policy (Allow on the request's method ARN, else 401 as the stack's
    ACCESS_DENIED response) and `context` are kept by the header's value for `ttl_seconds` (0: not kept). A raised
    `Unauthorized` is a 401 and is not kept; any other failure is a 500, as API Gateway answers."""

    def __init__(
        self,
        function_arn: str,
        identity_header: str,
        ttl_seconds: int,
        *,
        invoke: Callable[[str, dict[str, Any]], tuple[bytes, bool]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.function_arn, self.identity_header, self.ttl_seconds = function_arn, identity_header, ttl_seconds
        self.invoke, self.clock = invoke, clock
        self._answers: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def authorize(self, event: dict[str, Any]) -> dict[str, Any] | Response:
        """The `requestContext.authorizer` of an allowed request, or the refusal."""
        wanted = self.identity_header.lower()
        identity = next((v for k, v in (event.get("headers") or {}).items() if k.lower() == wanted), None)
        if not identity:
            return unauthorized()
        method_arn = self.method_arn(event)
        now = self.clock()
        with self._lock:
            kept = self._answers.get(identity)
        answer = kept[1] if kept is not None and now < kept[0] else None
        if answer is None:
            raw, errored = self.invoke(self.function_arn, self.event(event, method_arn))
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = None
            if errored and isinstance(answer, dict) and answer.get("errorMessage") == "Unauthorized":
                return unauthorized()
            if errored or not isinstance(answer, dict) or "policyDocument" not in answer:
                LOG.error("the authorizer failed or answered no policy: %s", raw[:2000])
                return problem(500, "authorizer-failed", "Internal Server Error", "The authorizer failed")
            if self.ttl_seconds > 0:
                with self._lock:
                    self._answers[identity] = (now + self.ttl_seconds, answer)
        if not _allows(answer["policyDocument"], method_arn):
            return unauthorized()
        return {**dict(answer.get("context") or {}), "principalId": answer.get("principalId")}

    @staticmethod
    def method_arn(event: dict[str, Any]) -> str:
        context = event["requestContext"]
        return (
            f"arn:aws:execute-api:{REGION}:{context['accountId']}:{context['apiId']}/{context['stage']}/"
            f"{event['httpMethod']}{event['path']}"
        )

    @staticmethod
    def event(event: dict[str, Any], method_arn: str) -> dict[str, Any]:
        """A REQUEST authorizer's event, as API Gateway builds it from the request."""
        keys = (
            "resource",
            "path",
            "httpMethod",
            "headers",
            "multiValueHeaders",
            "queryStringParameters",
            "multiValueQueryStringParameters",
            "pathParameters",
            "stageVariables",
            "requestContext",
        )
        return {"type": "REQUEST", "methodArn": method_arn, **{k: event.get(k) for k in keys}}


def _allows(policy: dict[str, Any], method_arn: str) -> bool:
    """An IAM policy's verdict on `execute-api:Invoke` of `method_arn` (an explicit Deny wins)."""
    verdicts = []
    for statement in policy.get("Statement") or []:
        actions = statement.get("Action") or []
        resources = statement.get("Resource") or []
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        if any(fnmatch.fnmatchcase("execute-api:Invoke", a) for a in actions) and any(
            fnmatch.fnmatchcase(method_arn, r) for r in resources
        ):
            verdicts.append(statement.get("Effect"))
    return "Allow" in verdicts and "Deny" not in verdicts


class FrontDoor:
    """A threaded werkzeug server that routes requests to the REST API's Lambda integrations."""

    def __init__(
        self,
        apigateway: Any,
        rest_api_id: str,
        stage: str,
        *,
        integration: Callable[[str, dict[str, Any]], tuple[bytes, bool]],
        manual: Path | None = None,
        authorizer: GatewayAuthorizer | None = None,
        issuer: LocalIssuer | None = None,
    ) -> None:
        """`integration(function_arn, event) -> (payload, errored)` invokes a route's function. `manual`: the built
        manual (`make docs-site`'s `site/`), served at `/manual/` (the console's links go there locally).
        `authorizer`: the API's Lambda authorizer, run before the routes that declare it. `issuer`: the local OIDC
        issuer whose documents and token endpoint this origin serves."""
        self.integration = integration
        self.authorizer = authorizer
        self.issuer = issuer
        self.manual = manual
        self.rest_api_id = rest_api_id
        self.stage = stage
        self.routes = load_routes(apigateway, rest_api_id)
        self.binary_types: list[str] = apigateway.get_rest_api(restApiId=rest_api_id).get("binaryMediaTypes", [])
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def match(self, path: str, method: str) -> tuple[Route, dict[str, str]] | Response:
        """The route of the raw `path` (a parameter matches one raw segment, `%2F` included) and its groups, still
        encoded; or the 405 or 404 problem."""
        allowed: list[str] = []
        for route in self.routes:
            found = route.pattern.match(path)
            if found is None:
                continue
            if route.method in (method, "ANY"):
                return route, {k: v for k, v in found.groupdict().items()}
            allowed.append(route.method)
        if allowed:
            return problem(
                405,
                "method-not-allowed",
                "Method Not Allowed",
                f"{method} is not allowed on {path}",
                {"Allow": ", ".join(sorted(set(allowed)))},
            )
        return problem(404, "not-found", "Not Found", f"No route for {method} {path}")

    def _params(self, route: Route, groups: dict[str, str]) -> dict[str, str]:
        names = re.findall(r"\{([^}+]+)\+?\}", route.resource_path)
        return {name: path_parameter(groups[_group(name)]) for name in names}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            response = self.handle(request)
        except Exception:
            LOG.exception("front door failed on %s %s", request.method, request.path)
            response = problem(500, "internal", "Internal Server Error", "The local front door failed")
        return response(environ, start_response)

    def handle(self, request: Request) -> Response:
        request.max_content_length = MAX_BODY_BYTES
        try:
            request.get_data()  # cached for `proxy_event`; raises when over the limit, even when chunked
        except RequestEntityTooLarge:
            return problem(  # the same problem the API function answers for its (lower) limit
                413, "payload-too-large", "The request body is too large", limits.body_too_large()
            )
        except HTTPException as refused:  # werkzeug's own refusal of the request
            kind, phrase = http_layer_problem(refused.code or 400)
            return problem(refused.code or 400, kind, phrase, refused.description or phrase)
        except (OSError, ValueError) as unreadable:  # e.g. a malformed chunked body
            return problem(400, "bad-request", "Bad Request", f"the request body could not be read: {unreadable}")
        if self.manual is not None and (request.path + "/").startswith(MANUAL_PATH):
            return self._manual(request)
        if self.issuer is not None and request.path in ISSUER_PATHS:
            return self._issuer(request)
        path = raw_path(request)
        matched = self.match(path, request.method)
        if isinstance(matched, Response):
            return matched
        route, groups = matched
        event = proxy_event(
            request, route, self._params(route, groups), self.stage, self.binary_types, self.rest_api_id, path
        )
        if route.authorized and self.authorizer is not None:
            authorized = self.authorizer.authorize(event)
            if isinstance(authorized, Response):
                return authorized
            event["requestContext"]["authorizer"] = authorized
        if route.streaming:
            return self._stream(route, event)
        return self._invoke(route, event)

    def _issuer(self, request: Request) -> Response:
        """The local OIDC issuer's discovery document, its keys, and its token endpoint (not API Gateway's)."""
        assert self.issuer is not None
        allowed = "POST" if request.path == TOKEN_PATH else "GET"
        if request.method != allowed:
            return problem(
                405, "method-not-allowed", "Method Not Allowed", f"{request.method} is not allowed on {request.path}",
                {"Allow": allowed},
            )  # fmt: skip
        if request.path == JWKS_PATH:
            document = self.issuer.jwks()
        elif request.path == DISCOVERY_PATH:
            document = self.issuer.discovery()
        else:
            try:
                document = self.issuer.mint_request(json.loads(request.get_data() or b"null"))
            except ValueError as refused:  # TokenRequestError, or a body that is not JSON
                return problem(422, "invalid-request", "Invalid token request", str(refused))
        return Response(json.dumps(document), 200, content_type="application/json")

    def _manual(self, request: Request) -> Response:
        """A file of the built manual (not API Gateway's: the local platform's convenience)."""
        assert self.manual is not None
        if request.path + "/" == MANUAL_PATH:
            return Response(status=308, headers={"Location": MANUAL_PATH})
        relative = request.path[len(MANUAL_PATH) :] or "index.html"
        found = safe_join(str(self.manual), relative)
        if found is not None and Path(found).is_dir():
            found = str(Path(found) / "index.html")
        if found is None or not Path(found).is_file():
            built = "" if (self.manual / "index.html").is_file() else " (the manual is not built: make docs-site)"
            return Response(f"not found: {request.path}{built}\n", status=404, mimetype="text/plain")
        media_type = mimetypes.guess_type(found)[0] or "application/octet-stream"
        return Response(Path(found).read_bytes(), mimetype=media_type)

    def _invoke(self, route: Route, event: dict[str, Any]) -> Response:
        request_id = event["requestContext"]["requestId"]
        method, path = event["httpMethod"], event["path"]
        raw, errored = self.integration(route.function_arn, event)
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        if errored or not isinstance(payload, dict) or "statusCode" not in payload:
            LOG.error(
                "%s %s: malformed Lambda proxy response or error: %s",
                method,
                path,
                raw[:2000],
            )
            return problem(
                502,
                "bad-gateway",
                "Bad Gateway",
                "The integration failed or returned a malformed proxy response",
                {"x-amzn-RequestId": request_id},
            )
        return proxy_response(payload, request_id)

    def _stream(self, route: Route, event: dict[str, Any]) -> Response:
        """A streaming route (`responseTransferMode: STREAM`): one HTTP response held open while the function answers
        window after window of Server-Sent Events, each asked with the last id sent (`Last-Event-ID`), written and
        flushed as it comes (chunked), until the `end` event, a refusal, the client leaving or `STREAM_MAX_SECONDS`
        (API Gateway's 15 minutes). An answer that is not SSE (a problem, the JSON form) is answered as it is."""
        first = self._invoke(route, event)
        if first.status_code != 200 or not (first.mimetype or "").startswith(SSE):
            return first
        first.direct_passthrough = False
        started = time.monotonic()

        def windows() -> Iterator[bytes]:
            body = first.get_data()
            last_id = _last_id(body, None)
            yield body
            while not _ended(body) and time.monotonic() - started < STREAM_MAX_SECONDS:
                following = _next_window(event, last_id)
                answer = self._invoke(route, following)
                if answer.status_code != 200 or not (answer.mimetype or "").startswith(SSE):
                    return  # refused now (a key revoked, the job gone): the stream ends, the client may reconnect
                body = answer.get_data()
                last_id = _last_id(body, last_id)
                frames = body.split(b"\n\n", 1)[1] if body.startswith(b"retry:") else body
                # an empty window still writes (a comment): an empty chunk would end the response, and a write is
                # how a client that left is noticed
                yield frames or b": waiting\n\n"

        headers = [(k, v) for k, v in first.headers.items() if k.lower() not in ("content-length",)]
        return Response(windows(), status=200, headers=headers, direct_passthrough=True)

    def start(self, host: str, port: int) -> int:
        """Serve in a daemon thread; returns the bound port (`port=0` picks a free one)."""
        self._server = make_server(host, port, self, threaded=True, request_handler=ProblemRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="longhaul-frontdoor", daemon=True)
        self._thread.start()
        return int(self._server.server_port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None
