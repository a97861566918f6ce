"""The web console's routes of the API function: `GET /console` and every path under it.

The console is static files shipped in the code asset (`lambdas/console/`): one page, its script and its style,
served by this function wherever it runs (through API Gateway on AWS, the front door locally), so nothing is
fetched from another host; the Content-Security-Policy says so to the browser too. The page is the same for every
path under `/console/` (the script routes by the path); `assets/<name>` are its files. No key is needed to load
it: the page asks for one and calls the JSON API with it, so what a key's role may do is decided there. The page
names the manual's address (`LONGHAUL_MANUAL_URL`), which the script links what it shows to.
"""

from __future__ import annotations

import hashlib
import html
from functools import cache
from pathlib import Path
from typing import NamedTuple

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter, Router
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from longhaul.core.problems import NotFound
from longhaul.core.settings import get_settings

router = Router()
CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
PREFIX = "/console"
ASSETS_PATH = "assets/"
PAGE = "index.html"
VERSIONED = ("app.js", "graph.js", "trace.js", "style.css")
MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
# Every fetch of the page goes to its own origin: scripts, styles and API calls; images only as data: URLs.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidated by ETag: a deploy's new console is seen at once
}


def is_console_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class Asset(NamedTuple):
    body: str
    media_type: str
    etag: str


def asset(name: str) -> Asset | None:
    """A file of the console by its name (no folders): read once per sandbox and version of the file."""
    path = CONSOLE_DIR / name
    if "/" in name or name.startswith(".") or path.suffix not in MEDIA_TYPES or not path.is_file():
        return None
    return _read(path, path.stat().st_mtime_ns)


@cache
def _read(path: Path, _version: int) -> Asset:
    body = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(body.encode()).hexdigest()[:20]
    return Asset(body, f"{MEDIA_TYPES[path.suffix]}; charset=utf-8", f'"{digest}"')


def _stage_prefix(router: BaseRouter) -> str:
    """The path the API is served under (`/prod` through API Gateway's default endpoint, empty locally)."""
    event = router.current_event
    assert isinstance(event, APIGatewayProxyEvent)  # the function is a REST API's integration
    full_path = event.request_context.path or event.path
    return full_path[: -len(event.path)] if full_path.endswith(event.path) else ""


def _page(router: BaseRouter) -> Asset:
    page = asset(PAGE)
    assert page is not None, "the console's page ships with the code"
    base = f"{_stage_prefix(router)}{PREFIX}/"
    body = page.body.replace("{{base}}", base)
    # Where the console's "?" links go (`LONGHAUL_MANUAL_URL`): a path of this origin gets the stage's prefix.
    manual = get_settings().manual_url
    manual = f"{_stage_prefix(router)}{manual}" if manual.startswith("/") else manual
    body = body.replace("{{manual}}", html.escape(manual, quote=True))
    for name in VERSIONED:  # each asset's URL names its content: a deploy's new file is fetched at once
        found = asset(name)
        body = body.replace(f"{{{{v:{name}}}}}", found.etag.strip('"')[:8] if found else "")
    return Asset(body, page.media_type, f'"{hashlib.sha256(body.encode()).hexdigest()[:20]}"')


def _answer(router: BaseRouter, found: Asset) -> Response[str]:
    if router.current_event.get_header_value("If-None-Match") == found.etag:
        return Response(status_code=304, body="", headers={**SECURITY_HEADERS, "ETag": found.etag})
    headers = {**SECURITY_HEADERS, "ETag": found.etag}
    return Response(status_code=200, content_type=found.media_type, body=found.body, headers=headers)


@router.get(PREFIX, include_in_schema=False)
def console_page() -> Response[str]:
    return _answer(router, _page(router))


@router.get(PREFIX + "/.+", include_in_schema=False)  # a regular expression: any path under /console/
def console_path() -> Response[str]:
    rest = router.current_event.path[len(PREFIX) + 1 :]
    if not rest.startswith(ASSETS_PATH):
        return _answer(router, _page(router))  # a page of the console (/console/jobs/…): the script routes it
    found = asset(rest[len(ASSETS_PATH) :])
    if found is None:
        raise NotFound(f"the console has no asset {rest[len(ASSETS_PATH) :]!r}")
    return _answer(router, found)
