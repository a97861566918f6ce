"""The README's promise: `make run` starts the platform and prints a curl that submits the sample job."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
import requests

from local.deploy import wait_until
from tests.workflows.conftest import ROOT, TERMINAL


@pytest.fixture
def local_platform_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = {**os.environ, "LONGHAUL_PORT": "0", "LONGHAUL_MOTO_PORT": "0", "PYTHONUNBUFFERED": "1"}
    for name in ("AWS_ENDPOINT_URL", "MOTO_PORT"):  # this test process's own platform must not leak into it
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True).start()
    banner: list[str] = []

    def ready() -> bool | None:
        while not lines.empty():
            banner.append(lines.get())
        if process.poll() is not None:
            raise AssertionError("`python -m local` exited:\n" + "".join(banner))
        return True if any("Ctrl-C stops" in line for line in banner) else None

    try:
        wait_until(ready, timeout=180, interval=0.2, what="the local platform's banner")
        yield process, "".join(banner)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_the_printed_curl_submits_the_sample_and_the_job_completes(local_platform_process):
    process, banner = local_platform_process
    match = re.search(r"(curl -sS -X POST .*?--data @samples/request\.json)", banner, re.DOTALL)
    assert match, banner
    submitted = subprocess.run(
        ["bash", "-c", match.group(1) + " -w '\\n%{http_code}'"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    body, status = submitted.stdout.rsplit("\n", 1)
    assert status == "202", submitted.stdout + submitted.stderr
    accepted = json.loads(body)
    key = re.search(r"Bearer (\S+?)\"", match.group(1)).group(1)

    def finished() -> dict | None:
        job = requests.get(accepted["status_url"], headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        return job if job["status"] in TERMINAL else None

    assert wait_until(finished, timeout=120, interval=0.2)["status"] == "completed"
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
