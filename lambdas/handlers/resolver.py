"""The API's Powertools REST resolver, with its per-request state kept per thread.

Powertools keeps the request being resolved on the resolver object: `current_event` and `lambda_context` (even as
class attributes of `BaseRouter`, shared by every resolver), the routing `context` (the matched `_route`, its
arguments, the caller put there by the handler) and the debug stack of middlewares. A Lambda sandbox runs one
invocation at a time, so that is harmless on AWS; the local runtime runs several invocations of one function at once
in one interpreter (like several warm sandboxes), where two requests would read each other's event or route (seen
as `KeyError: '_route'`). Here each of those attributes is a property over a `threading.local`: every thread
resolves its own request, routers included (an included `Router` delegates them to its resolver).
"""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext


class _RequestState(threading.local):
    """One thread's request: what the resolver would otherwise keep on itself."""

    current_event: APIGatewayProxyEvent | None = None
    lambda_context: LambdaContext | None = None

    def __init__(self) -> None:
        self.context: dict[str, Any] = {}
        self.processed_stack_frames: list[str] = []


class ThreadSafeRestResolver(APIGatewayRestResolver):
    """`APIGatewayRestResolver` whose request state is per thread (see the module docstring)."""

    _request: _RequestState

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._request = _RequestState()
        super().__init__(*args, **kwargs)

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
