"""The moto server: which backend serves a host, worked out once per host; a request's action found by its name."""

from __future__ import annotations

import inspect
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


# --- backends: an account's backends looked up without moto's global lock once they exist ---------------------


def _backend_dict_class() -> type:
    from moto.core.base_backend import BackendDict

    return BackendDict


def _account_backends(self: Any, account_id: str) -> Any:
    """`BackendDict.__getitem__`: an account's backends read directly once they exist, created under the lock."""
    try:
        return dict.__getitem__(self, account_id)
    except KeyError:
        return _original(_backend_dict_class(), "__getitem__")(self, account_id)


def look_up_backends_without_lock() -> None:
    """Read an account's existing backends of a service without taking moto's global backend lock.

    Upstream's `BackendDict.__getitem__` takes one process-wide lock on every access to any backend (every request
    of every service passes it, often several times), lists the dict's keys and scans the list of all backend dicts
    inside it, to create an account's backends the first time. In a burst of submissions it was where most waiting
    threads stood. Reading a key that exists is a plain dict read; a missing one is still created under the lock.
    """
    _replace(_backend_dict_class(), "__getitem__", _account_backends)


def look_up_backends_under_lock() -> None:
    _restore(_backend_dict_class(), "__getitem__")


# --- moto server: whether a response class answers an action, looked up on the class -------------------------


class _ActionMethods:
    """The functions of a response class as `in` asks for them: `name in _ActionMethods(cls)` is whether `cls` has
    a function of that name (its own or inherited), as upstream's list of `inspect.getmembers` names answers."""

    def __init__(self, owner: type) -> None:
        self._owner = owner

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and inspect.isfunction(getattr(self._owner, name, None))


def _responses_module() -> Any:
    import moto.core.responses

    return moto.core.responses


def look_up_actions_by_name() -> None:
    """Find the handler of a request's action by its name on the response class, not by listing the class.

    Upstream's `BaseResponse.call_action` lists every member of the response class (`inspect.getmembers`, a sort of
    a few hundred names, each attribute read) on every request, only to ask whether the action's name is among its
    functions: a few percent of every AWS call of the local platform. The answer is the same (a function of the
    class, its own or inherited: not a property, not an attribute), asked directly, so an action a patch adds to a
    response class is found as before.
    """
    _replace(_responses_module(), "method_names_from_class", _ActionMethods)


def list_actions_of_the_class() -> None:
    _restore(_responses_module(), "method_names_from_class")
