"""The OCR worker's entrypoint: run one page batch of the `ocr_pages` step and report through the task token.

Started by `ecs:runTask.waitForTaskToken` (on AWS a Fargate task, locally a subprocess started by the patched
RunTask) with the token and the step's event in its environment. It runs the step through the same runner as
every Lambda step (live-job check, checkpoint, events, commit only while the job runs), sending heartbeats
meanwhile, then `SendTaskSuccess` with the step's output (references only) or `SendTaskFailure` with the typed
error's class name (the ASL error name the Retry and Catch of the state machine match).

It stops without committing when the job is no longer running (checked between pages), when a heartbeat is
refused (the execution was stopped, or the task already timed out and was retried) and on SIGTERM (StopTask).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from longhaul.adapters import aws
from longhaul.core import faults, metering
from longhaul.core.errors import CancelledError, InternalError, LonghaulError
from longhaul.core.faults import HANG, CrashFault, FaultInjector
from longhaul.core.settings import Env
from longhaul.core.step_events import StepEvent
from longhaul.documents import ocr
from longhaul.engine.failures import sanitize
from longhaul.engine.runner import run_step

LOG = logging.getLogger("longhaul.workers.ocr")
DEFAULT_HEARTBEAT_SECONDS = 30.0
# The task size when the environment does not say (the house policy's: 2 vCPU, 4 GB).
DEFAULT_TASK_CPU = 2048
DEFAULT_TASK_MEMORY_MB = 4096
# A `hang` fault's worker stays silent this many heartbeat intervals (twice the state machine's heartbeat bound,
# by then its task was timed out and retried), then exits without reporting, as a stuck container killed would.
HANG_INTERVALS = 8
# The token is no longer waited for: the execution stopped, the task timed out, or it was already answered.
TOKEN_GONE = {"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"}


class Heartbeat:
    """Sends `SendTaskHeartbeat` every `interval` seconds on a thread; `check()` raises `CancelledError` once the
    token is refused or the task was told to stop."""

    def __init__(self, client: Any, token: str, interval: float) -> None:
        self._client, self._token, self._interval = client, token, interval
        self.stopping = threading.Event()  # SIGTERM, or the work is over
        self.lost: str | None = None
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def beat(self) -> None:
        try:
            self._client.send_task_heartbeat(taskToken=self._token)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in TOKEN_GONE:
                self.lost = code
            else:
                LOG.warning("heartbeat failed: %s", code)  # a throttled heartbeat is retried on the next beat
        except BotoCoreError as error:
            LOG.warning("heartbeat failed: %s", error)

    def _run(self) -> None:
        while not self.stopping.wait(self._interval) and self.lost is None:
            self.beat()

    def check(self) -> None:
        if self.lost is not None:
            raise CancelledError(f"the task token is no longer waited for ({self.lost}); OCR stopped")
        if self.stopping.is_set():
            raise CancelledError("the task is being stopped; OCR stopped")

    def close(self) -> None:
        self.stopping.set()


#: Where the OCR engine caches its optimized models (default: a temporary directory).
OCR_CACHE_DIR_ENV = "LONGHAUL_OCR_CACHE_DIR"
#: The log level of the local platform and of a worker task (`DEBUG`, `INFO`, `WARNING`…).
LOG_LEVEL_ENV = "LONGHAUL_LOG_LEVEL"


def _engine() -> ocr.OcrEngine:
    from workers.ocr.engine import PpOcrEngine

    return PpOcrEngine(cache_dir=os.environ.get(OCR_CACHE_DIR_ENV))


class _LazyEngine:
    """Loads the models on the first page: a checkpointed or cancelled batch never pays for them."""

    name = "pp-ocrv5-onnx"

    def __init__(self) -> None:
        self._engine: ocr.OcrEngine | None = None

    def read_page(self, pdf: bytes, page_number: int) -> list[ocr.OcrLine]:
        if self._engine is None:
            self._engine = _engine()
            self.name = self._engine.name
        return self._engine.read_page(pdf, page_number)


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(env[Env.STEP_EVENT])
    event["attempt"] = int(env.get(Env.STEP_ATTEMPT) or event.get("attempt") or 0)
    StepEvent.model_validate(event)
    return event


def _task_size(env: Mapping[str, str]) -> metering.Compute:
    """The Fargate task's size, as its task definition declares it (what the step's usage is billed at)."""
    cpu = int(env.get(Env.TASK_CPU) or DEFAULT_TASK_CPU)
    return metering.Compute("fargate", memory_mb=int(env.get(Env.TASK_MEMORY_MB) or DEFAULT_TASK_MEMORY_MB), cpu=cpu)


def _report(
    client: Any, token: str, *, output: Mapping[str, Any] | None = None, error: LonghaulError | None = None
) -> None:
    try:
        if error is None:
            client.send_task_success(taskToken=token, output=json.dumps(output or {}))
        else:
            client.send_task_failure(taskToken=token, error=type(error).__name__, cause=sanitize(error.message))
    except ClientError as failure:  # the execution no longer waits (stopped, timed out): nothing to tell it
        LOG.info("task token not answered: %s", failure.response.get("Error", {}).get("Code", ""))


def run(env: Mapping[str, str], engine: ocr.OcrEngine | None = None) -> int:
    """One task: the exit code (0 reported, 1 crashed without reporting, as a killed container would)."""
    from longhaul.services import services

    token, event = env[Env.TASK_TOKEN], _event(env)
    client = aws.client("stepfunctions")
    interval = float(env.get(Env.HEARTBEAT_SECONDS) or DEFAULT_HEARTBEAT_SECONDS)
    heartbeat = Heartbeat(client, token, interval)
    if threading.current_thread() is threading.main_thread():

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            heartbeat.stopping.set()  # the current page finishes, then the step stops before it commits

        signal.signal(signal.SIGTERM, on_sigterm)
    injected = env.get(Env.INJECT_FAULT)
    if injected == HANG:  # a worker that stops heartbeating: the state machine times it out and retries
        heartbeat.stopping.wait(interval * HANG_INTERVALS)
        return 1
    if injected:
        faults.install(FaultInjector(f"{event['step']}#{event['item']}={injected}x1"))
    heartbeat.start()
    try:
        with (
            ocr.running_in(ocr.OcrWorker(engine=engine or _LazyEngine(), check=heartbeat.check)),
            metering.running_on(_task_size(env)),
        ):
            output = run_step(event, services())
    except CrashFault:
        LOG.error("worker crashed before its checkpoint (injected)")
        return 1
    except LonghaulError as error:
        _report(client, token, error=error)
        return 0
    except Exception as error:  # bookkeeping outside the runner's classification: report it typed
        LOG.exception("OCR worker failed")
        _report(client, token, error=InternalError(f"unexpected {type(error).__name__}"))
        return 0
    finally:
        heartbeat.close()
    _report(client, token, output=output)
    return 0


def main() -> int:
    logging.basicConfig(level=os.environ.get(LOG_LEVEL_ENV, "INFO"), format="%(levelname)s %(name)s %(message)s")
    return run(os.environ)
