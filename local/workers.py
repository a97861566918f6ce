"""Runs container workers locally: a task that moto's ECS `RunTask` records is started as a subprocess running the
same entrypoint as the image (`python -m workers.<container name>`, the Dockerfile's CMD), with the task definition's
environment, the run's container overrides and the in-memory AWS endpoint; `StopTask` terminates it (SIGTERM,
then SIGKILL after a grace period, as ECS does). See `moto_patches.run_container_tasks_locally`.

The task token round trip, heartbeats and failures are then the worker's own calls to the in-memory Step Functions,
exactly as on AWS. Local-only adjustments: the worker's heartbeat interval is multiplied by the time scale (the
interpreter's heartbeat bound is too), each task gets its own cache directory (a Fargate task has its own disk), and
a `LONGHAUL_FAULTS` entry for the step is consumed here, once per task, and handed to that task
(`LONGHAUL_INJECT_FAULT`), so `x<times>` counts the job's attempts across processes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local.lambda_runtime import DEFAULT_CODE_ROOT, ensure_code_root_on_path, time_scale

LOG = logging.getLogger("longhaul.local.workers")
STOP_GRACE_SECONDS = 30.0  # ECS's default stopTimeout: SIGTERM, then SIGKILL
WORKERS_PACKAGE = "workers"
#: A local worker task's module path: the code root first, then what the platform's own environment had.
PYTHONPATH_ENV = "PYTHONPATH"


@dataclass
class Running:
    task_arn: str
    process: subprocess.Popen[bytes]
    log_path: Path
    cache_dir: Path
    task: Any  # moto's Task: its status follows the process


_RUNNING: dict[str, Running] = {}
_LOCK = threading.Lock()
#: Commands for containers that are not workers of this repository (tests register probes here).
EXTRA_ENTRYPOINTS: dict[str, list[str]] = {}


def _pairs(entries: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    """ECS `[{"name", "value"}]` (moto keeps the casing it was given) as a mapping."""
    pairs: dict[str, str] = {}
    for entry in entries or []:
        name, value = entry.get("name", entry.get("Name")), entry.get("value", entry.get("Value"))
        if name is not None:
            pairs[str(name)] = "" if value is None else str(value)
    return pairs


def entrypoint(container: str) -> list[str] | None:
    """The worker's command, or None if this repository has no worker of that name."""
    if container in EXTRA_ENTRYPOINTS:
        return list(EXTRA_ENTRYPOINTS[container])
    if not (DEFAULT_CODE_ROOT / WORKERS_PACKAGE / container / "__main__.py").is_file():
        return None
    return [sys.executable, "-m", f"{WORKERS_PACKAGE}.{container}"]


def _injected_fault(environment: Mapping[str, str]) -> str | None:
    """Consume the configured fault for this task's (step, item), if any (once per task: one attempt)."""
    from longhaul.core.settings import Env

    raw = environment.get(Env.STEP_EVENT)
    if not raw:
        return None
    ensure_code_root_on_path()
    from longhaul.core import faults
    from longhaul.core.errors import BY_KIND

    event = json.loads(raw)
    item = event.get("item")
    return faults.active().take(
        event.get("step", ""),
        item if isinstance(item, int) else None,
        (*BY_KIND, faults.CRASH, faults.HANG),
        job_id=str((event.get("input") or {}).get("job_id", "")),
    )


def task_environment(task: Any, container: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, str]:
    """The subprocess environment: this process's (endpoint, credentials, PATH), the container's, the overrides'."""
    ensure_code_root_on_path()
    from longhaul.core.settings import Env

    environment = dict(os.environ)
    environment.update(_pairs(container.get("environment", container.get("Environment"))))
    environment.update(_pairs(overrides.get("environment", overrides.get("Environment"))))
    if Env.HEARTBEAT_SECONDS in environment:
        scaled = float(environment[Env.HEARTBEAT_SECONDS]) * time_scale()
        environment[Env.HEARTBEAT_SECONDS] = f"{max(scaled, 0.05):.3f}"
    fault = _injected_fault(environment)
    if fault:
        environment[Env.INJECT_FAULT] = fault
    code_path = [str(DEFAULT_CODE_ROOT), environment.get(PYTHONPATH_ENV)]
    environment[PYTHONPATH_ENV] = os.pathsep.join(filter(None, code_path))
    environment["ECS_TASK_ARN"] = task.task_arn
    return environment


def _task_role_environment(definition: Any) -> dict[str, str]:
    """While IAM is enforced, the task role's credentials (ECS hands a task its role's; the worker signs with them)."""
    from local.moto_patches import iam

    role = getattr(definition, "task_role_arn", None)
    if not iam.is_enforcing() or not role:
        return {}
    return iam.role_credentials(str(role), session="ecs-task").environment()


def launch(task: Any, definition: Any) -> None:
    """Start the worker of each container of `task` (a moto `Task` from `run_task`, of the task definition
    `definition`) that this repository has."""
    overrides = {
        str(o.get("name", o.get("Name"))): o
        for o in (task.overrides or {}).get("containerOverrides", (task.overrides or {}).get("ContainerOverrides", []))
    }
    for container in definition.container_definitions:
        name = str(container.get("name", container.get("Name")))
        command = entrypoint(name)
        if command is None:
            LOG.warning("task %s: no local worker for container %r; the task only is recorded", task.task_arn, name)
            continue
        environment = task_environment(task, container, overrides.get(name, {}))
        environment.update(_task_role_environment(definition))
        task_id = task.task_arn.rsplit("/", 1)[-1]
        cache_dir = Path(tempfile.mkdtemp(prefix=f"longhaul-{name}-{task_id[:8]}-"))
        environment["LONGHAUL_OCR_CACHE_DIR"] = str(cache_dir / "cache")
        log_path = cache_dir / "worker.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(  # our own interpreter and module
                command, env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=str(cache_dir)
            )
        running = Running(task.task_arn, process, log_path, cache_dir, task)
        with _LOCK:
            _RUNNING[task.task_arn] = running
        task.last_status = "RUNNING"
        threading.Thread(target=_watch, args=(running,), name=f"worker-{task_id[:8]}", daemon=True).start()
        LOG.info("task %s: started %s (pid %d)", task.task_arn, " ".join(command[1:]), process.pid)


def _watch(running: Running) -> None:
    code = running.process.wait()
    with _LOCK:
        _RUNNING.pop(running.task_arn, None)
    running.task.last_status = running.task.desired_status = "STOPPED"
    if code != 0:
        tail = running.log_path.read_text(errors="replace")[-2000:] if running.log_path.exists() else ""
        LOG.warning("task %s: worker exited %d\n%s", running.task_arn, code, tail)
    shutil.rmtree(running.cache_dir, ignore_errors=True)


def stop(task_arn: str, *, grace_seconds: float = STOP_GRACE_SECONDS) -> bool:
    """SIGTERM the task's worker, SIGKILL it if it still runs after the grace period; False if none runs."""
    with _LOCK:
        running = _RUNNING.get(task_arn)
    if running is None or running.process.poll() is not None:
        return False
    running.process.terminate()

    def kill_after_grace() -> None:
        try:
            running.process.wait(grace_seconds * time_scale())
        except subprocess.TimeoutExpired:
            running.process.kill()

    threading.Thread(target=kill_after_grace, daemon=True).start()
    return True


def running_tasks(group: str | None = None) -> list[str]:
    """The tasks whose worker still runs (of one ECS group, e.g. `longhaul:<job id>`, if given)."""
    with _LOCK:
        return [
            arn
            for arn, r in _RUNNING.items()
            if r.process.poll() is None and (group is None or getattr(r.task, "group", None) == group)
        ]


def stop_all() -> int:
    """Kill every worker still running (platform stop or reset); the number killed."""
    with _LOCK:
        running = list(_RUNNING.values())
    for r in running:
        if r.process.poll() is None:
            r.process.kill()
    for r in running:
        r.process.wait()
    return len(running)
