"""The moto server: which backend serves a host, worked out once per host."""

from __future__ import annotations

from typing import Any

from local.moto_patches.core import _original, _replace, _restore

# --- moto server: which backend serves a host, worked out once per host --------------------------------------

_BACKEND_FOR_HOST: dict[tuple[int, str | None], Any] = {}  # (id of the dispatcher, host) -> backend name or None


def _dispatcher_class() -> type:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    return DomainDispatcherApplication


def _backend_for_host(self: Any, host: str | None) -> Any:
    """`DomainDispatcherApplication.get_backend_for_host`, memoized per server and host."""
    key = (id(self), host)
    try:
        return _BACKEND_FOR_HOST[key]
    except KeyError:
        backend = _original(_dispatcher_class(), "get_backend_for_host")(self, host)
        _BACKEND_FOR_HOST[key] = backend
        return backend


def resolve_backends_once() -> None:
    """Make the moto server find the backend of a request's host once per host, not on every request.

    Upstream's `get_application` runs, for every request and under the server's one lock, `get_backend_for_host`:
    a listing of moto's package directory with an `isdir` per entry (`backends.list_of_moto_modules`), then a match
    against hundreds of URL patterns. Every AWS call of the local platform (the handlers', the interpreter's, the
    front door's) passes that lock: in a 50-client burst of submissions nearly every busy thread was waiting there.
    The answer depends only on the host and on moto's installed modules and URL patterns, which do not change while
    the server runs, so it is memoized per server and host.
    """
    _replace(_dispatcher_class(), "get_backend_for_host", _backend_for_host)


def resolve_backends_every_time() -> None:
    _restore(_dispatcher_class(), "get_backend_for_host")
    _BACKEND_FOR_HOST.clear()
