"""The Step Functions interpreter's waits follow the time scale and end when their execution stops; a stop ends an
execution at once; a failure is logged as one line, an expected stop quietly."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from local.moto_patches.core import _original, _replace, _restore

LOG = logging.getLogger(__name__)  # not under "longhaul" (the handlers' Powertools logger: it does not propagate)


# --- interpreter waits: scaled by the time scale, released when the execution stops --------------------------

_INTERPRETER = threading.local()  # .envs: the interpreter environments of the evaluations on this thread


def _env_stopped(env: Any) -> Callable[[], bool]:
    return lambda: not env.is_running()


def _current_stop() -> Callable[[], bool] | None:
    envs = getattr(_INTERPRETER, "envs", None)
    return _env_stopped(envs[-1]) if envs else None


@contextmanager
def _evaluating(env: Any) -> Iterator[None]:
    envs = _INTERPRETER.__dict__.setdefault("envs", [])
    envs.append(env)
    try:
        yield
    finally:
        envs.pop()


def _scaled_wait(seconds: float | None, **kwargs: Any) -> bool:
    from local.lambda_runtime import scaled_wait

    return scaled_wait(seconds, **kwargs)


class _InterpreterEvent:
    """`threading.Event` for `ExecutionState._evaluate_with_timeout`: its `wait(timeout)` is scaled (never below
    `TASK_TIMEOUT_FLOOR_SECONDS` of real time) and stop-aware, woken (`lambda_runtime.wake_waits`) when the scale
    changes or an execution stops."""

    def __init__(self) -> None:
        from local.lambda_runtime import Waker

        self._event = Waker()  # woken when the scale changes or an execution stops, not polled
        self._stop = _current_stop()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        from local.lambda_runtime import TASK_TIMEOUT_FLOOR_SECONDS

        return _scaled_wait(timeout, event=self._event, stop=self._stop, min_real=TASK_TIMEOUT_FLOOR_SECONDS)


class _ThreadingWithInterpreterEvents(types.ModuleType):
    """Stands in for `threading` in `execute_state`: `Event` is `_InterpreterEvent`, the rest is `threading`'s."""

    Event = _InterpreterEvent

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


class _TimeWithScaledSleep(types.ModuleType):
    """Stands in for `time` in `retrier_decl`: `sleep` is scaled and stop-aware, the rest is `time`'s."""

    @staticmethod
    def sleep(seconds: float) -> None:
        _scaled_wait(seconds, stop=_current_stop())

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _evaluate_with_timeout(self: Any, env: Any) -> None:
    """`ExecutionState._evaluate_with_timeout`, its wait stop-aware; a Task's end after the stop is not a failure.

    When the execution stops (or its frame ends otherwise) while the Task runs, the wait returns early and upstream
    raises `EvalTimeoutError` (or the Task's own error): reported, that would add a TaskTimedOut/TaskFailed event,
    run Retry/Catch, and turn the ABORTED execution into FAILED. The state is left instead: `_eval_state` stops,
    the state's body sees the program is not running, nothing after it runs.
    """
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState

    with _evaluating(env):
        try:
            _original(ExecutionState, "_evaluate_with_timeout")(self, env)
        except Exception as exc:
            if env.is_running():
                raise
            LOG.debug("%s ended after its execution stopped: %s", getattr(self, "name", self), type(exc).__name__)


def _retrier_eval_body(self: Any, env: Any) -> None:
    from moto.stepfunctions.parser.asl.component.common.retry.retrier_decl import RetrierDecl

    with _evaluating(env):
        _original(RetrierDecl, "_eval_body")(self, env)


def _wait_interval(self: Any, env: Any, wait_seconds: int) -> None:
    """`WaitFunction._wait_interval`: wait `wait_seconds` (scaled) unless the program stops first."""
    if wait_seconds > 0:
        _scaled_wait(wait_seconds, stop=_env_stopped(env))


def _callback_wait(self: Any, timeout: float | None = None) -> Any:
    """`CallbackEndpoint.wait` (a `.waitForTaskToken` Task's token wait), scaled; `interrupt_all` releases it."""
    _scaled_wait(timeout, event=self._notify_event)
    return self._outcome


def _heartbeat_clear_and_wait(self: Any) -> bool:
    """`HeartbeatEndpoint.clear_and_wait` (a Task's `HeartbeatSeconds`), scaled."""
    with self._mutex:
        if self._next_heartbeat_event.is_set():
            self._next_heartbeat_event.clear()
            return True
    return _scaled_wait(self._heartbeat_seconds, event=self._next_heartbeat_event)


def _heartbeat_before_its_wait(self: Any) -> bool:
    """`CallbackEndpoint.notify_heartbeat`: a heartbeat for a token whose Task has not begun its heartbeat wait yet
    (a worker the Task started answers before the interpreter waits) is accepted, as AWS accepts any heartbeat of a
    live token; its heartbeat timer starts when the wait begins (upstream: `InvalidToken`, failing the worker)."""
    if self._heartbeat_endpoint:
        self._heartbeat_endpoint.notify()
    return True


def _activity_start_wait(self: Any, timeout_seconds: float) -> Any:
    """`ActivityTaskStartEndpoint.wait` (an activity Task waiting for a worker), scaled."""
    _scaled_wait(timeout_seconds, event=self._next_activity_task_start_event)
    return self._outcome


def _program_eval(self: Any, env: Any) -> None:
    """`Program.eval`: the state machine's own `TimeoutSeconds`, scaled (upstream: `worker_thread.join(timeout)`)."""
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.utils import TMP_THREADS

    from local.lambda_runtime import Waker, wake_waits

    timeout = self.timeout_seconds.timeout_seconds if self.timeout_seconds else None
    env.next_state_name = self.start_at.start_at_name
    done = Waker()

    def evaluate() -> None:
        try:
            EvalComponent.eval(self, env)
        finally:
            done.set()

    worker_thread = threading.Thread(target=evaluate, daemon=True)
    TMP_THREADS.append(worker_thread)
    worker_thread.start()
    if not _scaled_wait(timeout, event=done):
        env.set_timed_out()
        wake_waits()  # its states' waits notice the stop now


def _wait_hooks() -> list[tuple[object, str, object]]:
    """(owner, attribute, replacement) of every interpreter wait; `tests/unit/test_time_scale.py` pins each."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.program.program import Program
    from moto.stepfunctions.parser.asl.component.state.exec import execute_state
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
    from moto.stepfunctions.parser.asl.eval.callback.callback import (
        ActivityTaskStartEndpoint,
        CallbackEndpoint,
        HeartbeatEndpoint,
    )

    return [
        (execute_state, "threading", _ThreadingWithInterpreterEvents("threading")),
        (execute_state.ExecutionState, "_evaluate_with_timeout", _evaluate_with_timeout),
        (retrier_decl, "time", _TimeWithScaledSleep("time")),
        (retrier_decl.RetrierDecl, "_eval_body", _retrier_eval_body),
        (WaitFunction, "_wait_interval", _wait_interval),
        (CallbackEndpoint, "wait", _callback_wait),
        (HeartbeatEndpoint, "clear_and_wait", _heartbeat_clear_and_wait),
        (CallbackEndpoint, "notify_heartbeat", _heartbeat_before_its_wait),
        (ActivityTaskStartEndpoint, "wait", _activity_start_wait),
        (Program, "eval", _program_eval),
    ]


def scale_interpreter_waits() -> None:
    """Make every wait of the Step Functions interpreter scaled (`lambda_runtime.time_scale()`) and stop-aware.

    Scaled: Retry backoff sleeps, a Task's `TimeoutSeconds` and `HeartbeatSeconds`, a token or activity wait,
    Wait states, the state machine's `TimeoutSeconds`. Only the local waits shrink; the definition (and the
    values the execution history reports) is untouched. Stop-aware: a Task's timeout wait, a backoff sleep and
    a Wait state return as soon as the execution stops (upstream: only when the time is up, or never for a Task
    waiting without a timeout; see `stop_executions_promptly`). The `.sync` polling interval is not scaled.
    """
    for owner, name, replacement in _wait_hooks():
        _replace(owner, name, replacement)


def unscale_interpreter_waits() -> None:
    for owner, name, _ in _wait_hooks():
        _restore(owner, name)


def _parser_execution_class() -> type:
    from moto.stepfunctions.parser.backend.execution import Execution

    return Execution


def _stop_execution(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
    from moto.stepfunctions.parser.api import ExecutionStatus
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    from local.lambda_runtime import wake_waits

    worker = self.exec_worker
    if worker is not None and worker.env is None:  # started a moment ago: its program is still being parsed
        ready = threading.Event()
        for _ in range(200):
            if worker.env is not None or ready.wait(0.01):
                break
    _original(_parser_execution_class(), "stop")(self, stop_date, error, cause)
    LOG.info("execution %s stopped: %s", getattr(self, "name", "?"), error or "StopExecution")
    env = worker.env if worker is not None else None
    if env is None:
        return
    if isinstance(env.program_state(), ProgramStopped) and self.exec_status == ExecutionStatus.RUNNING:
        self.exec_status = ExecutionStatus.ABORTED
        self.stop_date = stop_date
    for endpoint in list(env.callback_pool_manager._pool.values()):
        endpoint.interrupt_all()  # token waits (and their heartbeats) return now
    wake_waits()  # and its Tasks' timeout waits, backoff sleeps and Wait states


def stop_executions_promptly() -> None:
    """`StopExecution` ends the execution at once, as in AWS.

    Upstream only marks the program stopped: the execution stays RUNNING (and `stopDate` is null) until its
    thread notices, which a Task waiting for a task token never does (it waits for `SendTaskSuccess`, then
    records TaskSucceeded after the stop); a backoff sleep or Wait state holds it for the rest of its time.
    Now the status is ABORTED (with its stop date) when `StopExecution` returns, every token wait of the execution
    is interrupted, and the waits made stop-aware by `scale_interpreter_waits` return: the execution's thread
    ends with ExecutionAborted and runs nothing after the state it was in.
    """
    _replace(_parser_execution_class(), "stop", _stop_execution)


def unstop_executions() -> None:
    _restore(_parser_execution_class(), "stop")


# --- interpreter logs: one line per failure, an expected stop at INFO ----------------------------------------

#: Error names of an expected stop: a step of a cancelled or expired job (`CancelledError`), which the state machine
#: turns into its `JobStopped` Fail state. Nothing is wrong: the job ended the way it was asked to, and the step's
#: invocation already said so in its one INFO line (`lambda_runtime.run`).
EXPECTED_STOPS = frozenset({"CancelledError", "JobStopped"})
#: A Map's iteration ended by the Map itself: the execution was stopped (a cancel, a deadline) or a sibling failed
#: beyond the tolerated count, which that sibling's own line reports.
ABORTED_ITERATION = "MapIterationAborted"
_LOGGED = "_longhaul_logged"  # set on an exception once it has been logged: each level it crosses logs it again


def _cause_line(details: Any) -> str:
    """The failure's cause, one bounded line: a Lambda error payload is reduced to its `errorMessage`."""
    import json

    spec = next(iter((details or {}).values()), None)
    cause = str((spec or {}).get("cause") or "") if isinstance(spec, dict) else ""
    try:
        parsed = json.loads(cause)
        cause = str(parsed.get("errorMessage", cause)) if isinstance(parsed, dict) else cause
    except ValueError:
        pass
    line = " ".join(cause.split())
    return line if len(line) <= 300 else line[:299] + "…"


def _log_failure_event_exception(self: Any, failure_event_exception: Any) -> None:
    """`EvalComponent._log_failure_event_exception`: one ERROR line per failure; an expected stop only at DEBUG.

    Upstream logs at ERROR, with the failing component's whole `repr` (the state, its Retry/Catch, its payload
    template) and the cause's stack trace, at every level the failure crosses (the item's Fail state, the Map...):
    several kilobytes for a cancelled job.
    """
    if getattr(failure_event_exception, _LOGGED, False):
        return
    setattr(failure_event_exception, _LOGGED, True)
    event = failure_event_exception.failure_event
    error = event.error_name.error_name if event.error_name is not None else "?"
    state = getattr(self, "name", None) or event.state_name or type(self).__name__
    level = logging.DEBUG if error in EXPECTED_STOPS or error.endswith(ABORTED_ITERATION) else logging.ERROR
    LOG.log(level, "execution failed at state %r: %s: %s", state, error, _cause_line(event.event_details))


def _log_exception(self: Any, exception: Exception) -> None:
    """`EvalComponent._log_exception`: one ERROR line, once, without the component's `repr` (DEBUG after a stop)."""
    if getattr(exception, _LOGGED, False):
        return
    with contextlib.suppress(AttributeError):  # an exception class with __slots__ is logged at every level
        setattr(exception, _LOGGED, True)
    state = getattr(self, "name", None) or type(self).__name__
    text = " ".join(str(exception).split())[:300]
    # moto's own aftermath of a stop: a branch still unwinding finds its program stopped; a Choice's comparison of a
    # path that is not there (a `when=` guarded by `IsPresent`), which its `Variable` takes as absent: no failure
    absent = type(exception).__name__ == "NoSuchJsonPathError" and type(self).__name__ == "StringJsonPath"
    level = logging.DEBUG if "ProgramStopped" in text or absent else logging.ERROR
    LOG.log(level, "execution failed at state %r: %s: %s", state, type(exception).__name__, text)


def _eval_component_class() -> type:
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    return EvalComponent


def quiet_interpreter_logs() -> None:
    """Log an interpreter failure as one line, once; an expected stop (`EXPECTED_STOPS`) only at DEBUG."""
    _replace(_eval_component_class(), "_log_failure_event_exception", _log_failure_event_exception)
    _replace(_eval_component_class(), "_log_exception", _log_exception)


def loud_interpreter_logs() -> None:
    _restore(_eval_component_class(), "_log_exception")
    _restore(_eval_component_class(), "_log_failure_event_exception")
