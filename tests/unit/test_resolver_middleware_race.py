"""A route's middleware stack is built once, though its first requests come at once (the local runtime runs several
invocations of a function in one interpreter): built twice, the second stack wrapped the first, and its last frame
called a frame with the route's arguments (`MiddlewareFrame.__call__() got an unexpected keyword argument`)."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import MiddlewareFrame, Route

import handlers.resolver  # installs the build-once lock


def _depth(frame: Any) -> int:
    depth = 0
    while isinstance(frame, MiddlewareFrame):
        depth, frame = depth + 1, frame.next_middleware
    return depth


def test_a_routes_middleware_stack_is_built_once_by_concurrent_first_requests(monkeypatch: Any) -> None:
    from handlers.api import app

    route = Route("GET", "/race", re.compile("^/race$"), lambda: {}, cors=False, compress=False)
    original = handlers.resolver._build_middleware_stack

    def slow(self: Route, router_middlewares: list[Any], app: Any) -> None:
        time.sleep(0.05)  # widen the window two first requests meet in
        original(self, router_middlewares, app)

    monkeypatch.setattr(handlers.resolver, "_build_middleware_stack", slow)
    threads = [
        threading.Thread(target=lambda: route._build_middleware_stack(router_middlewares=[], app=app)) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    single = Route("GET", "/alone", re.compile("^/alone$"), lambda: {}, cors=False, compress=False)
    original(single, [], app)
    assert route._middleware_stack_built and _depth(route._middleware_stack) == _depth(single._middleware_stack)
