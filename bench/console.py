"""Benchmark: what the web console weighs and how fast a job's page draws, on the local runtime.

    make bench            # or: .venv/bin/python bench/console.py --reads 20 --loads 5

Prints the console's files (bytes, and gzip-compressed), the job graph route's latency for a completed sample job
(p50/p95 over `--reads` reads; a read is the key and job lookups, the definition, the execution's status and history
and the job's step records), the job view's for comparison, and, when Debian's Chromium is there, the time from
opening a job's page (signed in) to its graph drawn, over `--loads` loads. The machine's cores and load average come
first: the local runtime is one process sharing them. Asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.deploy import wait_until  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402
from tests.browser.conftest import CHROMIUM  # noqa: E402  (the browser tests' Chromium and its flags)
from tests.browser.conftest import CHROMIUM_FLAGS as FLAGS  # noqa: E402

CONSOLE = ROOT / "lambdas" / "console"


def timings(read: object, count: int) -> list[float]:
    found = []
    for _ in range(count):
        started = time.perf_counter()
        read()  # type: ignore[operator]
        found.append(time.perf_counter() - started)
    return found


def summary(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms (n={len(ordered)})"


def page_loads(platform: LocalPlatform, key: str, job_id: str, loads: int) -> list[float] | None:
    if not os.access(CHROMIUM, os.X_OK):
        return None
    from playwright.sync_api import sync_playwright

    found = []
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=FLAGS, viewport={"width": 1440, "height": 1000}
        )
        page = context.new_page()
        page.goto(f"{platform.api_url}/console")
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("button", name="Sign out").wait_for()
        for _ in range(loads):
            started = time.perf_counter()
            page.goto(f"{platform.api_url}/console/jobs/{job_id}")
            page.locator('svg .node[data-state="Job completed"]').wait_for()
            found.append(time.perf_counter() - started)
        context.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores, load average {load}")

    files = sorted(p for p in CONSOLE.iterdir() if p.is_file())
    raw = sum(p.stat().st_size for p in files)
    packed = sum(len(gzip.compress(p.read_bytes(), 9)) for p in files)
    print(f"console files: {', '.join(p.name for p in files)}: {raw:,} bytes, {packed:,} gzip-compressed")

    platform = LocalPlatform.start(ROOT, time_scale=0.1)
    try:
        assert platform.api_url
        key = platform.key_for("alpha")
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        body = json.loads((ROOT / "samples" / "request.json").read_text())
        job_id = requests.post(f"{platform.api_url}/v1/jobs", json=body, headers=headers, timeout=30).json()["job_id"]
        wait_until(
            lambda: (
                requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=30).json()["status"]
                == "completed"
                or None
            ),
            timeout=300,
            interval=0.3,
            what="the sample job",
        )
        graph_url, view_url = f"{platform.api_url}/v1/jobs/{job_id}/graph", f"{platform.api_url}/v1/jobs/{job_id}"
        graph = requests.get(graph_url, headers=headers, timeout=30).json()
        print(
            f"job graph ({graph['workflow']}): {len(graph['nodes'])} states, {len(graph['edges'])} transitions, "
            f"{sum(1 for n in graph['nodes'] if n['entered'])} entered"
        )
        with requests.Session() as session:
            session.headers.update(headers)
            for name, url in (("GET …/graph", graph_url), ("GET /v1/jobs/{id}", view_url)):
                read = timings(lambda u=url: session.get(u, timeout=30).raise_for_status(), args.reads)
                print(f"{name}:", summary(read))
        loads = page_loads(platform, key, job_id, args.loads)
        if loads is None:
            print(f"job page in Chromium: skipped (no Chromium at {CHROMIUM})")
        else:
            print("job page in Chromium, open to graph drawn:", summary(loads))
    finally:
        platform.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
