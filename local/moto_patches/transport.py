"""The process's own AWS calls reach the in-memory AWS without a socket: a botocore request to a moto server of this
process is answered by that server's application on the calling thread.

Every AWS call of the local platform (a handler's, the Step Functions interpreter's, the front door's) was an HTTP
request over loopback to the moto server of the same process: a connection (botocore's pool reuses it, but the
server answered each on a thread of its own), the request written and parsed again, the response written and read
back, a thread switch each way. In a 50-client burst of submissions that was most of the platform's time; none of it
is what AWS does for the caller. In process, the request goes through the same application (the same dispatch by
host and signature, the same URL rules, the same IAM enforcement, the same patches) with the same headers and body;
only the socket is gone, and Flask's request and application contexts around moto's view, which moto does not use
(its view reads only the request). Clients of other processes (the CLI, a test's HTTP client, `aws --endpoint-url`)
still use the server's port.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from typing import Any
from urllib.parse import unquote, urlsplit

from local.moto_patches.core import _original, _replace, _restore

LOG = logging.getLogger(__name__)
#: The body werkzeug's server answers an application's exception with.
INTERNAL_ERROR = b"<!doctype html><title>500 Internal Server Error</title><h1>Internal Server Error</h1>"

_APPLICATIONS: dict[str, Any] = {}  # "host:port" -> the WSGI application a server of this process serves there
_APPLICATIONS_LOCK = threading.Lock()


def serve_in_process(netloc: str, application: Any) -> None:
    """Route this process's botocore requests to `http://<netloc>` to `application` directly."""
    with _APPLICATIONS_LOCK:
        _APPLICATIONS[netloc] = application


def stop_serving_in_process(netloc: str) -> None:
    with _APPLICATIONS_LOCK:
        _APPLICATIONS.pop(netloc, None)


def _endpoint_class() -> Any:
    from botocore.endpoint import Endpoint

    return Endpoint


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    read = getattr(body, "read", None)
    if read is None:
        return bytes(body)
    data = read()
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


#: Headers the in-process call does not pass on: the body is whole (no `100-continue`, no chunks) and its length is
#: the environ's own `CONTENT_LENGTH`.
_NOT_PASSED = frozenset({"expect", "content-length", "transfer-encoding"})


def _latin1(text: str) -> str:
    """A WSGI environ's string: the text's UTF-8 bytes read as latin-1 (PEP 3333), as werkzeug's server makes it."""
    return text.encode("utf-8").decode("latin-1")


def _environ(request: Any, url: Any) -> dict[str, Any]:
    """The WSGI environ the moto server's request handler makes of the request (werkzeug's `make_environ`, then
    moto's `MotoRequestHandler.make_environ`, which keeps S3 metadata names with underscores), built directly."""
    from moto.core.request import (
        PRESERVED_HEADER_NAMES_ENVIRON_KEY,
        environ_key_for_header,
        should_preserve_original_header_name,
    )

    body = _body_bytes(request.body)
    path = url.path or "/"
    target = f"{path}?{url.query}" if url.query else path
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url.scheme or "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": _latin1(unquote(path)),
        "QUERY_STRING": _latin1(url.query),
        "REQUEST_URI": _latin1(target),
        "RAW_URI": _latin1(target),
        "REMOTE_ADDR": "127.0.0.1",
        "SERVER_NAME": url.hostname or "localhost",
        "SERVER_PORT": str(url.port or (443 if url.scheme == "https" else 80)),
        "SERVER_PROTOCOL": "HTTP/1.1",
    }
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
    headers = [(str(k), v.decode("latin-1") if isinstance(v, bytes) else str(v)) for k, v in request.headers.items()]
    headers = [(name, value.replace("\r\n", "")) for name, value in headers if name.lower() not in _NOT_PASSED]
    for name, value in headers:  # as werkzeug's server: a name with an underscore is not passed on
        if "_" in name:
            continue
        key = environ_key_for_header(name)
        environ[key] = f"{environ[key]},{value}" if key.startswith("HTTP_") and key in environ else value
    environ.setdefault("HTTP_HOST", url.netloc)
    # As moto's request handler: S3 metadata names may hold underscores; kept with their spelling (never in place of
    # a dashed name).
    dashed = {environ_key_for_header(name) for name, _ in headers if "_" not in name}
    names: dict[str, str] = {}
    values: dict[str, list[str]] = {}
    for name, value in headers:
        key = environ_key_for_header(name)
        if should_preserve_original_header_name(name) and key not in dashed:
            names.setdefault(key, name)
            values.setdefault(key, []).append(value)
    environ.update({key: ",".join(joined) for key, joined in values.items()})
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = names
    return environ


def _view(app: Any, request: Any) -> Any:
    """The moto view the backend's Flask application routes `request` to (as Flask matches it), or None: no match,
    or a view other than moto's wrapper of a response method (the moto API's pages)."""
    from moto.core.utils import convert_to_flask_response
    from werkzeug.exceptions import HTTPException

    try:
        endpoint, _ = app.create_url_adapter(request).match()
    except HTTPException:  # not found, method not allowed, a redirect: as Flask answers it
        return None
    view = app.view_functions.get(endpoint)
    return view if isinstance(view, convert_to_flask_response) else None


def _answer(application: Any, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """What the server's application answers `environ`: the backend's response method called as moto's Flask view
    calls it, without Flask's request and application contexts around it.

    The dispatcher picks the backend's Flask application by host and signature; its URL map picks the view; the view
    is moto's `convert_to_flask_response` around a response method, whose call is repeated here (the request as the
    application's request class makes it of the environ, the recorder, a `ClientError` as a 400, `HEAD`'s length);
    the response is the application's response class, finished for this environ as its WSGI call finishes it (an
    `HTTPException` the method raises answers with its own response, as Flask answers it). Anything else (the moto
    API's pages, a path no rule matches) goes through the whole WSGI application.
    """
    from botocore.exceptions import ClientError
    from moto.moto_api import recorder
    from werkzeug.exceptions import HTTPException
    from werkzeug.test import run_wsgi_app

    app = application.get_application(environ)
    request = app.request_class(environ)
    view = _view(app, request)
    if view is None:
        return _finished(*run_wsgi_app(application, environ, buffered=True))
    recorder._record_request(request)
    try:
        result = view.callback(request, request.raw_url, dict(request.headers))
    except ClientError as exc:
        result = 400, {}, exc.response["Error"]["Message"]
    except HTTPException as exc:  # as Flask answers one its view raises: the exception's own response
        return _finished(*exc.get_response(environ).get_wsgi_response(environ))
    code, headers, content = result if len(result) == 3 else (200, {}, result)
    response = app.response_class(response=content, status=code, headers=headers)
    if request.method == "HEAD" and "content-length" in headers:
        response.headers["Content-Length"] = headers["content-length"]
    return _finished(*response.get_wsgi_response(environ))


def _finished(app_iter: Any, status: str, headers: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    try:
        body = b"".join(app_iter)
    finally:
        close = getattr(app_iter, "close", None)
        if close is not None:
            close()
    return int(status.split(" ", 1)[0]), list(headers), body


def _send(self: Any, request: Any) -> Any:
    """`botocore.endpoint.Endpoint._send`: in process when a server of this process serves the request's host."""
    url = urlsplit(request.url)
    application = _APPLICATIONS.get(url.netloc)
    if application is None:
        return _original(_endpoint_class(), "_send")(self, request)
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse

    try:
        status, headers, body = _answer(application, _environ(request, url))
    except Exception:  # as the server answers an exception of the application: a 500 (the caller's SDK retries it)
        LOG.error("error on request %s %s", request.method, request.url, exc_info=True)
        return AWSResponse(request.url, 500, {"Content-Type": "text/html"}, MockRawResponse(INTERNAL_ERROR))
    return AWSResponse(request.url, status, dict(headers), MockRawResponse(body))


def send_in_process() -> None:
    """Answer requests to the servers `serve_in_process` registered in process, on the calling thread."""
    _replace(_endpoint_class(), "_send", _send)


def send_over_http() -> None:
    """Send every request over its socket again (the servers stay registered, for `send_in_process`)."""
    _restore(_endpoint_class(), "_send")
