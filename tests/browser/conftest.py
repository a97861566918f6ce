"""The web console in a real browser: headless Chromium (Debian's `chromium`, never Playwright's own download) driven
by Playwright, against the local platform on free ports.

Every request the page makes to another host is refused and fails the test; so does a script error. Each test saves
screenshots of the pages it visits under `test-output/console/`. Without a Chromium the tests are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core import faults

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
SCREENSHOTS = ROOT / "test-output" / "console"
CHROMIUM = os.environ.get("LONGHAUL_CHROMIUM", "/usr/bin/chromium")
# Debian's Chromium as a test browser: no sandbox (containers), no GPU, no QUIC, nothing of its own on the network.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TERMINAL = {"completed", "failed", "cancelled", "expired"}
TIME_SCALE = 0.1
VIEWPORT = {"width": 1440, "height": 1000}


@pytest.fixture(scope="session")
def chromium() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(
            f"no Chromium at {CHROMIUM}: the browser tests need Debian's chromium (apt-get install -y chromium; "
            ".ci/run installs it), or LONGHAUL_CHROMIUM naming another"
        )
    return CHROMIUM


@pytest.fixture(scope="session")
def platform(chromium: str) -> Iterator[LocalPlatform]:
    running = LocalPlatform.current() or LocalPlatform.start(ROOT, time_scale=TIME_SCALE)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def browser_context(chromium: str, platform: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One browser with a fresh profile; each test opens its own tabs (so its own session storage: its own key)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport=VIEWPORT,
        )
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()


class Tabs:
    """The browser tabs of one test, with what they did that a test must not allow."""

    def __init__(self, context: Any, origin: str, name: str) -> None:
        self.context, self.origin, self.name = context, origin, name
        self.foreign: list[str] = []
        self.errors: list[str] = []
        self.pages: list[Any] = []
        self.shots = 0

    def open(self, path: str = "/console", route: tuple[str, Any] | None = None) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        if route:
            page.route(*route)
        page.goto(self.origin + path)
        self.pages.append(page)
        return page

    def sign_in(self, key: str, path: str = "/console", route: tuple[str, Any] | None = None) -> Any:
        """A tab signed in with `key` at `path`; `route` (a URL pattern and a handler) is installed before it loads."""
        page = self.open(path, route)
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("button", name="Sign out").wait_for()
        return page

    def shoot(self, page: Any, what: str) -> Path:
        self.shots += 1
        path = SCREENSHOTS / f"{self.name}-{self.shots:02d}-{what}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


def _test_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:60]


@pytest.fixture
def tabs(browser_context: Any, platform: LocalPlatform, request: pytest.FixtureRequest) -> Iterator[Tabs]:
    assert platform.api_url
    origin = platform.api_url
    opened = Tabs(browser_context, origin, _test_name(request))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def only_this_host(route: Any) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlsplit(url).netloc == urlsplit(origin).netloc:
            route.continue_()
        else:
            opened.foreign.append(url)
            route.abort()

    browser_context.route("**/*", only_this_host)
    faults.install(faults.FaultInjector())
    try:
        yield opened
    finally:
        browser_context.unroute("**/*", only_this_host)
        faults.install(faults.FaultInjector())
        for page in opened.pages:
            page.close()
    assert opened.foreign == [], f"the console asked another host: {opened.foreign}"
    assert opened.errors == [], f"script errors: {opened.errors}"


class Api:
    """A key's calls to the API, as a client app makes them (to set up what the browser then shows)."""

    def __init__(self, platform: LocalPlatform, name: str) -> None:
        assert platform.api_url
        self.base, self.key = platform.api_url, platform.key_for(name)

    def get(self, path: str) -> dict[str, Any]:
        response = requests.get(self.base + path, headers={"Authorization": f"Bearer {self.key}"}, timeout=30)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(
            self.base + path,
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            timeout=30,
        )
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def submit(self, **changes: Any) -> str:
        body = {**json.loads((SAMPLES / "request.json").read_text()), **changes}
        response = requests.post(
            self.base + "/v1/jobs",
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 202, response.text
        return str(response.json()["job_id"])

    def wait(self, job_id: str, until: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            job = self.get(f"/v1/jobs/{job_id}")
            return job if until(job) else None

        return wait_until(reached, timeout=180, interval=0.3, what=f"job {job_id} {what}")


@pytest.fixture
def alpha(platform: LocalPlatform) -> Api:
    return Api(platform, "alpha")


@pytest.fixture
def beta(platform: LocalPlatform) -> Api:
    return Api(platform, "beta")


@pytest.fixture
def alpha_reviewer(platform: LocalPlatform) -> Api:
    return Api(platform, "alpha-reviewer")


@pytest.fixture
def keys(platform: LocalPlatform) -> dict[str, str]:
    return {k.label: k.key for k in platform.keys}
