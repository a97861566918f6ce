"""The README's promise: `make run` starts the platform and prints a curl that submits the sample job."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
import requests

from local.deploy import wait_until
from local.keys import DEFAULT_WEBHOOK_SECRETS
from tests.workflows.conftest import ROOT, TERMINAL


def _local_env() -> dict[str, str]:
    env = {**os.environ, "LONGHAUL_PORT": "0", "LONGHAUL_MOTO_PORT": "0", "PYTHONUNBUFFERED": "1"}
    for name in ("AWS_ENDPOINT_URL", "MOTO_PORT"):  # this test process's own platform must not leak into it
        env.pop(name, None)
    return env


def _start_local(**env_extra: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    env = {**_local_env(), **env_extra}
    process = subprocess.Popen(
        [sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True).start()
    return process, lines


def _wait_for_banner(process: subprocess.Popen[str], lines: queue.Queue[str]) -> str:
    banner: list[str] = []

    def ready() -> bool | None:
        while not lines.empty():
            banner.append(lines.get())
        if process.poll() is not None:
            raise AssertionError("`python -m local` exited:\n" + "".join(banner))
        return True if any("Ctrl-C stops" in line for line in banner) else None

    wait_until(ready, timeout=180, interval=0.2, what="the local platform's banner")
    return "".join(banner)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _run_curl(command: str) -> dict:
    submitted = subprocess.run(
        ["bash", "-c", command + " -w '\\n%{http_code}'"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    body, status = submitted.stdout.rsplit("\n", 1)
    assert status == "202", submitted.stdout + submitted.stderr
    return dict(json.loads(body))


@pytest.fixture
def local_platform_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    process, lines = _start_local()
    try:
        yield process, _wait_for_banner(process, lines)
    finally:
        _stop(process)


def test_the_printed_curl_submits_the_sample_and_the_job_completes(local_platform_process):
    process, banner = local_platform_process
    match = re.search(r"(curl -sS -X POST .*?--data @samples/request\.json)", banner, re.DOTALL)
    assert match, banner
    # It carries an Idempotency-Key: pasting it again answers the same job instead of submitting another
    assert '-H "Idempotency-Key: ' in match.group(1), match.group(1)
    accepted, again = (_run_curl(match.group(1)) for _ in range(2))
    assert again["job_id"] == accepted["job_id"]
    # The local webhook signing secrets are printed with the keys
    for tenant, secret in DEFAULT_WEBHOOK_SECRETS.items():
        assert re.search(rf"^\s+{tenant}\s+{re.escape(secret)}$", banner, re.MULTILINE), banner
    key = re.search(r"Bearer (\S+?)\"", match.group(1)).group(1)

    def finished() -> dict | None:
        job = requests.get(accepted["status_url"], headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        return job if job["status"] in TERMINAL else None

    assert wait_until(finished, timeout=120, interval=0.2)["status"] == "completed"
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0


def test_the_printed_command_line_submits_and_watches_the_sample_to_completion(local_platform_process):
    """A new user pastes the banner's two lines (the exports, then `longhaul submit … --watch`) into a shell."""
    _, banner = local_platform_process
    exports = re.search(r"^\s*(export LONGHAUL_URL=\S+ LONGHAUL_API_KEY=\S+)$", banner, re.MULTILINE)
    submit = re.search(r"^\s*(\.venv/bin/longhaul submit samples/request\.json --watch)$", banner, re.MULTILINE)
    assert exports and submit, banner
    env = {k: v for k, v in _local_env().items() if not k.startswith("LONGHAUL_")}
    env["PYTHONPATH"] = os.pathsep.join(str(ROOT / path) for path in ("lambdas", "client/src"))  # this checkout's

    watched = subprocess.run(
        ["bash", "-c", f"{exports.group(1)}\n{submit.group(1)}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert watched.returncode == 0, watched.stdout + watched.stderr
    lines = watched.stdout.splitlines()
    assert lines[0].startswith("job_") and lines[-1].startswith("completed in"), watched.stdout
    assert "Traceback" not in watched.stderr


def test_a_restart_on_the_same_ports_works_at_once():
    """Stopping leaves the clients' connections in TIME_WAIT on both ports; starting again must not mind them."""
    api_port, moto_port = _free_ports(2)
    ports = {"LONGHAUL_PORT": str(api_port), "LONGHAUL_MOTO_PORT": str(moto_port), "LONGHAUL_LOCAL_KEYS": "alpha=k1"}
    auth = {"Authorization": "Bearer k1"}
    first, lines = _start_local(**ports)
    try:
        _wait_for_banner(first, lines)
        with requests.Session() as session:  # keep-alive connections, closed by the server when it stops
            assert session.get(f"http://127.0.0.1:{api_port}/v1/jobs", headers=auth, timeout=30).status_code == 200
            assert session.get(f"http://127.0.0.1:{moto_port}/moto-api/", timeout=30).ok
            first.send_signal(signal.SIGINT)
            assert first.wait(timeout=30) == 0
    finally:
        _stop(first)
    second, lines = _start_local(**ports)
    try:
        banner = _wait_for_banner(second, lines)
        assert f"http://127.0.0.1:{api_port}" in banner
        assert requests.get(f"http://127.0.0.1:{api_port}/v1/jobs", headers=auth, timeout=30).status_code == 200
    finally:
        _stop(second)


@pytest.mark.parametrize("held", ["LONGHAUL_PORT", "LONGHAUL_MOTO_PORT"])
def test_a_port_held_by_another_process_gets_a_clear_message_and_exit_code_1(held):
    api_port, moto_port = _free_ports(2)
    ports = {"LONGHAUL_PORT": str(api_port), "LONGHAUL_MOTO_PORT": str(moto_port)}
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", int(ports[held])))
        holder.listen()
        env = {**_local_env(), **ports}
        ran = subprocess.run(
            [sys.executable, "-m", "local"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert f"port 127.0.0.1:{ports[held]} is in use by another process" in ran.stderr, ran.stderr
    assert held in ran.stderr
