"""The API's Powertools REST resolver: its per-request state kept per thread, and every route's responses complete.

Powertools keeps the request being resolved on the resolver object: `current_event` and `lambda_context` (even as
class attributes of `BaseRouter`, shared by every resolver), the routing `context` (the matched `_route`, its
arguments, the caller put there by the handler) and the debug stack of middlewares. A Lambda sandbox runs one
invocation at a time, so that is harmless on AWS; the local runtime runs several invocations of one function at once
in one interpreter (like several warm sandboxes), where two requests would read each other's event or route (seen
as `KeyError: '_route'`). Here each of those attributes is a property over a `threading.local`: every thread
resolves its own request, routers included (an included `Router` delegates them to its resolver). A route builds its
middleware stack on its first request; two first requests at once both built it, the second around the first (its
last frame then called a frame with the route's arguments: a 500), so the build is done once, under a lock.

A path parameter is any one path segment, as API Gateway matches `{param}`: Powertools accepts only some characters
there and answered `404 no route` for the others; here the route gets the value and validates it (a 422 naming it,
or the route's own 404). API Gateway's event carries the raw path (`%2F` is part of a segment) and the decoded
segments in `pathParameters`: a route gets its parameters decoded as those are (Powertools passed them still
encoded). A route's pattern is compiled when a request first tries it (`RoutePattern`), not at init.

Powertools documents a route's success response from its return annotation, but only when the route declares no
`responses`: declaring its problems replaced it (eleven operations had no success response). `route` here merges it
back (and the responses every route may answer) before Powertools sees them, for the app's routes and every
included router's alike.

Powertools lists the document's paths with every route that has a path parameter before every route without one
(`GET /v1/jobs/{job_id}` before `POST /v1/jobs`); Swagger UI shows a tag's operations in the document's order. Here
the paths are listed by their operations' tag, in the order of the document's `tags`, then in the order the routes
are declared: the order a client meets them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.api_gateway import Route
from aws_lambda_powertools.event_handler.openapi.constants import (
    DEFAULT_OPENAPI_RESPONSE_DESCRIPTION,
    DEFAULT_STATUS_CODE,
)
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.shared.types import AnyCallableT
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:  # the OpenAPI models are imported when a document is asked for, not at a cold start
    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI

_PARAMETER = re.compile(r"<(\w+)>")
_BUILDING = threading.Lock()
_build_middleware_stack = Route._build_middleware_stack


def _build_once(self: Route, router_middlewares: list[Callable[..., Any]], app: Any) -> None:
    """`Route._build_middleware_stack`, once per route whatever the threads (Powertools checks, then builds)."""
    with _BUILDING:
        if not self._middleware_stack_built:
            _build_middleware_stack(self, router_middlewares, app)


Route._build_middleware_stack = _build_once  # type: ignore[method-assign]


class RoutePattern:
    """A route's pattern, compiled on its first use: an init registers every route, and a request tries only the
    routes of its method. Powertools reads a route's `rule` for `groups` (whether the route has parameters, known
    without compiling) and `match`; anything else a compiled pattern has is the compiled pattern's."""

    __slots__ = ("_compiled", "groups", "pattern")

    def __init__(self, pattern: str, *, groups: int) -> None:
        self.pattern = pattern
        self.groups = groups
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern)
        return compiled

    def match(self, path: str) -> re.Match[str] | None:
        return self.compiled.match(path)

    def __getattr__(self, name: str) -> Any:  # the rest of a compiled pattern (`fullmatch`, `groupindex`…)
        if name.startswith("_"):  # its own slots before they are set (a copy being made), dunder lookups
            raise AttributeError(name)
        return getattr(self.compiled, name)


class _RequestState(threading.local):
    """One thread's request: what the resolver would otherwise keep on itself."""

    current_event: APIGatewayProxyEvent | None = None
    lambda_context: LambdaContext | None = None

    def __init__(self) -> None:
        self.context: dict[str, Any] = {}
        self.processed_stack_frames: list[str] = []


def with_success(
    responses: Mapping[int, OpenAPIResponse] | None,
    status_code: int,
    description: str,
    always: Mapping[int, OpenAPIResponse] | None = None,
) -> dict[int, OpenAPIResponse] | None:
    """A route's declared `responses` with its success response merged in when it declares none (Powertools then
    documents it from the route's return annotation, as it does for a route without `responses`), and the responses
    every route may answer (`always`) where the route does not say otherwise."""
    if not responses and not always:
        return None
    merged: dict[int, OpenAPIResponse] = {**(always or {}), **(responses or {})}
    if not any(200 <= status < 300 for status in responses or {}):
        merged[status_code] = {"description": description}
    return dict(sorted(merged.items()))


class ThreadSafeRestResolver(APIGatewayRestResolver):
    """`APIGatewayRestResolver` whose request state is per thread and whose routes document their success (see the
    module docstring). `always_responses` are documented on every route (e.g. the 500 problem)."""

    _request: _RequestState

    def __init__(
        self, *args: Any, always_responses: Mapping[int, OpenAPIResponse] | None = None, **kwargs: Any
    ) -> None:
        self._request = _RequestState()
        self._always_responses = dict(always_responses or {})
        self._declared: dict[tuple[str, str], int] = {}  # (method, rule): the order the routes are declared in
        super().__init__(*args, **kwargs)

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}/*$") -> RoutePattern | re.Pattern[str]:
        """A route's pattern: its `<name>` parameters match any one path segment (see the module docstring)."""
        pattern = base_regex.format(_PARAMETER.sub(r"(?P<\1>[^/]+)", rule))
        if "(" in rule or "(" in base_regex:  # groups of its own: only compiling counts them
            return re.compile(pattern)
        return RoutePattern(pattern, groups=len(_PARAMETER.findall(rule)))

    def route(  # Powertools' signature, positional order included (`include_router` relies on it)
        self,
        rule: str,
        method: str | list[str] | tuple[str],
        cors: bool | None = None,
        compress: bool = False,
        cache_control: str | None = None,
        summary: str | None = None,
        description: str | None = None,
        responses: dict[int, OpenAPIResponse] | None = None,
        response_description: str = DEFAULT_OPENAPI_RESPONSE_DESCRIPTION,
        tags: list[str] | None = None,
        operation_id: str | None = None,
        include_in_schema: bool = True,
        security: list[dict[str, list[str]]] | None = None,
        openapi_extensions: dict[str, Any] | None = None,
        deprecated: bool = False,
        enable_validation: bool | None = None,
        custom_response_validation_http_code: int | HTTPStatus | None = None,
        status_code: int = DEFAULT_STATUS_CODE,
        middlewares: list[Callable[..., Any]] | None = None,
    ) -> Callable[[AnyCallableT], AnyCallableT]:
        """Upstream's `route`, with the success response merged into `responses` (`with_success`)."""
        for each in (method,) if isinstance(method, str) else method:
            self._declared.setdefault((each.upper(), rule), len(self._declared))
        return super().route(
            rule,
            method,
            cors,
            compress,
            cache_control,
            summary,
            description,
            with_success(responses, status_code, response_description, self._always_responses),
            response_description,
            tags,
            operation_id,
            include_in_schema,
            security,
            openapi_extensions,
            deprecated,
            enable_validation,
            custom_response_validation_http_code,
            status_code,
            middlewares,
        )

    def _convert_matches_into_route_keys(self, match: re.Match[str]) -> dict[str, str]:
        """A route's arguments: the segments of the raw path it matched, decoded (as `pathParameters` has them)."""
        return {name: unquote(value, errors="replace") for name, value in match.groupdict().items()}

    def methods_at(self, path: str) -> list[str]:
        """The methods of the routes that match `path` (its `Allow`): none for a path no route has."""
        routes = self._static_routes + self._dynamic_routes
        return sorted({route.method.upper() for route in routes if route.rule.match(self._remove_prefix(path))})

    def get_openapi_schema(self, **kwargs: Any) -> OpenAPI:
        """Upstream's document, its paths in the order a client meets them (see the module docstring): by their
        operations' tags, in the order of the document's `tags`, then in the order the routes are declared."""
        schema = super().get_openapi_schema(**kwargs)
        declared_tags = kwargs.get("tags") or self.openapi_config.tags or []
        tag_order = [tag if isinstance(tag, str) else tag.name for tag in declared_tags]
        placed: dict[str, tuple[int, int]] = {}
        for route in self._static_routes + self._dynamic_routes:
            place = (  # (an included router's route has its tags as a set)
                min((tag_order.index(tag) for tag in route.tags or () if tag in tag_order), default=len(tag_order)),
                self._declared.get((route.method, route.path), len(self._declared)),
            )
            placed[route.openapi_path] = min(place, placed.get(route.openapi_path, place))
        last = (len(tag_order), len(self._declared))
        paths = schema.paths or {}
        schema.paths = {path: paths[path] for path in sorted(paths, key=lambda path: placed.get(path, last))}
        return schema

    # Upstream assigns these as attributes (some on `BaseRouter` itself); each is one thread's here.
    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEvent:
        event = self._request.current_event
        if event is None:
            raise RuntimeError("no request is being resolved on this thread")
        return event

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEvent) -> None:
        self._request.current_event = value

    @property
    def lambda_context(self) -> LambdaContext:
        context = self._request.lambda_context
        if context is None:
            raise RuntimeError("no request is being resolved on this thread")
        return context

    @lambda_context.setter
    def lambda_context(self, value: LambdaContext) -> None:
        self._request.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        return self._request.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._request.context = value

    @property
    def processed_stack_frames(self) -> list[str]:
        return self._request.processed_stack_frames

    @processed_stack_frames.setter
    def processed_stack_frames(self, value: list[str]) -> None:
        self._request.processed_stack_frames = value

    def resolve(self, event: Any, context: LambdaContext) -> dict[str, Any]:
        """Upstream's `resolve`, which reads the request through the properties above (its own writes go to
        `BaseRouter`'s class attributes, which nothing of this resolver reads)."""
        self.lambda_context = context
        return super().resolve(event, context)

    def _to_proxy_event(self, event: dict[str, Any]) -> BaseProxyEvent:
        proxy = super()._to_proxy_event(event)
        assert isinstance(proxy, APIGatewayProxyEvent)  # a REST API resolver converts to nothing else
        self.current_event = proxy  # upstream stores it on `BaseRouter` only
        return proxy
